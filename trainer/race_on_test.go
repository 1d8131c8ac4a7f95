//go:build race

package trainer_test

// raceEnabled: the crash harness runs fewer trials under the race detector (each child process
// is then ~10× slower); the full 50 run in the plain `go test`.
const raceEnabled = true
