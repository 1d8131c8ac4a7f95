//go:build noxla

package main

// pjrtCompiledIn: built with -tags noxla, this binary has only the pure-Go backends.
const pjrtCompiledIn = false
