//go:build linux && !proc_otherunix

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
// This file is the Manager's cgroup: naming, opening it, leftovers, Close.
// The pool of ready record cgroups is cgrouppool_linux.go's, a record's
// tree cgrouptree_linux.go's. The cgroup v2 file mechanics (mount
// discovery, the directory handle, the clone probe) are internal/cgroup2's.

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

// flushUsage reads the Manager's cpu.stat, which makes the kernel fold the
// CPU accounting of every record cgroup below it (rstat) at once. The
// kernel keeps, for each CPU, a list of the child cgroups of a cgroup
// whose accounting changed since the last read, singly linked and newest
// first, and a record's cpu.stat read takes the record off its parent's
// list by walking it: with many records, each read walks many of its
// siblings, and one read of the parent empties the list. Close's drain
// reads it once, before the trees are stopped (every record that ran since
// the last read is on the list), and again after every flushEvery records
// read their usage, since each exit puts its record back on the list.
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
