//go:build linux && !proc_otherunix

package proc

import (
	"context"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// exitWatchable: records with one output pipe are handed over (begin).
const exitWatchable = true

// exitWatch sees the exits of the children whose end is handed over
// (endHandoff, lifecycle.go): one goroutine per Manager waits, through the
// runtime poller, on an epoll set of their pidfds, so that such a child
// needs no exit goroutine of its own while it runs. Each pidfd is in the
// set once (EPOLLONESHOT) under a token of its own, never reused, so that
// an event for a record that ended meanwhile finds nothing.
//
// The goroutine is started by the first watch and ends when the Manager
// closes (treeKeeper.close), after every record is final.
type exitWatch struct {
	// mu guards the fields below; a leaf, never held while calling a
	// record.
	mu     sync.Mutex
	epfd   int
	ep     *os.File // nil until the first watch
	failed bool     // the set could not be made: nothing is watched
	closed bool
	next   uint64
	procs  map[uint64]*Process
	done   chan struct{} // closed when run returns
}

// watch adds the child of p, which has not been reaped, to the set and
// sets p.end. It reports false where it cannot (no pidfd, no epoll, a
// closed Manager): p then gets an exit goroutine of its own. The child may
// have exited already: the event then comes at once.
func (w *exitWatch) watch(p *Process, pu *pump) bool {
	// The fork's pidfd (askPidfd), else one opened now: the child is not
	// reaped before its end's owner is known, so its PID is still its.
	fd := p.end.pidfd
	p.end.pidfd = -1
	pipefd := -1
	if pu.tee == nil {
		rc, err := pu.r.SyscallConn()
		if err == nil {
			err = rc.Control(func(fd uintptr) { pipefd = int(fd) })
		}
		if err != nil {
			if fd >= 0 {
				_ = unix.Close(fd)
			}
			return false
		}
	}
	// kept: os.Process holds the same open pidfd (only one the fork gave).
	kept := fd >= 0 && osHoldsPidfd(p.cmd.Process) && osKeepsPidfd(fd)
	if fd < 0 {
		var err error
		if fd, err = unix.PidfdOpen(p.info.PID, 0); err != nil {
			return false
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.failed || (w.ep == nil && !w.startLocked()) {
		_ = unix.Close(fd)
		return false
	}
	w.next++
	token := w.next
	p.end.pidfd, p.end.token, p.end.pipefd = fd, token, pipefd
	p.end.exited = make(chan struct{})
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLONESHOT, Fd: int32(uint32(token)), Pad: int32(uint32(token >> 32))}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		_ = unix.Close(fd)
		p.end = endHandoff{}
		return false
	}
	p.end.watched = true
	w.procs[token] = p
	if kept {
		// The set watches the open pidfd, not the descriptor: os.Process
		// keeps a copy of the same pidfd until the reap, and so the
		// entry, which goes with the reap. One descriptor per running
		// child fewer: every fork copies the host's table, and every
		// exec closes the copy's.
		_ = unix.Close(fd)
		p.end.pidfd = -1
	}
	return true
}

// askPidfd has the fork of cmd give p's child's pidfd (CLONE_PIDFD) into
// p.end.pidfd, for the exit watch (watch), in place of a pidfd_open
// there. A command whose SysProcAttr asks for its pidfd itself is left
// alone. On a failed fork the field is -1; dropPidfd closes it after a
// fork whose child is not kept.
func (p *Process) askPidfd(cmd *exec.Cmd) {
	p.end.pidfd = -1
	if attr := cmd.SysProcAttr; attr != nil && attr.PidFD == nil {
		attr.PidFD = &p.end.pidfd
	}
}

// dropPidfd closes the pidfd askPidfd asked for, if the fork gave one.
func (p *Process) dropPidfd() {
	if p.end.pidfd >= 0 {
		_ = unix.Close(p.end.pidfd)
		p.end.pidfd = -1
	}
}

// osHoldsPidfd reports whether the os.Process of a child holds a pidfd
// (os.StartProcess keeps one where pidfds work, but none where its copy
// of the fork's failed, at the descriptor limit): whether its handle,
// which package os does not export, is set. False where os.Process has no
// such field: the exit watch then keeps a descriptor of its own.
func osHoldsPidfd(p *os.Process) bool {
	h := reflect.ValueOf(p).Elem().FieldByName("handle")
	return h.IsValid() && h.Kind() == reflect.Pointer && !h.IsNil()
}

// pidfdKept is osKeepsPidfd's answer once known: 0 not yet, 1 yes, 2 no.
var pidfdKept atomic.Int32

// osKeepsPidfd reports whether the pidfd os.StartProcess keeps in an
// os.Process that holds one (osHoldsPidfd) is a descriptor of the same
// open pidfd as fd, the one the fork gave a child that os has not
// reaped: it copies one that the caller asked for (SysProcAttr.PidFD).
// That is a fact of the process (the Go runtime), learnt once by
// comparing fd with every open descriptor (kcmp); no, where kcmp cannot
// say.
func osKeepsPidfd(fd int) bool {
	switch pidfdKept.Load() {
	case 1:
		return true
	case 2:
		return false
	}
	kept := int32(2)
	if sameFileOpen(fd) {
		kept = 1
	}
	pidfdKept.Store(kept)
	return kept == 1
}

// sameFileOpen reports whether another descriptor of this process refers
// to the open file of fd.
func sameFileOpen(fd int) bool {
	names, ok := fdNames()
	if !ok {
		return false
	}
	pid := uintptr(os.Getpid())
	for _, name := range names {
		other, err := strconv.Atoi(name)
		if err != nil || other == fd {
			continue
		}
		r, _, errno := unix.Syscall6(unix.SYS_KCMP, pid, pid, kcmpFile, uintptr(fd), uintptr(other), 0)
		switch {
		case errno == 0 && r == 0:
			return true
		case errno != 0 && errno != unix.EBADF:
			return false // no kcmp here (ENOSYS, EPERM)
		}
	}
	return false
}

// kcmpFile is KCMP_FILE: do two descriptors refer to one open file.
const kcmpFile = 0

// fdNames lists /proc/self/fd; ok is false where it cannot be read.
func fdNames() (names []string, ok bool) {
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		return nil, false
	}
	defer dir.Close()
	names, err = dir.Readdirnames(-1)
	return names, err == nil
}

// startLocked makes the set and starts the goroutine; the caller holds
// w.mu.
func (w *exitWatch) startLocked() bool {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err == nil {
		if err = unix.SetNonblock(fd, true); err != nil {
			_ = unix.Close(fd)
		}
	}
	if err != nil {
		w.failed = true
		return false
	}
	// os.NewFile registers the non-blocking descriptor with the poller.
	w.epfd, w.ep = fd, os.NewFile(uintptr(fd), "exits")
	w.procs = make(map[uint64]*Process)
	w.done = make(chan struct{})
	// Stopped by close, which closes the set once the Manager closed.
	go w.run(w.ep)
	return true
}

// run hands each exit the set reports to its record (exitWatched) until
// the set is closed. Should it end otherwise (the poller refused the
// set), the records still in the set get a goroutine each that waits for
// their exit on a copy of their pidfd (watchAlone), and later starts are
// not handed over.
func (w *exitWatch) run(ep *os.File) {
	defer func() {
		w.mu.Lock()
		// Each record left gets a copy of its pidfd, made while the
		// record is in the set and so before its owner closes the
		// original (forget): an owner that reaped the child meanwhile
		// cannot leave the goroutine waiting on a reused PID.
		left := make(map[*Process]int, len(w.procs))
		for _, p := range w.procs {
			left[p] = p.end.pidfdCopy(p.info.PID)
		}
		w.procs = nil
		w.failed = true
		w.mu.Unlock()
		close(w.done)
		for p, fd := range left {
			// Stopped by the child's exit.
			go watchAlone(p, fd)
		}
	}()
	rc, err := ep.SyscallConn()
	if err != nil {
		return
	}
	events := make([]unix.EpollEvent, 64)
	for {
		n := 0
		var waitErr error
		err := rc.Read(func(fd uintptr) bool {
			n, waitErr = unix.EpollWait(int(fd), events, 0)
			if waitErr == unix.EINTR {
				n, waitErr = 0, nil
				return true // ask again at once, not after an edge
			}
			return waitErr != nil || n > 0
		})
		if err != nil || waitErr != nil {
			return // closed
		}
		for _, ev := range events[:n] {
			token := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			w.mu.Lock()
			p := w.procs[token]
			delete(w.procs, token)
			w.mu.Unlock()
			if p != nil {
				p.exitWatched()
			}
		}
	}
}

// pidfdCopy returns a non-blocking pidfd of the child pid of a record in
// the exit watch's set, which the caller owns, or -1: a copy of the one
// the set holds, or a new one where the set holds only os.Process's (the
// child is not reaped while its record is in the set: its owner takes it
// out first, forget).
func (e *endHandoff) pidfdCopy(pid int) int {
	if e.pidfd < 0 {
		fd, err := pidfdNonblock(pid)
		if err != nil {
			return -1
		}
		return fd
	}
	fd, err := unix.FcntlInt(uintptr(e.pidfd), unix.F_DUPFD_CLOEXEC, 0)
	if err == nil {
		if err = unix.SetNonblock(fd, true); err != nil {
			_ = unix.Close(fd)
		}
	}
	if err != nil {
		return -1
	}
	return fd
}

// watchAlone waits for the exit of p's child on a goroutine of its own,
// for an exit watch that could not go on (run): on pidfd, a non-blocking
// copy of the record's that it owns, or by PID where no copy could be
// made (-1); then it hands the exit to p (exitWatched).
func watchAlone(p *Process, pidfd int) {
	if pidfd >= 0 {
		waitPidfd(context.Background(), pidfd)
	} else {
		waitExited(p.info.PID)
	}
	p.exitWatched()
}

// forget takes p out of the set and closes its pidfd; the end's owner
// calls it once the exit is known.
func (w *exitWatch) forget(p *Process) {
	if !p.end.watched {
		return
	}
	w.mu.Lock()
	delete(w.procs, p.end.token)
	w.mu.Unlock()
	if p.end.pidfd >= 0 {
		_ = unix.Close(p.end.pidfd)
		p.end.pidfd = -1
	}
	p.end.watched = false
}

// close ends the goroutine; every record is final by then (Close waited
// for them), so the set is empty.
func (w *exitWatch) close() {
	w.mu.Lock()
	w.closed = true
	ep, done := w.ep, w.done
	w.mu.Unlock()
	if ep != nil {
		_ = ep.Close()
		<-done
	}
}

// pipeEnded reports whether the pump's pipe (pipefd) is at its end: every
// writer closed it (POLLHUP) and nothing is left to read. The end's owner
// may have closed the descriptor meanwhile, and another taken its number:
// the answer then counts for nothing, as owner was claimed first
// (exitWatched).
func (e *endHandoff) pipeEnded() bool {
	if e.pipefd < 0 {
		return false
	}
	fds := [1]unix.PollFd{{Fd: int32(e.pipefd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds[:], 0)
	return err == nil && n > 0 && fds[0].Revents&unix.POLLHUP != 0 && fds[0].Revents&unix.POLLIN == 0
}

// exitedNow reports whether the child pid, not reaped, has exited: waitid
// without waiting or reaping.
func exitedNow(pid int) bool {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		// Linux leaves si_signo 0 when no child was waitable.
		return err == nil && info.Signo == int32(unix.SIGCHLD)
	}
}

// exitsWithin reports whether the child pid, not reaped, exits within d,
// on the pidfd fd, or on one opened for the wait where fd is -1.
func exitsWithin(pid, fd int, d time.Duration) bool {
	if fd < 0 {
		var err error
		if fd, err = unix.PidfdOpen(pid, 0); err != nil {
			return false
		}
		defer unix.Close(fd)
	}
	return pidfdExitsWithin(fd, d)
}

// pidfdExitsWithin reports whether the process of the pidfd fd has
// exited, or exits within d: one poll, blocking this thread at most d.
func pidfdExitsWithin(fd int, d time.Duration) bool {
	fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	ts := unix.NsecToTimespec(d.Nanoseconds())
	for {
		n, err := unix.Ppoll(fds[:], &ts, nil)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}
