//go:build linux

package proc

import (
	"os"

	"golang.org/x/sys/unix"
)

// waitGone waits until every member of the groups is dead (a zombie, or
// reaped), for at most about killWaitPolls * killWaitPollMillis in all.
// Close calls it after SIGKILL: a killed process lives on for a moment while
// the kernel tears it down, and Close must not return before it is gone
// (I4). It reads the process table once and then waits on pidfds, which
// the kernel makes readable when a process exits; the bound is the kernel's
// poll timeout, a safety net rather than a policy, so it is not a clock
// timer.
func waitGone(groups []*procGroup) {
	if len(groups) == 0 {
		return
	}
	want := make(map[string]bool, len(groups))
	for _, g := range groups {
		want[g.id()] = true
	}
	var fds []unix.PollFd
	_ = scanProcPIDs(func(pid int, pgrp string) bool {
		if want[pgrp] {
			if fd, err := unix.PidfdOpen(pid, 0); err == nil {
				fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
			}
		}
		return true
	})
	defer func() {
		for _, fd := range fds {
			_ = unix.Close(int(fd.Fd))
		}
	}()
	pending := fds
	for range killWaitPolls {
		if len(pending) == 0 {
			return
		}
		n, err := unix.Poll(pending, killWaitPollMillis)
		if err != nil && err != unix.EINTR {
			return
		}
		if n <= 0 {
			continue
		}
		still := pending[:0]
		for _, fd := range pending {
			if fd.Revents == 0 {
				still = append(still, fd)
			}
		}
		pending = still
	}
}

const (
	killWaitPolls      = 20
	killWaitPollMillis = 100
)

// waitExited returns once the child pid has exited, without reaping it,
// and without holding an OS thread meanwhile: cmd.Wait blocks in waitid,
// which parks one thread per waiting child (measured: 256 children writing
// 4 MiB each took ~22% longer that way than reading first and reaping
// after). It waits on a pidfd through the runtime poller instead. Where
// pidfds are missing it returns at once and cmd.Wait blocks as before.
func waitExited(pid int) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		_ = unix.Close(fd)
		return
	}
	// os.NewFile registers the non-blocking descriptor with the poller.
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Read(func(fd uintptr) bool {
		// Ask the descriptor itself each time rather than trust one
		// readiness event: RawConn.Read resets the poller's pending
		// readiness before its first call, so an exit that happened
		// before that would never be reported (measured: a hang).
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
