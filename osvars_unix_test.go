//go:build unix

package proc_test

// osAddsEnv reports whether the OS puts the variable name into a child's
// environment that did not ask for it: never on Unix.
func osAddsEnv(string) bool { return false }

// wineRefusedStart reports whether err is Wine's CreateProcess failing by
// itself: never on Unix.
func wineRefusedStart(error) bool { return false }
