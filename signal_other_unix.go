//go:build unix && !linux

package proc

import "os"

// waitExited: without pidfds, cmd.Wait does all the waiting.
func waitExited(int) {}

// exitsSoon cannot tell here without reaping; the exit goroutine decides.
func exitsSoon(int) bool { return false }

// haltChild cannot stop and look without reaping here: the child counts as
// alive, and the exit goroutine's ordering decides (a child that exits in
// the instant of its deadline may be reported as timed out).
func haltChild(int) bool { return false }

func resumeHalted(int) {}

// termPending cannot be read here.
func termPending(int) bool { return false }

// openPidfd: no pidfds here.
func openPidfd(int) *os.File { return nil }

// pidfdExited is not reached where openPidfd returns nil.
func pidfdExited(*os.File) bool { return false }
