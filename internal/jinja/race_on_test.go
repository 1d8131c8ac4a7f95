//go:build race

package jinja

// raceEnabled: the race detector slows renders about tenfold; timing checks allow for it.
const raceEnabled = true
