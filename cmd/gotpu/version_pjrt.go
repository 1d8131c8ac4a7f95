//go:build !noxla

package main

// pjrtCompiledIn: this binary can load PJRT plugins (xla's build has the same switch).
const pjrtCompiledIn = true
