//go:build windows

package proc

// stopTakesPipe: a stopped pump's pipe is closed; bytes still in it are
// not read (README, Platforms).
const stopTakesPipe = false
