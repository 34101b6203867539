//go:build linux

package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/quartz"
	"github.com/procvisor/proc/internal/cgroup2"
	"github.com/procvisor/proc/internal/procfs"
	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// The cgroup backend (Linux, cgroup v2). A Manager makes one cgroup of its
// own below the parent (Options.CgroupParent, else the host's own cgroup)
// and one per record below that. Each child is cloned straight into its
// record's cgroup (clone3 with CLONE_INTO_CGROUP), so no member can leave
// it: setsid, double forks and job control all stay inside. Kill writes
// cgroup.kill; the tree is empty when cgroup.events says "populated 0",
// which the runtime poller reports without a thread or a spin. Creating
// and removing cgroups happens off the start-to-final path: a worker keeps
// spare cgroups ready and removes those that are done.
//
// A record's cgroup that is done is reused for a later record when that
// cannot be seen: it emptied with its child (never killed: cgroup.kill
// also kills what is cloned in later; nor stopped, nor outlived by a
// member), no limit was written into it, nothing was left below it, and
// the accounting a record reads can be taken as a difference from a
// baseline. cpu.stat and memory.events only grow, so the baseline is read
// on the worker once the cgroup is empty (nothing can add to them then)
// and subtracted. memory.peak and pids.peak cannot be taken that
// way (pids.peak cannot be reset; memory.peak can be, on 6.12 and later,
// only for reads through the descriptor that reset it), so where the
// memory or pids controller is enabled for the record cgroups, none is
// reused and each record gets a fresh one, as before. Reuse saves the
// mkdir and rmdir of a cgroup per record (about 85 us each where first
// measured; 28-42 us and 20-31 us of CPU on an idle machine of
// 2026-11-28, both serialised by the kernel's cgroup mutex, so that
// making or removing them from several goroutines at once gains nothing).
//
// This file is the policy: the pool, naming, and leftovers. The cgroup v2
// file mechanics (mount discovery, the directory handle, the clone probe)
// are internal/cgroup2's.

// cgroupPrefix marks the cgroups a Manager makes, so that they can be told
// from any other: "procvisor-<PID namespace>-<host pid>-<host start
// time>-<n>": the host, for good, as its own PID namespace sees it.
const cgroupPrefix = "procvisor-"

// keepMark follows cgroupPrefix in the name of a Manager that set
// KeepOnHostExit: its trees were meant to outlive its host, so no other
// Manager removes them.
const keepMark = "keep-"

// managerSeq numbers the Managers of this host process.
var managerSeq atomic.Uint64

// cgroupHost is a Manager's own cgroup and its pool of record cgroups.
type cgroupHost struct {
	dir string // the Manager's cgroup, absolute
	rel string // dir as /proc/<pid>/cgroup names it
	// fdMu guards d.At: read-held while d is used, so that close never
	// closes the descriptor under a call that uses it (its number could
	// name another directory by then). Not held across anything else.
	fdMu sync.RWMutex
	// d is dir, held open (d.At) from openCgroupHost until close (then by
	// path: calls fail, the cgroup is gone): record cgroups are made,
	// opened and removed relative to it, with no walk of the path.
	d cgroup2.Dir

	// wg counts the worker; close waits for it.
	wg sync.WaitGroup
	// clock drives the idle timer (containState.poolClock).
	clock quartz.Clock
	// timers counts the armed idle timer and its callback in progress:
	// close stops the timer, or waits for the callback, through it.
	timers sync.WaitGroup

	// reuse says whether record cgroups that are done may be reused: no
	// peak counter is enabled for them (see above). Set by openCgroupHost.
	reuse bool

	// mu guards the fields below. It is a leaf lock.
	mu      sync.Mutex
	next    int             // names record cgroups t1, t2, ...
	spare   []*recordCgroup // ready record cgroups: new, or emptied by a record
	want    int             // new spares the worker keeps made: spareTarget, more after a burst
	recycle []*recordCgroup // record cgroups that are done, to reuse if they can be
	remove  []string        // names of record cgroups that are done, to remove
	working bool            // the worker runs
	// takes counts the takes; seen is its value when the idle timer was
	// last armed: a timer that finds it unchanged empties the pool.
	takes, seen uint64
	// idleTimer is armed while spares are kept (armIdleLocked); nil
	// otherwise.
	idleTimer *quartz.Timer
	// idle is set when the idle timer emptied the pool, and cleared by
	// the next take: meanwhile the worker makes no spares.
	idle bool
	// draining is set when Close begins: from then on nothing is made
	// or kept for reuse, and what is done is removed at once, while
	// Close waits for the trees.
	draining bool
	closed   bool

	// flushing is set when Close begins (draining), and ends counts the
	// records whose usage was read since: see flushUsage.
	flushing atomic.Bool
	ends     atomic.Int64
	// held counts the running trees that hold their cgroup's directory
	// open: at most heldMax (see recordCgroup).
	held atomic.Int32
	// files counts the files record cgroups hold open: at most filesMax
	// (recordCgroup).
	files atomic.Int32
}

// flushEvery is how many records' usage reads, while Close stops every
// tree at once, come between reads of the Manager's cpu.stat (flushUsage).
const flushEvery = 64

// openCgroupHost finds the parent, makes the Manager's cgroup and checks
// that a child can be started inside a cgroup there. A parent that is not a
// cgroup v2 directory is ErrInvalid; anything else that stops cgroups from
// working is ErrUnsupported, saying why.
func openCgroupHost(parent string, keep bool, clock quartz.Clock) (*cgroupHost, error) {
	mount, root, err := cgroup2.Mount()
	if err != nil {
		return nil, xerrors.Errorf("cgroup v2: %v: %w", err, ErrUnsupported)
	}
	if parent == "" {
		self, err := cgroup2.Self()
		if err != nil {
			return nil, xerrors.Errorf("cgroup v2: %v: %w", err, ErrUnsupported)
		}
		rel, ok := strings.CutPrefix(self, root)
		if !ok {
			return nil, xerrors.Errorf("cgroup v2: this process's cgroup %s is outside the mount's root %s: %w", self, root, ErrUnsupported)
		}
		parent = filepath.Join(mount, rel)
	} else if !cgroup2.IsDir(parent) {
		return nil, xerrors.Errorf("cgroup parent %s is not a cgroup v2 directory: %w", parent, ErrInvalid)
	}
	parent = filepath.Clean(parent)
	rel, err := filepath.Rel(mount, parent)
	if err != nil || strings.HasPrefix(rel, "..") {
		return nil, xerrors.Errorf("cgroup parent %s is not below the cgroup v2 mount %s: %w", parent, mount, ErrInvalid)
	}
	removeLeftovers(parent)
	prefix := cgroupPrefix
	if keep {
		prefix += keepMark
	}
	h := &cgroupHost{want: spareTarget, clock: clock}
	for {
		// The name is this host's for good: its PID and start time.
		name := fmt.Sprintf("%s%s-%d-%s-%d", prefix, selfPIDNamespace(), os.Getpid(), selfStartTime(), managerSeq.Add(1))
		h.dir, h.rel = filepath.Join(parent, name), filepath.Join(root, rel, name)
		err := os.Mkdir(h.dir, 0o755)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, xerrors.Errorf("cgroup v2: make %s: %v: %w", h.dir, err, ErrUnsupported)
		}
	}
	fd, err := unix.Open(h.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = os.Remove(h.dir)
		return nil, xerrors.Errorf("cgroup v2: open %s: %v: %w", h.dir, err, ErrUnsupported)
	}
	h.d = cgroup2.Dir{Path: h.dir, At: fd}
	h.d.EnableControllers(limitControllers)
	enabled := h.d.SubtreeControl()
	h.reuse = !slices.Contains(enabled, "memory") && !slices.Contains(enabled, "pids")
	if err := h.probe(); err != nil {
		_ = unix.Close(fd)
		_ = os.Remove(h.dir)
		return nil, err
	}
	return h, nil
}

// limitControllers are the controllers behind Limits. The Manager's
// cgroup enables those its parent delegates to it, for the record cgroups
// (it holds no process itself, so the kernel allows it).
var limitControllers = []string{"memory", "pids", "cpu"}

// limit writes l into the record cgroup dir, before any child is in it. A
// limit whose controller is not enabled there is ErrUnsupported.
func (h *cgroupHost) limit(dir string, l Limits) error {
	err := cgroup2.Dir{Path: dir}.SetLimits(cgroup2.Limits{MemoryBytes: l.MemoryBytes, Pids: l.Pids, CPUs: l.CPUs})
	if err == nil {
		return nil
	}
	if !errors.Is(err, cgroup2.ErrNoController) {
		return xerrors.Errorf("start: %w", err)
	}
	return xerrors.Errorf("start: %v (the controller must be enabled in cgroup.subtree_control of %s, the parent of the Manager's cgroup; set Options.CgroupParent to a delegated cgroup that enables it): %w",
		err, filepath.Dir(h.dir), ErrUnsupported)
}

// removeLeftovers removes the cgroups that Managers whose host process is
// gone left in parent, killing what is still inside first. It leaves alone
// the cgroups of live hosts, of Managers that set KeepOnHostExit, and
// anything whose name no Manager would have made.
func removeLeftovers(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || strings.HasPrefix(name, cgroupPrefix+keepMark) {
			continue
		}
		ns, pid, start, ok := parseCgroupName(name)
		// A host in another PID namespace cannot be looked up here: its
		// cgroups are left alone, live or not.
		if !ok || ns != selfPIDNamespace() || hostLives(pid, start) {
			continue
		}
		removeDeadManager(filepath.Join(parent, name))
	}
}

// parseCgroupName reads "procvisor-<PID namespace>-<pid>-<start time>-<n>".
func parseCgroupName(name string) (ns string, pid int, start string, ok bool) {
	rest, ok := strings.CutPrefix(name, cgroupPrefix)
	if !ok {
		return "", 0, "", false
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 4 {
		return "", 0, "", false
	}
	for _, p := range parts {
		if _, err := strconv.ParseUint(p, 10, 64); err != nil {
			return "", 0, "", false
		}
	}
	pid, _ = strconv.Atoi(parts[1])
	return parts[0], pid, parts[2], true
}

// hostLives reports whether process pid exists and started at start
// (clock ticks after boot): the same host, not a process that reused its
// PID.
func hostLives(pid int, start string) bool {
	st, ok := procfs.ReadStat(pid)
	return ok && strconv.FormatUint(st.StartTime, 10) == start
}

// removeDeadManager kills everything in a dead Manager's cgroup (its
// record cgroups are below it), waits until it is empty, and removes it.
func removeDeadManager(dir string) {
	records, _ := filepath.Glob(filepath.Join(dir, "t*"))
	all := cgroup2.Dir{Path: dir}
	if all.Populated() {
		_ = all.Kill()
		for _, r := range records {
			_ = cgroup2.Dir{Path: r}.Kill()
		}
		ctx, cancel := context.WithTimeout(context.Background(), killWait)
		all.WaitEmpty(ctx)
		cancel()
	}
	for _, r := range records {
		removeCgroup(r)
	}
	removeCgroup(dir)
}

// recordCgroup is a record's cgroup. While it is a spare it holds its
// directory open (made or reopened by the worker, off the start path):
// clone3's target. Every descriptor the host holds is copied into each
// child it forks and closed again at the child's exec, so each one held
// per running record makes every later start slower (measured: about
// 90 ns of a fork's wall time per open descriptor; with two per record,
// its directory and cgroup.events, 1,000 concurrent starts in cgroup mode
// took some 90 us more a start on average than in group mode, the gap to
// the kernel's floor). So a running record's tree opens cgroup.events
// only when it looks (usually once, at the end), and keeps the directory
// open only while at most heldMax trees do (the common case: few records
// run at once, and a held directory needs neither a close on the start
// path nor a reopen by the worker to recycle it); beyond that, the start
// closes it once the child is cloned in, and the tree opens its files
// relative to the Manager's cgroup instead (cgroup2.Dir.Name). At most
// spareMax spares are kept, so those not in use hold at most spareMax
// directory descriptors. A record cgroup whose directory is open may
// also hold its cpu.stat and cgroup.events open across reuse (stat,
// events), filesMax at most in all.
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
// descriptors (about 3 us), about what closing the directory on the
// start path and reopening it to recycle the cgroup costs.
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

// path is the Manager's cgroup directory; "" for nil.
func (h *cgroupHost) path() string {
	if h == nil {
		return ""
	}
	return h.dir
}

// drain tells h that Close began: the worker removes the spares, and
// every record cgroup that is done from now on, while Close stops the
// trees, instead of after.
func (h *cgroupHost) drain() {
	if h == nil {
		return
	}
	h.mu.Lock()
	h.draining = true
	for _, rc := range append(h.spare, h.recycle...) {
		rc.closeDir()
		h.remove = append(h.remove, rc.name)
	}
	h.spare, h.recycle = nil, nil
	h.kickLocked()
	h.mu.Unlock()
	h.flushing.Store(true)
	h.flushUsage()
}

// flushUsage reads the Manager's cpu.stat, which makes the kernel fold
// the CPU accounting of every record cgroup below it (rstat) at once.
// The kernel keeps, for each CPU, a list of the child cgroups of a cgroup
// whose accounting changed since the last read, singly linked and newest
// first, and a record's cpu.stat read takes the record off its parent's
// list by walking it: with 1,000 records each read walked hundreds of
// its siblings (measured: 21 us a read with 1,000 records on the list
// against 8.5 us with 20, and 11.7 us after one read of the parent, which
// cost 0.9 ms). Close's drain reads it once, before the trees are
// stopped (every record that ran since the last read is on the list),
// and again after every flushEvery records read their usage, since each
// exit puts its record back on the list.
func (h *cgroupHost) flushUsage() {
	h.fdMu.RLock()
	_ = h.d.CPU()
	h.fdMu.RUnlock()
}

// reading is called before a record's usage is read: while Close stops
// every tree, every flushEvery-th read is preceded by flushUsage.
func (h *cgroupHost) reading() {
	if h.flushing.Load() && h.ends.Add(1)%flushEvery == 0 {
		h.flushUsage()
	}
}

// waitEmpty returns once no process is left in the Manager's cgroup (in
// any record's cgroup below it: the Manager's holds none itself), or ctx
// ends.
func (h *cgroupHost) waitEmpty(ctx context.Context) {
	cgroup2.Dir{Path: h.dir}.WaitEmpty(ctx)
}

// close waits for the worker, removes the spares and whatever is queued,
// and then the Manager's cgroup.
func (h *cgroupHost) close() {
	h.mu.Lock()
	h.closed = true
	timer := h.idleTimer
	h.idleTimer = nil
	h.mu.Unlock()
	if timer != nil && timer.Stop("cgroup", "idle") {
		h.timers.Done() // its callback will not run
	}
	h.timers.Wait()
	h.wg.Wait()
	h.mu.Lock()
	spare, remove := append(h.spare, h.recycle...), h.remove
	h.spare, h.recycle, h.remove = nil, nil, nil
	h.mu.Unlock()
	for _, rc := range spare {
		h.discard(rc)
	}
	for _, name := range remove {
		h.removeRecord(name)
	}
	h.fdMu.Lock()
	_ = unix.Close(h.d.At)
	h.d.At = 0
	h.fdMu.Unlock()
	removeCgroup(h.dir)
}

// removeRecord removes the record cgroup name, relative to the Manager's
// cgroup (cgroup2.Dir.RemoveChild).
func (h *cgroupHost) removeRecord(name string) {
	h.fdMu.RLock()
	h.d.RemoveChild(name)
	h.fdMu.RUnlock()
}

// removeCgroup removes an empty cgroup directory and the cgroups a member
// made below it. A member the kernel has not torn down keeps it (EBUSY):
// such a cgroup is left for the next Manager on this parent.
func removeCgroup(dir string) { cgroup2.Dir{Path: dir}.Remove() }

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

// selfPIDNamespace is the inode number of this process's PID namespace:
// a PID names a host only within it.
var selfPIDNamespace = sync.OnceValue(func() string {
	ino, ok := procfs.PIDNamespace(0)
	if !ok {
		return "0"
	}
	return strconv.FormatUint(ino, 10)
})

// selfStartTime is this process's start time in clock ticks after boot
// (field 22 of /proc/self/stat): with the PID, it names the host for good.
func selfStartTime() string {
	return strconv.FormatUint(procfs.SelfStartTime(), 10)
}
