//go:build unix

package proc

// stopTakesPipe: a stopped pump makes a last non-blocking pass over the
// bytes already in its pipe.
const stopTakesPipe = true
