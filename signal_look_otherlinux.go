//go:build linux && proc_otherunix

package proc

import (
	"os"
	"strconv"
	"strings"
)

// The look at a child for the non-Linux Unix backend built on Linux (the
// proc_otherunix tag, which runs that backend's code in tests): the process
// table as /proc shows it, as the macOS look reads sysctl's, and no pidfds.

// canLookChild: /proc tells a stopped child and a zombie apart without
// reaping it.
const canLookChild = true

// lookChild reads the state of the child pid, not yet reaped, from
// /proc/<pid>/stat (the field after the command's closing parenthesis); ok
// is false where the look failed (the child was reaped in between).
func lookChild(pid int) (st childState, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return childRunning, false
	}
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 || i+2 >= len(data) {
		return childRunning, false
	}
	switch data[i+2] {
	case 'Z', 'X':
		return childExited, true
	case 'T':
		return childStopped, true
	}
	return childRunning, true
}
