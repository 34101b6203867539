//go:build unix && !linux

package proc

// waitExited: without pidfds, cmd.Wait does all the waiting.
func waitExited(int) {}

// leaderExited cannot tell here without reaping (no waitid in x/sys for
// these systems) and says no: the exit goroutine decides.
func leaderExited(int) bool { return false }

// exitsSoon: see leaderExited.
func exitsSoon(int) bool { return false }
