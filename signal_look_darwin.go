package proc

import (
	"golang.org/x/sys/unix"
)

// canLookChild: the kernel's process table (sysctl kern.proc.pid) tells a
// stopped child and a zombie apart without reaping it.
const canLookChild = true

// p_stat values (sys/proc.h).
const (
	darwinSSTOP = 4
	darwinSZOMB = 5
)

// lookChild reads the state of the child pid, not yet reaped, from the
// process table; ok is false where the look failed (the child was reaped
// in between: no entry).
func lookChild(pid int) (st childState, ok bool) {
	k, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || int(k.Proc.P_pid) != pid {
		return childRunning, false
	}
	switch k.Proc.P_stat {
	case darwinSZOMB:
		return childExited, true
	case darwinSSTOP:
		return childStopped, true
	}
	return childRunning, true
}

// termPending cannot be read here: whether a zombie still lists the
// signals it never took is not documented, so a timeout's TERM counts as
// having reached the child.
func termPending(int) bool { return false }
