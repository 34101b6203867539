//go:build linux && !proc_otherunix

package proc

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"

	"github.com/procvisor/proc/internal/cgroup2"
	"golang.org/x/sys/unix"
)

// cgroupTree is a record's cgroup: the tree's mechanics are
// cgroup2.Dir's.
type cgroupTree struct {
	host *cgroupHost
	rc   *recordCgroup
	// d is the cgroup, its files opened relative to rc's directory
	// (d.At) if the tree holds it (heldDir), else relative to the
	// Manager's cgroup (d.At, d.Name; see recordCgroup). After release
	// the cgroup may be another record's, and either descriptor may be
	// closed (the Manager's only after every tree was released): d is
	// used only under mu with released false, or by path (WaitEmpty).
	d       cgroup2.Dir
	heldDir bool          // the tree holds rc's directory open (holdDir)
	limited bool          // limits were written into it: never reused
	base    cgroup2.Usage // rc's baseline
	// leader is the child, and pid its PID: signals reach it through its
	// os.Process, which is excluded from the reap, so a signal never
	// reaches a process that reused its PID, and SignalAll needs no pidfd
	// and no second read of cgroup.procs for it (see cgroup2.Leader).
	leader *os.Process
	pid    int
	// gone is set by release: the cgroup may hold another record's tree
	// from then on, so the tree reads as empty.
	gone atomic.Bool

	// mu guards the fields below. It is a leaf lock, held while a signal
	// is sent or members are listed, so that release waits for those: a
	// cgroup handed on for reuse is never signalled or read for this tree.
	mu       sync.Mutex
	released bool
	// events is cgroup.events, opened at the first look (populated),
	// usually when the record ends, and closed by release: a tree whose
	// child runs holds no descriptor (see recordCgroup). A tree that
	// holds its directory (heldDir) uses rc's held file instead, where
	// filesMax allows: release leaves that one open for the next record.
	// Either reads the same cgroup.events, which pread regenerates.
	events *cgroup2.Events
	killed bool // cgroup.kill was written: never reused
	// empty is set by reaped when the tree went with its child: it has no
	// member for good (see reaped), and populated reads nothing more.
	empty bool
	// read says readUsage is the tree's accounting, read by reaped once
	// the tree was empty: usage returns it.
	read      bool
	readUsage cgroup2.Usage
	// waited is set by waitEmpty: the tree outlived its child (watch) or
	// was stopped. Only a tree that ended with its child, the common case,
	// hands its cgroup on for reuse; the others' are removed.
	waited bool
	// waiters end the waitEmpty calls in progress: a removed cgroup's
	// cgroup.events is never notified again, so release ends them.
	waiters map[int]context.CancelFunc
	next    int
}

func (c *cgroupTree) signal(sig Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return ErrNotRunning
	}
	if sig == Kill {
		if !c.populated() {
			return ErrNotRunning
		}
		c.killed = true
		// Gone since populated looked: a cgroup is removed only once
		// empty, so nothing is left to kill. Release cannot remove it
		// meanwhile (c.mu); this covers a removal from outside.
		err := c.d.Kill()
		if errors.Is(err, cgroup2.ErrGone) {
			return ErrNotRunning
		}
		return err
	}
	// Terminate and Interrupt go to every member listed, then SIGCONT, so
	// that a stopped member runs its handler. An empty cgroup lists none.
	if c.d.SignalAll(unixSignal(sig), cgroup2.Leader{PID: c.pid, Signal: c.signalLeader}) == 0 {
		return ErrNotRunning
	}
	return nil
}

// signalLeader sends sig to the child unless it was reaped.
func (c *cgroupTree) signalLeader(sig unix.Signal) bool {
	return c.leader.Signal(sig) == nil
}

var _ childSignaller = (*cgroupTree)(nil)

// signalChild sends sig and SIGCONT to the child alone, through its
// os.Process: no listing of cgroup.procs.
func (c *cgroupTree) signalChild(sig Signal) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released || !c.signalLeader(unixSignal(sig)) {
		return false
	}
	_ = c.leader.Signal(unix.SIGCONT)
	return true
}

// signalOthers signals the members listed in cgroup.procs but the child,
// which signalChild reached (child) or found reaped. A cgroup that is
// empty by now (the child died of the signal, the common case) costs one
// read of cgroup.events.
func (c *cgroupTree) signalOthers(sig Signal, child bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	notRunning := ErrNotRunning
	if child {
		notRunning = nil
	}
	if c.released || !c.populated() {
		return notRunning
	}
	// The child was signalled already: never twice (a second TERM means
	// "now" to many programs). Listed, it counts as reached if it was.
	skip := cgroup2.Leader{PID: c.pid, Signal: func(unix.Signal) bool { return child }}
	if c.d.SignalAll(unixSignal(sig), skip) == 0 {
		return notRunning
	}
	return nil
}

// populated reports whether any live process is in the cgroup, through
// the tree's cgroup.events, opened at the first look and held until
// release. The caller holds c.mu. A cgroup.events that cannot be opened
// for any reason but the cgroup being gone (say, no descriptor left)
// counts as populated: the tree stays registered until a later look, or
// Close, finds it empty.
func (c *cgroupTree) populated() bool {
	if c.released || c.empty || c.gone.Load() {
		return false
	}
	if c.events == nil {
		var events *cgroup2.Events
		var err error
		if c.heldDir {
			// rc's, held with its directory: kept on release for the
			// next record in it (recordCgroup); nil where filesMax are
			// held.
			events, err = c.rc.openEvents()
		}
		if err == nil && events == nil {
			events, err = c.d.OpenEvents()
		}
		if err != nil {
			return !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENODEV)
		}
		c.events = events
	}
	return c.events.Populated()
}

func (c *cgroupTree) alive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.populated()
}

// usage is the tree's accounting (cgroup2.Dir.Usage), as reaped read it
// if the tree went with its child, else read now: what it added to the
// cgroup's baseline. The peaks are never from a baseline: a cgroup with
// them is never reused. It is nil if cpu.stat could not be read (the
// cgroup was removed from outside, or a descriptor could not be opened),
// as for a job whose accounting cannot be queried: a zero read would
// subtract the baseline into negative times.
func (c *cgroupTree) usage() *TreeUsage {
	c.mu.Lock()
	read, u := c.read, c.readUsage
	c.mu.Unlock()
	if !read {
		var ok bool
		if u, ok = c.readNow(); !ok {
			return nil
		}
	}
	base := c.base
	return &TreeUsage{
		User:       u.User - base.User,
		System:     u.System - base.System,
		MemoryPeak: u.MemoryPeak,
		PidsPeak:   u.PidsPeak,
		OOMKills:   u.OOMKills - base.OOMKills,
	}
}

// readNow reads the cgroup's accounting (cgroup2.Dir.Usage); ok is false
// if its cpu.stat could not be read, or the tree was released.
func (c *cgroupTree) readNow() (u cgroup2.Usage, ok bool) {
	c.host.reading()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		// Never so: the record reads its usage before its tree settles.
		// Released, the cgroup may be another record's, or its descriptor
		// another file: nothing is read.
		return cgroup2.Usage{}, false
	}
	var err error
	if c.host.reuse {
		// Without the memory and pids controllers, only cpu.stat; through
		// rc's held file while the tree holds rc's directory (heldDir).
		u, err = c.rc.cpu(c.d)
	} else {
		u, err = c.d.ReadUsage()
	}
	return u, err == nil
}

// members lists cgroup.procs: every process in the cgroup, however it
// left its session or process group.
func (c *cgroupTree) members() ([]int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return nil, true
	}
	return c.d.Procs(), true
}

// rewatch: the watchdog kills the Manager's whole cgroup; nothing to
// register.
func (c *cgroupTree) rewatch(*watchdog) {}

// reaped looks, once the child is reaped, whether the tree went with it
// (the common case), as group mode's does, and if so reads its usage at
// once where that is cpu.stat alone (the host reuses cgroups): an empty
// cgroup gains no CPU time (nothing enters it but a child cloned into a
// spare, or a process an outsider moves in, which a later look could not
// exclude either), so the record's end, which would make the same two
// reads after the drain, uses them instead. Made here, they overlap the
// pump's reaching the end of its pipe instead of following it. A cgroup
// names this tree for as long as we hold it.
func (c *cgroupTree) reaped() {
	if !c.host.reuse {
		return
	}
	c.mu.Lock()
	empty := !c.released && !c.populated()
	c.empty = empty
	c.mu.Unlock()
	if !empty {
		return
	}
	u, ok := c.readNow()
	if !ok {
		return // usage reads again, at the record's end
	}
	c.mu.Lock()
	c.read, c.readUsage = true, u
	c.mu.Unlock()
}

// waitEmpty waits until the cgroup is empty (cgroup2.Dir.WaitEmpty), ctx
// ends, or the cgroup is released.
func (c *cgroupTree) waitEmpty(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.mu.Lock()
	if c.released {
		c.mu.Unlock()
		return // it was empty, and is gone
	}
	if c.waiters == nil {
		c.waiters = map[int]context.CancelFunc{}
	}
	c.next++
	id := c.next
	c.waiters[id] = cancel
	c.waited = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiters, id)
		c.mu.Unlock()
	}()
	c.d.WaitEmpty(ctx)
}

// release hands the cgroup to the worker for removal. The tree is empty:
// it leaves the registry only then, or after Close killed it.
func (c *cgroupTree) release() {
	rc, reusable := c.releaseTree()
	c.host.done(rc, reusable)
}

var _ laterReleaser = (*cgroupTree)(nil)

// releaseLater is release by the record's exit goroutine (settleOwn): a
// cgroup to reuse is readied by later, which the caller runs once the
// record's end is published, instead of by a worker woken for it.
func (c *cgroupTree) releaseLater() (later func()) {
	rc, reusable := c.releaseTree()
	return c.host.doneLater(rc, reusable)
}

// releaseTree marks the tree released, ends its waiters, and returns its
// cgroup and whether it may be reused: release's part before the hand-off.
func (c *cgroupTree) releaseTree() (*recordCgroup, bool) {
	c.mu.Lock()
	c.released = true
	c.leader = nil
	c.gone.Store(true)
	waiters, reusable := c.waiters, !c.killed && !c.waited && !c.limited
	c.waiters = nil
	if c.events != nil && c.events != c.rc.events {
		c.events.Close() // the tree's own, not rc's held one
	}
	c.events = nil
	c.mu.Unlock()
	if c.heldDir {
		c.host.unholdDir()
	}
	for _, cancel := range waiters {
		cancel()
	}
	return c.rc, reusable
}
