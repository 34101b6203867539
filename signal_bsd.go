//go:build unix && !linux

package proc

// waitExited: without pidfds, cmd.Wait does all the waiting.
func waitExited(int) {}

// leaderExited cannot tell here without reaping (no waitid in x/sys for
// these systems) and says no: the exit goroutine decides.
func leaderExited(int) bool { return false }

// leaderExiting: see leaderExited.
func leaderExiting(int) bool { return false }

// waitExitedFor is not reached where leaderExiting says no.
func waitExitedFor(int) bool { return false }
