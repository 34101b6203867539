//go:build linux

package proc

import (
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
