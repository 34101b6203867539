package proc

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Built for both Linux backends: the pidfd one and the non-Linux Unix one
// under the proc_otherunix tag.

// termPending reports whether SIGTERM is still pending for pid, which has
// exited but is not reaped: a zombie still lists the signals it never took.
// A child that blocked TERM (a shell on its way out does) and exited with
// it pending was never reached by the terminate.
func termPending(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	bit := uint64(1) << (unix.SIGTERM - 1)
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "SigPnd" && k != "ShdPnd") {
			continue
		}
		if mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && mask&bit != 0 {
			return true
		}
	}
	return false
}
