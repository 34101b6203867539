//go:build unix && !linux && !darwin

package proc

// canLookChild: this backend has no look at a child, stopped or a zombie,
// that does not reap it, so haltChild counts it alive and a deadline that
// meets the child's own exit may be reported as timed out.
const canLookChild = false

func lookChild(int) (childState, bool) { return childRunning, false }

// termPending cannot be read here.
func termPending(int) bool { return false }
