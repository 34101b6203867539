//go:build unix

package proc

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestNewPipeFlags pins the descriptors newPipe hands out: both ends
// close-on-exec (no other child inherits them), the parent's end
// non-blocking (the poller's deadlines work on it) and the child's
// blocking (a child's write on a full pipe waits, as it expects), the
// parent reading or writing as asked.
func TestNewPipeFlags(t *testing.T) {
	t.Parallel()
	for _, parentReads := range []bool{true, false} {
		parent, child, err := newPipe(parentReads)
		if err != nil {
			t.Fatalf("newPipe(%v) = %v", parentReads, err)
		}
		check := func(name string, f *os.File, nonblocking, reads bool) {
			t.Helper()
			rc, err := f.SyscallConn()
			if err != nil {
				t.Fatalf("%s.SyscallConn() = %v", name, err)
			}
			_ = rc.Control(func(fd uintptr) {
				fl, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
				if err != nil {
					t.Fatalf("fcntl(%s, F_GETFL) = %v", name, err)
				}
				fd2, err := unix.FcntlInt(fd, unix.F_GETFD, 0)
				if err != nil {
					t.Fatalf("fcntl(%s, F_GETFD) = %v", name, err)
				}
				mode := unix.O_WRONLY
				if reads {
					mode = unix.O_RDONLY
				}
				if got := fl&unix.O_NONBLOCK != 0; got != nonblocking || fl&unix.O_ACCMODE != mode || fd2&unix.FD_CLOEXEC == 0 {
					t.Errorf("newPipe(%v) %s end: flags %#x, fd flags %#x; want non-blocking %v, access mode %#x, close-on-exec", parentReads, name, fl, fd2, nonblocking, mode)
				}
			})
		}
		check("parent", parent, true, parentReads)
		check("child", child, false, !parentReads)
		_ = parent.Close()
		_ = child.Close()
	}
}
