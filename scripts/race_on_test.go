//go:build race

package scripts

// raceEnabled: the dry run's processes are built without -race, so `go test -race` skips it.
const raceEnabled = true
