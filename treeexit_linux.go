//go:build linux && !proc_otherunix

package proc

import (
	"context"
	"os"
	"sync"
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
	pipefd := -1
	if pu.tee == nil {
		rc, err := pu.r.SyscallConn()
		if err != nil {
			return false
		}
		if rc.Control(func(fd uintptr) { pipefd = int(fd) }) != nil {
			return false
		}
	}
	fd, err := unix.PidfdOpen(p.info.PID, 0)
	if err != nil {
		return false
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
	return true
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
			fd, err := unix.FcntlInt(uintptr(p.end.pidfd), unix.F_DUPFD_CLOEXEC, 0)
			if err == nil {
				if err = unix.SetNonblock(fd, true); err != nil {
					_ = unix.Close(fd)
				}
			}
			if err != nil {
				fd = -1
			}
			left[p] = fd
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
	_ = unix.Close(p.end.pidfd)
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
