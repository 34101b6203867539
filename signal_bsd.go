//go:build unix && !linux

package proc

// waitGone: without pidfds (macOS, the BSDs) there is no way to wait for
// the exit of a process that is not our child without polling; a killed
// group member may outlive Close by the moment the kernel needs to tear it
// down.
func waitGone([]*procGroup) {}

// waitExited: without pidfds, cmd.Wait does all the waiting.
func waitExited(int) {}

// leaderExited cannot tell here without reaping (no waitid in x/sys for
// these systems) and says no: the exit goroutine decides.
func leaderExited(int) bool { return false }
