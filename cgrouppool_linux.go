//go:build linux && !proc_otherunix

package proc

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/procvisor/proc/internal/cgroup2"
	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// The pool of ready record cgroups: spares made off the start path by a
// worker, cgroups that are done readied for reuse or removed, and the
// spares given back when starts stop (idleTick).
//
// A record's cgroup that is done is reused for a later record when that
// cannot be seen: it emptied with its child (never killed: cgroup.kill
// also kills what is cloned in later; nor stopped, nor outlived by a
// member), no limit was written into it, nothing was left below it, and
// the accounting a record reads can be taken as a difference from a
// baseline. cpu.stat and memory.events only grow, so the baseline is read
// on the worker once the cgroup is empty (nothing can add to them then)
// and subtracted. memory.peak and pids.peak cannot be taken that way
// (pids.peak cannot be reset; memory.peak can be, on 6.12 and later, only
// for reads through the descriptor that reset it), so where the memory or
// pids controller is enabled for the record cgroups, none is reused and
// each record gets a fresh one. Reuse saves the mkdir and rmdir of a
// cgroup per record, both serialised by the kernel's cgroup mutex, so that
// making or removing them from several goroutines at once gains nothing.

// recordCgroup is a record's cgroup. While it is a spare it holds its
// directory open (made or reopened by the worker, off the start path):
// clone3's target. Every descriptor the host holds is copied into each
// child it forks and closed again at the child's exec, so each one held
// per running record makes every later start slower. So a running record's
// tree opens cgroup.events only when it looks (usually once, at the end),
// and keeps the directory open only while at most heldMax trees do (the
// common case: few records run at once, and a held directory needs neither
// a close on the start path nor a reopen by the worker to recycle it);
// beyond that, the start closes it once the child is cloned in, and the
// tree opens its files relative to the Manager's cgroup instead
// (cgroup2.Dir.Name). At most spareMax spares are kept, so those not in
// use hold at most spareMax directory descriptors, and none once starts
// stopped (idleTick). A record cgroup whose
// directory is open may also hold its cpu.stat and cgroup.events open
// across reuse (stat, events), filesMax at most in all.
type recordCgroup struct {
	name  string // below the Manager's cgroup: "t1", "t2", ...
	dir   string
	rel   string // dir as /proc/<pid>/cgroup names it (cgroup2.Dir.Rel)
	dirFD int    // -1 unless open
	// base is the accounting the cgroup held when it was last emptied
	// (zero for a new one): a record's usage is what it adds to it.
	base cgroup2.Usage
	// stat is cpu.stat, opened at the first read while the directory is
	// open and closed with it (closeDir), so that the reads of a cgroup
	// reused again and again (the record's usage, the worker's baseline)
	// cost a pread each, not an open, a read and a close: two fewer
	// openat and close per record. It adds a descriptor only where the
	// directory is held: a spare, or a running tree while at most heldMax
	// do.
	stat *cgroup2.CPUStat
	// files is the host's count of the files record cgroups hold open
	// (stat and events): at most filesMax, so that spares kept after a
	// burst do not make every fork pay for hundreds of descriptors.
	files *atomic.Int32
	// events is cgroup.events, held as stat is, for the tree's looks
	// (cgroupTree.populated) while it holds the directory.
	events *cgroup2.Events
}

// openEvents returns rc's held cgroup.events, opening it if need be; nil
// unless rc's directory is open.
func (rc *recordCgroup) openEvents() (*cgroup2.Events, error) {
	if rc.dirFD < 0 {
		return nil, nil
	}
	if rc.events == nil {
		if !rc.holdFile() {
			return nil, nil
		}
		events, err := cgroup2.Dir{Path: rc.dir, At: rc.dirFD}.OpenEvents()
		if err != nil {
			rc.files.Add(-1)
			return nil, err
		}
		rc.events = events
	}
	return rc.events, nil
}

// filesMax is how many files (cpu.stat, cgroup.events) record cgroups
// hold open at once (recordCgroup.stat): about two records' worth for
// each running tree allowed its directory.
const filesMax = 2 * heldMax

// holdFile counts a file rc is about to hold, unless filesMax are held.
func (rc *recordCgroup) holdFile() bool {
	if rc.files.Add(1) <= filesMax {
		return true
	}
	rc.files.Add(-1)
	return false
}

// cpu reads rc's cpu.stat through stat while rc's directory is open,
// else (or if it cannot be opened) through d; err says it could not be
// read (the cgroup was removed from outside, say).
func (rc *recordCgroup) cpu(d cgroup2.Dir) (cgroup2.Usage, error) {
	if rc.dirFD < 0 {
		return d.ReadCPU()
	}
	if rc.stat == nil {
		if !rc.holdFile() {
			return d.ReadCPU()
		}
		stat, err := cgroup2.Dir{Path: rc.dir, At: rc.dirFD}.OpenCPU()
		if err != nil {
			rc.files.Add(-1)
			return d.ReadCPU()
		}
		rc.stat = stat
	}
	return rc.stat.ReadCPU()
}

// openDir opens rc's directory, relative to the Manager's cgroup h,
// unless it is open.
func (rc *recordCgroup) openDir(h cgroup2.Dir) error {
	if rc.dirFD >= 0 {
		return nil
	}
	fd, err := h.OpenChild(rc.name)
	if err != nil {
		return xerrors.Errorf("open cgroup: %w", err)
	}
	rc.dirFD = fd
	return nil
}

// heldMax is how many running trees may hold their cgroup's directory
// open (recordCgroup): a start then pays for at most that many
// descriptors, about what closing the directory on the start path and
// reopening it to recycle the cgroup costs.
const heldMax = 32

// holdDir reports whether a tree whose child was just cloned in may keep
// its cgroup's directory open, and counts it if so; the tree's release
// calls unholdDir.
func (h *cgroupHost) holdDir() bool {
	if h.held.Add(1) <= heldMax {
		return true
	}
	h.held.Add(-1)
	return false
}

// unholdDir uncounts a tree that held its directory (holdDir).
func (h *cgroupHost) unholdDir() { h.held.Add(-1) }

// closeDir closes rc's directory: its child was cloned into it, or it is
// about to be removed.
func (rc *recordCgroup) closeDir() {
	if rc.events != nil {
		rc.events.Close()
		rc.events = nil
		rc.files.Add(-1)
	}
	if rc.stat != nil {
		rc.stat.Close()
		rc.stat = nil
		rc.files.Add(-1)
	}
	if rc.dirFD >= 0 {
		_ = unix.Close(rc.dirFD)
		rc.dirFD = -1
	}
}

// discard closes rc and removes its directory.
func (h *cgroupHost) discard(rc *recordCgroup) {
	rc.closeDir()
	h.removeRecord(rc.name)
}

// probe starts a child inside a fresh record cgroup, to learn whether
// clone3 into a cgroup works here (cgroup2.Dir.ProbeClone). The cgroup
// becomes the first spare: nothing ran in it for good.
func (h *cgroupHost) probe() error {
	rc, err := h.create()
	if err != nil {
		return xerrors.Errorf("cgroup v2: %v: %w", err, ErrUnsupported)
	}
	if err := (cgroup2.Dir{Path: rc.dir}).ProbeClone(); err != nil {
		h.discard(rc)
		return xerrors.Errorf("cgroup v2: %v: %w", err, ErrUnsupported)
	}
	h.giveBack(rc)
	return nil
}

// create makes a new record cgroup and opens its directory.
func (h *cgroupHost) create() (*recordCgroup, error) {
	h.mu.Lock()
	h.next++
	name := "t" + strconv.Itoa(h.next)
	h.mu.Unlock()
	rc := &recordCgroup{name: name, dir: h.dir + "/" + name, rel: h.rel + "/" + name, dirFD: -1, files: &h.files}
	h.fdMu.RLock()
	err := h.d.MakeChild(name)
	if err == nil {
		err = rc.openDir(h.d)
	}
	h.fdMu.RUnlock()
	if err != nil {
		h.removeRecord(name)
		return nil, xerrors.Errorf("make cgroup: %w", err)
	}
	return rc, nil
}

// spareTarget is how many new record cgroups the worker keeps ready; a
// take that finds none doubles it, up to spareBurst, so that a burst of
// starts finds them made. spareMax bounds the spares kept, reused ones
// included.
const (
	spareTarget = 2
	spareBurst  = 64
	spareMax    = 256
)

// take returns a ready record cgroup, its directory open: a spare if
// there is one, else a new one. The worker refills the spares when they
// run out, or when a record's cgroup is done (done kicks it; a record
// that ended with its child has its exit goroutine do the worker's work
// instead, doneLater), whichever comes first.
func (h *cgroupHost) take() (*recordCgroup, error) {
	h.mu.Lock()
	var rc *recordCgroup
	if n := len(h.spare); n > 0 {
		rc = h.spare[n-1]
		h.spare = h.spare[:n-1]
	}
	h.takes++
	if rc == nil && !h.idle {
		h.want = min(2*h.want, spareBurst)
	}
	h.idle = false
	if len(h.spare) == 0 {
		// Otherwise the spares are refilled when this record's cgroup is
		// done, by its exit goroutine or the worker: no wake-up here.
		h.kickLocked()
	}
	h.mu.Unlock()
	if rc == nil {
		return h.create()
	}
	return rc, nil
}

// giveBack returns a record cgroup that holds no process (a failed start,
// the worker's new one, or one recycled) to the spares, its directory
// open, unless there are enough. A cgroup that was killed or limited is
// never given back (see done).
func (h *cgroupHost) giveBack(rc *recordCgroup) {
	h.mu.Lock()
	keep := !h.closed && !h.draining && len(h.spare) < spareMax
	if keep {
		h.spare = append(h.spare, rc)
		h.armIdleLocked()
	}
	h.mu.Unlock()
	if !keep {
		h.discard(rc)
	}
}

// done queues a record cgroup whose tree is empty: for reuse if reusable
// (it was neither killed nor limited) and the host reuses cgroups, else for
// removal. The worker decides and does the work, off the record's path.
func (h *cgroupHost) done(rc *recordCgroup, reusable bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.queueLocked(rc, reusable)
	h.kickLocked()
}

// doneLater is done for the exit goroutine of rc's record (settleOwn):
// a cgroup queued for reuse wakes no worker; the caller runs the queue
// itself (later, runQueue) once the record's end is published. Waking
// the worker at every record's end cost a goroutine and a thread's
// wake-up per start of `true`, where the exit goroutine is about to end
// anyway. A cgroup queued for removal (rare: killed, limited, outlived
// by a member, or Close began) still kicks the worker; later is then
// nil.
func (h *cgroupHost) doneLater(rc *recordCgroup, reusable bool) (later func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.queueLocked(rc, reusable) && !h.closed {
		return h.runQueue
	}
	h.kickLocked()
	return nil
}

// queueLocked queues rc for reuse (reports true) or removal (see done).
// The caller holds h.mu.
func (h *cgroupHost) queueLocked(rc *recordCgroup, reusable bool) bool {
	if reusable && h.reuse && !h.draining {
		h.recycle = append(h.recycle, rc)
		return true
	}
	rc.closeDir()
	h.remove = append(h.remove, rc.name)
	return false
}

// runQueue does the worker's work but making spares on the caller's
// goroutine (doneLater's later), unless the worker runs, which then does
// it: what doneLater queued is never left undone, since the worker takes
// the queue under h.mu before it stops. Close waits for it as for the
// worker (h.wg; a record's exit goroutine also ends before Close removes
// the cgroups).
func (h *cgroupHost) runQueue() {
	h.mu.Lock()
	if h.working || h.closed {
		h.mu.Unlock()
		return
	}
	h.working = true
	h.wg.Add(1)
	h.mu.Unlock()
	h.work(false)
}

// refused takes back the cgroup of a start that failed (nothing runs in
// it: a failed exec's child is reaped already) before the start returns:
// a refused start leaves nothing behind (design section 8), not even the
// worker reading the cgroup's files after Start returned. The child's CPU
// time is in the cgroup's accounting, so it is reused only from a new
// baseline, as a record's cgroup is; read here, off no record's path.
func (h *cgroupHost) refused(rc *recordCgroup) {
	if !h.reuse {
		h.discard(rc)
		return
	}
	h.recycled(rc)
}

// recycled readies a done record cgroup for reuse: it must have nothing
// below it (a member may have made cgroups there), and its accounting
// becomes the next record's baseline (nothing adds to it while it is
// empty). Otherwise it is removed. It is empty: a record's tree releases
// it only once it saw it so (settle, under the tree's mutex; a tree that
// Close releases is never reused), a refused start's child was reaped
// before Start returned, and nothing enters an empty cgroup but a child
// a start clones into a spare (or a process an outsider moves in by
// writing its cgroup.procs, which a look here could not exclude either:
// it may come after). Its directory is opened again unless its tree held
// it (recordCgroup), to be the spare's.
func (h *cgroupHost) recycled(rc *recordCgroup) {
	h.fdMu.RLock()
	err := rc.openDir(h.d)
	h.fdMu.RUnlock()
	if err != nil {
		h.discard(rc)
		return
	}
	d := cgroup2.Dir{Path: rc.dir, At: rc.dirFD}
	if d.Children() != 0 { // one fstat of the held directory
		h.discard(rc)
		return
	}
	// Reuse: only cpu.stat accounts here. A cgroup whose cpu.stat cannot
	// be read is not reused: removed from outside, its held directory
	// still stats as one without children, and a start into it would
	// fail; with no baseline, its next record would report its
	// predecessors' usage as its own.
	base, err := rc.cpu(d)
	if err != nil {
		h.discard(rc)
		return
	}
	rc.base = base
	h.giveBack(rc)
}

// kickLocked starts the worker unless it runs. The caller holds h.mu.
func (h *cgroupHost) kickLocked() {
	if h.working || h.closed {
		return
	}
	h.working = true
	h.wg.Add(1)
	// Stops when there is nothing left to do: no removal queued and the
	// spares made. close waits for it.
	go h.work(true)
}

// work readies and removes the queued cgroups, then, with makeSpares,
// makes spares up to want. Without (a record's exit goroutine, runQueue,
// which Scope.Close waits for) it leaves the spares to the worker, which
// it starts if some are missing.
func (h *cgroupHost) work(makeSpares bool) {
	defer h.wg.Done()
	for {
		h.mu.Lock()
		switch {
		case len(h.remove) > 0:
			name := h.remove[0]
			h.remove = h.remove[1:]
			h.mu.Unlock()
			h.removeRecord(name)
		case len(h.recycle) > 0:
			rc := h.recycle[0]
			h.recycle = h.recycle[1:]
			h.mu.Unlock()
			h.recycled(rc)
		case makeSpares && h.makingLocked():
			h.mu.Unlock()
			rc, err := h.create()
			if err != nil {
				h.mu.Lock()
				h.working = false
				h.mu.Unlock()
				return // the next take creates its own and says why
			}
			h.giveBack(rc)
		default:
			h.working = false
			if !makeSpares && h.makingLocked() {
				h.kickLocked()
			}
			h.mu.Unlock()
			return
		}
	}
}

// makingLocked reports whether the worker is to make spares: fewer than
// want are ready, and the host is neither idle nor closing. The caller
// holds h.mu.
func (h *cgroupHost) makingLocked() bool {
	return len(h.spare) < h.want && !h.idle && !h.closed && !h.draining
}

// spareIdle is how long the pool keeps its spares without a take: a
// Manager whose starts stopped holds no spare cgroup, and no descriptor
// of one, between spareIdle and twice that after its last start.
const spareIdle = 2 * time.Second

// armIdleLocked arms the idle timer unless it is armed or the host
// closes. The caller holds h.mu. Stopper: the timer's callback (idleTick)
// re-arms it only while spares are kept, and close stops it or waits for
// the callback (h.timers).
func (h *cgroupHost) armIdleLocked() {
	if h.idleTimer != nil || h.closed || h.draining {
		return
	}
	h.seen = h.takes
	h.timers.Add(1)
	h.idleTimer = h.clock.AfterFunc(spareIdle, h.idleTick, "cgroup", "idle")
}

// idleTick is the idle timer's callback: if no take came since it was
// armed, the spares are closed and queued for removal, want falls back
// to spareTarget, and the worker makes none until the next take; if a
// take came, it is armed again.
func (h *cgroupHost) idleTick() {
	defer h.timers.Done()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.idleTimer = nil
	if h.closed || h.draining || len(h.spare) == 0 {
		return
	}
	if h.takes != h.seen {
		h.armIdleLocked()
		return
	}
	for _, rc := range h.spare {
		rc.closeDir()
		h.remove = append(h.remove, rc.name)
	}
	h.spare = nil
	h.want = spareTarget
	h.idle = true
	h.kickLocked()
}
