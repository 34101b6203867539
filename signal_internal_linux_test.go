//go:build linux && !proc_otherunix

package proc

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procvisor/proc/internal/testkit"
)

// TestPidfdNonblock pins that pidfdNonblock hands waitPidfd a
// non-blocking, close-on-exec pidfd (the poller's waits need the first,
// no child may inherit it), on this kernel and on one from 5.3 to 5.9,
// which refuses PIDFD_NONBLOCK with EINVAL; and that waitPidfd returns
// on such a pidfd once its child has exited.
func TestPidfdNonblock(t *testing.T) {
	t.Parallel()
	if fd, err := unix.PidfdOpen(os.Getpid(), 0); err != nil {
		t.Skipf("no pidfds on this kernel (before 5.3): %v; waitExited leaves the waiting to cmd.Wait there", err)
	} else {
		_ = unix.Close(fd)
	}
	// beforeNonblock plays a kernel without PIDFD_NONBLOCK.
	beforeNonblock := func(pid, flags int) (int, error) {
		if flags&unix.PIDFD_NONBLOCK != 0 {
			return -1, unix.EINVAL
		}
		return unix.PidfdOpen(pid, flags)
	}
	for _, tc := range []struct {
		name  string
		open  func(pid, flags int) (int, error)
		calls int
	}{
		{"this kernel", unix.PidfdOpen, 1},
		{"before 5.10", beforeNonblock, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked []int
			open := func(pid, flags int) (int, error) {
				asked = append(asked, flags)
				return tc.open(pid, flags)
			}
			ctx := testkit.Ctx(t, 30*time.Second)
			cmd := exec.CommandContext(ctx, "sleep", "30")
			if err := cmd.Start(); err != nil {
				t.Fatalf("start sleep: %v", err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
			fd, err := pidfdNonblockWith(open, cmd.Process.Pid)
			if err != nil {
				t.Fatalf("pidfdNonblockWith: %v", err)
			}
			if len(asked) != tc.calls {
				t.Errorf("pidfd_open asked with flags %#x; want %d calls", asked, tc.calls)
			}
			fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
			if err != nil {
				t.Fatalf("fcntl(F_GETFL) = %v", err)
			}
			fdfl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
			if err != nil {
				t.Fatalf("fcntl(F_GETFD) = %v", err)
			}
			if fl&unix.O_NONBLOCK == 0 || fdfl&unix.FD_CLOEXEC == 0 {
				t.Errorf("flags %#x, fd flags %#x; want O_NONBLOCK and FD_CLOEXEC", fl, fdfl)
			}
			// The child is killed, not reaped: waitPidfd must see it exit
			// (a blocking pidfd would park the poller's read instead).
			if err := cmd.Process.Signal(os.Kill); err != nil {
				t.Fatalf("kill sleep: %v", err)
			}
			waitPidfd(ctx, fd)
			if ctx.Err() != nil {
				t.Fatalf("waitPidfd returned only at the test's deadline: %v", ctx.Err())
			}
		})
	}
}

// TestPidfdNonblockRefused pins that an open refused after the fallback
// returns its error and no descriptor.
func TestPidfdNonblockRefused(t *testing.T) {
	t.Parallel()
	refused := func(pid, flags int) (int, error) {
		if flags&unix.PIDFD_NONBLOCK != 0 {
			return -1, unix.EINVAL
		}
		return -1, unix.ESRCH
	}
	if fd, err := pidfdNonblockWith(refused, 1); fd != -1 || err != unix.ESRCH {
		t.Errorf("pidfdNonblockWith = %d, %v; want -1, ESRCH", fd, err)
	}
}
