//go:build race

package main

// raceEnabled: the race detector keeps shadow memory that is never given back, so the soak test
// checks RSS only without it (goroutines and liveness are checked either way).
const raceEnabled = true
