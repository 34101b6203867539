//go:build linux && !proc_otherunix

package proc

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// waitExited returns once the child pid has exited, without reaping it,
// and without holding an OS thread meanwhile: cmd.Wait blocks in waitid,
// which parks one thread per waiting child (with many children at once,
// slower than reading first and reaping after). It waits on a pidfd through the runtime poller instead. Where
// pidfds are missing it returns at once and cmd.Wait blocks as before.
func waitExited(pid int) {
	if fd, err := pidfdNonblock(pid); err == nil {
		waitPidfd(context.Background(), fd)
	}
}

// waitPIDs waits until every process in pids has exited (become a zombie,
// or gone) or ctx ends, one after another, on pidfds through the runtime
// poller. Where no pidfd can be opened it returns at once.
func waitPIDs(ctx context.Context, pids []int) {
	for _, pid := range pids {
		if ctx.Err() != nil {
			return
		}
		if fd, err := pidfdNonblock(pid); err == nil {
			waitPidfd(ctx, fd)
		}
	}
}

// pidfdNonblock opens a non-blocking pidfd of the process pid: in one
// call where the kernel takes PIDFD_NONBLOCK (5.10 on), two calls fewer
// per record than setting it after.
func pidfdNonblock(pid int) (int, error) { return pidfdNonblockWith(unix.PidfdOpen, pid) }

// pidfdNonblockWith is pidfdNonblock with the pidfd_open call passed in,
// so that a test can play a kernel from 5.3 to 5.9, which refuses the
// flag with EINVAL: there the pidfd is opened plain and made
// non-blocking after (pidfds are close-on-exec whatever the flags).
func pidfdNonblockWith(open func(pid, flags int) (int, error), pid int) (int, error) {
	fd, err := open(pid, unix.PIDFD_NONBLOCK)
	if err != unix.EINVAL {
		return fd, err
	}
	if fd, err = open(pid, 0); err != nil {
		return -1, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// waitPidfd waits until the process of the non-blocking pidfd fd exits or
// ctx ends, and closes fd.
func waitPidfd(ctx context.Context, fd int) {
	// os.NewFile registers the non-blocking descriptor with the poller.
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(pastDeadline) })
		defer stop()
	}
	_ = rc.Read(func(fd uintptr) bool {
		// Ask the descriptor itself each time rather than trust one
		// readiness event: RawConn.Read resets the poller's pending
		// readiness before its first call, so an exit that happened
		// before that would never be reported (the wait would hang).
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		return err != nil || n > 0
	})
}

// leaderExited reports whether the child pid has exited, reaped or not,
// without reaping it: waitid with WNOWAIT asks the kernel about the whole
// process (not its main thread, as /proc/<pid>/stat would), and needs no
// /proc. ECHILD means the exit goroutine reaped it already.
func leaderExited(pid int) bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return err == unix.ECHILD
		}
		// With WNOHANG and nothing to report, the kernel leaves si_signo 0.
		return info.Signo == int32(unix.SIGCHLD)
	}
}

// rawPipe returns a pipe, both ends close-on-exec, the parent's end
// non-blocking and the child's blocking (newPipe): two calls, where pipe,
// close-on-exec twice and non-blocking once (F_GETFL, F_SETFL) make five.
func rawPipe(parentReads bool) (parent, child int, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return -1, -1, err
	}
	parent, child = p[0], p[1]
	if !parentReads {
		parent, child = p[1], p[0]
	}
	// A pipe end's status flags are its access mode and O_NONBLOCK, and
	// F_SETFL leaves the access mode alone.
	if _, err := unix.FcntlInt(uintptr(child), unix.F_SETFL, 0); err != nil {
		_ = unix.Close(parent)
		_ = unix.Close(child)
		return -1, -1, err
	}
	return parent, child, nil
}

// exitsSoon reports whether the child pid has exited, or exits within
// exitSoonWait: a program often closes its stdin on its way out (atexit
// handlers), and the kernel closes a dying process's descriptors before
// its exit can be reaped, so a write in that moment meets EPIPE. A child
// that closed its stdin and lives on is told apart only by outliving the
// wait, a safety bound on an OS event (the pidfd), not a policy timer.
func exitsSoon(pid int, _ <-chan struct{}) bool {
	if leaderExited(pid) {
		return true
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return leaderExited(pid)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(exitSoonWait.Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}

// si_code values of SIGCHLD (include/uapi/asm-generic/siginfo.h).
const cldStopped = 5

// haltChild stops the child pid (SIGSTOP) and waits until it is stopped or
// has exited, without reaping it; it reports whether it exited. A stopped
// process cannot begin to exit on its own, so once haltChild says it is
// stopped, whatever ends it next comes from whoever signals it: this is how
// the timeout decides "timed out" exactly (design section 6). An exited
// child, reaped or not, beat the deadline by itself.
//
// A SIGCONT from elsewhere (a Signal(Interrupt) racing the timeout)
// discards a pending stop, so the stop is sent again at every look, and
// the wait is bounded: a child that cannot be held still within haltWait
// counts as alive. The looks are a bounded safety net on an OS state, not
// a policy timer, so they do not use the Manager's clock.
func haltChild(pid int) (exited bool) {
	pause := 20 * time.Microsecond
	for waited := time.Duration(0); waited < haltWait; waited += pause {
		if err := unix.Kill(pid, unix.SIGSTOP); err != nil {
			return true // reaped already: our unreaped child always exists
		}
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WSTOPPED|unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
		switch {
		case err == unix.ECHILD:
			return true // the exit goroutine reaped it
		case err == nil && info.Signo == int32(unix.SIGCHLD) && info.Code == cldStopped:
			return false
		case err == nil && info.Signo == int32(unix.SIGCHLD):
			return true // exited, killed or dumped
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Millisecond)
	}
	return false
}

// haltWait bounds haltChild.
const haltWait = 100 * time.Millisecond

// resumeHalted continues the child pid that haltChild stopped.
func resumeHalted(pid int) { _ = unix.Kill(pid, unix.SIGCONT) }

// openPidfd opens a pidfd of the process pid (a child not yet reaped), or
// returns nil where pidfds are missing.
func openPidfd(pid int) *os.File {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil
	}
	return os.NewFile(uintptr(fd), "pidfd")
}

// pidfdExited reports whether the process of the pidfd f has exited: one
// poll, without waiting.
func pidfdExited(f *os.File) bool {
	return onFD(f, func(fd uintptr) bool {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
		return err == nil && n > 0
	})
}

// onFD reports what fn reports of the descriptor of f, which stays open
// while fn runs; false where f has none.
func onFD(f *os.File, fn func(fd uintptr) bool) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	_ = rc.Control(func(fd uintptr) { ok = fn(fd) })
	return ok
}
