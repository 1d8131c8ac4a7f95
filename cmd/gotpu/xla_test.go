//go:build !noxla

package main

const noXLA = false
