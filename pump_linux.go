//go:build linux && !proc_otherunix

package proc

import (
	"os"

	"golang.org/x/sys/unix"
)

// growPipe asks the kernel to make the pipe r reads from hold
// observedPipeSize bytes (F_SETPIPE_SZ), so that a child can write that
// far ahead of a pump that readers keep off a CPU. A failure (not a pipe:
// a terminal; over the user's pipe quota; above
// /proc/sys/fs/pipe-max-size) leaves the pipe as it was: the pump reads
// it as before. It reports whether the pipe grew.
func growPipe(r *os.File) bool {
	return onFD(r, func(fd uintptr) bool {
		n, err := unix.FcntlInt(fd, unix.F_SETPIPE_SZ, observedPipeSize)
		return err == nil && n >= observedPipeSize
	})
}
