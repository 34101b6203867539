//go:build race

package proc_test

// raceEnabled is true under -race, where sync.Pool drops some of what it
// is given, so allocation counts are only upper bounds.
const raceEnabled = true
