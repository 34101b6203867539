package proc

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPidfdNonblock pins that pidfdNonblock hands waitPidfd a
// non-blocking, close-on-exec pidfd (the poller's waits need the first,
// no child may inherit it).
func TestPidfdNonblock(t *testing.T) {
	t.Parallel()
	fd, err := pidfdNonblock(os.Getpid())
	if err != nil {
		t.Skipf("no pidfds on this kernel (before 5.3): %v; waitExited leaves the waiting to cmd.Wait there", err)
	}
	defer unix.Close(fd)
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		t.Fatalf("fcntl(F_GETFL) = %v", err)
	}
	fdfl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		t.Fatalf("fcntl(F_GETFD) = %v", err)
	}
	if fl&unix.O_NONBLOCK == 0 || fdfl&unix.FD_CLOEXEC == 0 {
		t.Errorf("pidfdNonblock: flags %#x, fd flags %#x; want O_NONBLOCK and FD_CLOEXEC", fl, fdfl)
	}
}
