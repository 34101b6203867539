//go:build linux

package sandbox

import (
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// listeners is a Manager's watch over the seccomp listeners of its
// sandboxed trees that have routed no call yet, as most never do: one
// epoll instance in Go's poller, and one goroutine while any listener
// waits in it, rather than a goroutine and a poller registration per
// tree. A listener with a call waiting leaves the watch for a notifier
// goroutine of its own (serve), so that a tree that floods routed calls
// still waits only for itself; one that hangs up (every task using its
// filter is gone) is closed here. The zero value is ready; close ends
// it (ReadRules.Close).
type listeners struct {
	// mu guards the fields below, and the served and file fields of the
	// notifiers it holds; nothing else is locked under it.
	mu   sync.Mutex
	file *os.File        // the epoll instance, in Go's poller; nil: not made yet
	epfd int             // file's descriptor
	rc   syscall.RawConn // file's
	// waiting are the notifiers whose listeners wait, by a number of
	// their own (watchID: a descriptor's number is taken again once it
	// is closed, and an event read before may name the one closed).
	waiting map[uint64]*notifier
	lastID  uint64
	running bool          // run waits on the instance (while waiting is not empty)
	ran     chan struct{} // closed when the last run returned
	closed  bool
}

// add takes n's listener into the watch, and reports whether it did (a
// closed watch, or one that cannot be made, takes none: n is then
// served from the start).
func (w *listeners) add(n *notifier) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.file == nil && !w.open() {
		return false
	}
	w.lastID++
	id := w.lastID
	// The event's data is the ID, in the two halves of its union. One
	// event, then none: the listener leaves the watch at its first, and
	// its entry may outlive it, while a child forked meanwhile holds the
	// listener until its exec closes it.
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLONESHOT, Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
	if unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, n.listener, &ev) != nil {
		return false
	}
	if w.waiting == nil {
		w.waiting = map[uint64]*notifier{}
	}
	w.waiting[id] = n
	n.watch, n.watchID = w, id
	if !w.running {
		w.running = true
		w.ran = make(chan struct{})
		// Stopped once no listener waits any more, or by close.
		go w.run(w.ran)
	}
	return true
}

// open makes the epoll instance. Called with mu held.
func (w *listeners) open() bool {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return false
	}
	// An epoll instance's only status flag is its access mode, which
	// F_SETFL keeps.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, unix.O_NONBLOCK); err != nil {
		unix.Close(fd)
		return false
	}
	f := os.NewFile(uintptr(fd), "seccomp-listeners")
	// It must be in Go's poller: run waits there, and close wakes it.
	if f.SetReadDeadline(time.Time{}) != nil {
		f.Close()
		return false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return false
	}
	w.file, w.epfd, w.rc = f, fd, rc
	return true
}

// remove takes n's listener out of the watch, and reports whether it
// was there (not taken by run). Its entry in the instance stays until
// the listener is closed (an event it may still raise names no one).
// Called with mu held.
func (w *listeners) remove(n *notifier) bool {
	if w.waiting[n.watchID] != n {
		return false
	}
	delete(w.waiting, n.watchID)
	return true
}

// run waits for the listeners until none waits any more (or close):
// each with a call waiting goes to serve, each hung up is closed.
func (w *listeners) run(ran chan struct{}) {
	defer close(ran)
	var evs [16]unix.EpollEvent
	var ended []*notifier
	k := 0
	ready := func(fd uintptr) bool {
		// None ready: a listener's next event wakes the wait.
		var err error
		for k, err = unix.EpollWait(int(fd), evs[:], 0); err == unix.EINTR; {
			k, err = unix.EpollWait(int(fd), evs[:], 0)
		}
		return k > 0
	}
	for {
		k = 0
		err := w.rc.Read(ready)
		ended = ended[:0]
		w.mu.Lock()
		if err != nil || w.closed {
			w.running = false
			w.mu.Unlock()
			return
		}
		for _, ev := range evs[:max(k, 0)] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			n := w.waiting[id]
			if n == nil {
				continue // Stop took it
			}
			// A call waiting goes to serve (which refuses it if n was
			// stopped in between); a listener that hung up, or that
			// cannot be served (closed then: its tree's calls fail),
			// ends here.
			w.remove(n)
			if ev.Events&unix.EPOLLIN == 0 {
				ended = append(ended, n)
				continue
			}
			switch {
			case n.serveFromNow() == nil:
				n.served = true
			default:
				close(n.done)
			}
		}
		idle := len(w.waiting) == 0
		if idle {
			w.running = false
		}
		w.mu.Unlock()
		for _, n := range ended {
			n.end()
		}
		if idle {
			return
		}
	}
}

// close ends the watch: the listeners still in it are ended as Stop
// would (their calls fail), and the instance is closed once run
// returned. Later adds take none.
func (w *listeners) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	var left []*notifier
	for _, n := range w.waiting {
		if w.remove(n) {
			left = append(left, n)
		}
	}
	f, running, ran := w.file, w.running, w.ran
	w.mu.Unlock()
	for _, n := range left {
		refusePending(n.listener)
		n.end()
	}
	if f == nil {
		return
	}
	if running {
		// Wakes run's wait; it sees closed.
		_ = f.SetReadDeadline(time.Unix(1, 0))
		<-ran
	}
	f.Close()
}
