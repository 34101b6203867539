//go:build linux

package proc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

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
// one spare cgroup ready and removes those that are done.

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

	// wg counts the worker; close waits for it.
	wg sync.WaitGroup

	// mu guards the fields below. It is a leaf lock.
	mu      sync.Mutex
	next    int             // names record cgroups t1, t2, ...
	spare   []*recordCgroup // ready record cgroups, never used
	remove  []string        // record cgroups that are done
	working bool            // the worker runs
	closed  bool
}

// openCgroupHost finds the parent, makes the Manager's cgroup and checks
// that a child can be started inside a cgroup there. A parent that is not a
// cgroup v2 directory is ErrInvalid; anything else that stops cgroups from
// working is ErrUnsupported, saying why.
func openCgroupHost(parent string, keep bool) (*cgroupHost, error) {
	mount, root, err := cgroup2Mount()
	if err != nil {
		return nil, xerrors.Errorf("cgroup v2: %v: %w", err, ErrUnsupported)
	}
	if parent == "" {
		self, err := selfCgroup()
		if err != nil {
			return nil, xerrors.Errorf("cgroup v2: %v: %w", err, ErrUnsupported)
		}
		rel, ok := strings.CutPrefix(self, root)
		if !ok {
			return nil, xerrors.Errorf("cgroup v2: this process's cgroup %s is outside the mount's root %s: %w", self, root, ErrUnsupported)
		}
		parent = filepath.Join(mount, rel)
	} else if !isCgroup2Dir(parent) {
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
	h := &cgroupHost{}
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
	h.enableControllers()
	if err := h.probe(); err != nil {
		_ = os.Remove(h.dir)
		return nil, err
	}
	return h, nil
}

// cpuPeriod is the period of cpu.max, and the CPU rate's unit of account.
const cpuPeriod = 100 * time.Millisecond

// cpuQuota is the share of cpuPeriod, in microseconds, that cpus cores
// may use in each period: at least the kernel's minimum of 1 ms.
func cpuQuota(cpus float64) int64 {
	return max(int64(math.Round(cpus*float64(cpuPeriod.Microseconds()))), 1000)
}

// limitControllers are the controllers behind Limits.
var limitControllers = []string{"memory", "pids", "cpu"}

// enableControllers enables for the record cgroups every controller of
// limitControllers that the parent delegates to the Manager's cgroup. The
// Manager's cgroup holds no process itself, so the kernel allows it. What
// cannot be enabled is found missing when a limit needs it.
func (h *cgroupHost) enableControllers() {
	data, err := os.ReadFile(filepath.Join(h.dir, "cgroup.controllers"))
	if err != nil {
		return
	}
	have := strings.Fields(string(data))
	for _, c := range limitControllers {
		if slices.Contains(have, c) {
			_ = os.WriteFile(filepath.Join(h.dir, "cgroup.subtree_control"), []byte("+"+c), 0)
		}
	}
}

// limit writes l into the record cgroup dir, before any child is in it. A
// limit whose controller is not enabled there is ErrUnsupported.
func (h *cgroupHost) limit(dir string, l Limits) error {
	if err := writeLimits(dir, l); err != nil {
		if !errors.Is(err, ErrUnsupported) {
			return xerrors.Errorf("start: %w", err)
		}
		return xerrors.Errorf("start: %v (the controller must be enabled in cgroup.subtree_control of %s, the parent of the Manager's cgroup; set Options.CgroupParent to a delegated cgroup that enables it): %w",
			err, filepath.Dir(h.dir), ErrUnsupported)
	}
	return nil
}

// writeLimits writes the non-zero limits of l into the cgroup dir:
// memory.max in bytes, pids.max, and cpu.max as "quota period" in
// microseconds. A controller file that is missing is ErrUnsupported.
func writeLimits(dir string, l Limits) error {
	type limitFile struct {
		set        bool
		controller string
		file       string
		value      string
	}
	for _, f := range []limitFile{
		{l.MemoryBytes > 0, "memory", "memory.max", strconv.FormatInt(l.MemoryBytes, 10)},
		{l.Pids > 0, "pids", "pids.max", strconv.Itoa(l.Pids)},
		{l.CPUs > 0, "cpu", "cpu.max", fmt.Sprintf("%d %d", cpuQuota(l.CPUs), cpuPeriod.Microseconds())},
	} {
		if !f.set {
			continue
		}
		path := filepath.Join(dir, f.file)
		// O_WRONLY without O_CREATE: a missing file is a missing controller.
		file, err := os.OpenFile(path, os.O_WRONLY, 0)
		if errors.Is(err, os.ErrNotExist) {
			return xerrors.Errorf("%s limit: the %s controller is not enabled for the record's cgroup %s: %w", f.controller, f.controller, dir, ErrUnsupported)
		}
		if err != nil {
			return xerrors.Errorf("%s limit: %w", f.controller, err)
		}
		_, err = file.WriteString(f.value)
		if cerr := file.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return xerrors.Errorf("%s limit: write %s to %s: %w", f.controller, f.value, path, err)
		}
	}
	return nil
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
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(data, ')')
	fields := bytes.Fields(data[i+1:])
	return i >= 0 && len(fields) > 19 && string(fields[19]) == start
}

// removeDeadManager kills everything in a dead Manager's cgroup (its
// record cgroups are below it), waits until it is empty, and removes it.
func removeDeadManager(dir string) {
	records, _ := filepath.Glob(filepath.Join(dir, "t*"))
	all := &cgroupTree{dir: dir}
	if all.populated() {
		_ = all.kill()
		for _, r := range records {
			_ = (&cgroupTree{dir: r}).kill()
		}
		ctx, cancel := context.WithTimeout(context.Background(), killWait)
		all.waitEmpty(ctx)
		cancel()
	}
	for _, r := range records {
		removeCgroup(r)
	}
	removeCgroup(dir)
}

// recordCgroup is a record's cgroup. While a record uses it, it holds the
// directory open (clone3's target, until the child started) and
// cgroup.events (read to learn whether the tree is empty); a spare holds
// nothing open.
type recordCgroup struct {
	dir    string
	dirFD  int      // -1 unless open
	events *os.File // nil unless open
}

// open opens what a start needs.
func (rc *recordCgroup) open() error {
	fd, err := unix.Open(rc.dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return xerrors.Errorf("open cgroup: %w", err)
	}
	events, err := os.Open(filepath.Join(rc.dir, "cgroup.events"))
	if err != nil {
		_ = unix.Close(fd)
		return xerrors.Errorf("open cgroup: %w", err)
	}
	rc.dirFD, rc.events = fd, events
	return nil
}

// close closes what rc holds open.
func (rc *recordCgroup) close() {
	if rc.dirFD >= 0 {
		_ = unix.Close(rc.dirFD)
		rc.dirFD = -1
	}
	if rc.events != nil {
		// Not set to nil: a tree may be reading it (ReadAt on a closed
		// *os.File fails safely), and a spare is opened again in take.
		_ = rc.events.Close()
	}
}

// discard closes rc and removes its directory.
func (rc *recordCgroup) discard() {
	rc.close()
	removeCgroup(rc.dir)
}

// probe starts a child inside a fresh record cgroup, to learn whether
// clone3 into a cgroup works here (seccomp refuses it in some containers).
// The child execs a path that cannot exist, inside the cgroup directory
// itself: ENOENT means it was cloned and ran; anything else is the refusal.
// The cgroup becomes the first spare: nothing ran in it for good.
func (h *cgroupHost) probe() error {
	rc, err := h.create()
	if err == nil {
		err = rc.open()
		if err != nil {
			rc.discard()
		}
	}
	if err != nil {
		return xerrors.Errorf("cgroup v2: %v: %w", err, ErrUnsupported)
	}
	_, err = syscall.ForkExec(filepath.Join(rc.dir, "absent"), []string{"absent"}, &syscall.ProcAttr{
		Sys: &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: rc.dirFD},
	})
	if !errors.Is(err, syscall.ENOENT) {
		rc.discard()
		return xerrors.Errorf("cgroup v2: starting a child inside a cgroup (clone3) failed: %v: %w", err, ErrUnsupported)
	}
	h.giveBack(rc)
	return nil
}

// create makes a new record cgroup.
func (h *cgroupHost) create() (*recordCgroup, error) {
	h.mu.Lock()
	h.next++
	dir := filepath.Join(h.dir, "t"+strconv.Itoa(h.next))
	h.mu.Unlock()
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, xerrors.Errorf("make cgroup: %w", err)
	}
	return &recordCgroup{dir: dir, dirFD: -1}, nil
}

// spareTarget is how many ready record cgroups the worker keeps.
const spareTarget = 2

// take returns a ready record cgroup, open: a spare if there is one, else
// a new one. The worker refills the spares when they run out, or when a
// record's cgroup is done (done kicks it), whichever comes first.
func (h *cgroupHost) take() (*recordCgroup, error) {
	h.mu.Lock()
	var rc *recordCgroup
	if n := len(h.spare); n > 0 {
		rc = h.spare[n-1]
		h.spare = h.spare[:n-1]
	}
	if len(h.spare) == 0 {
		// Otherwise the worker refills when this record's cgroup is done:
		// one wake-up per start, not two.
		h.kickLocked()
	}
	h.mu.Unlock()
	if rc == nil {
		var err error
		if rc, err = h.create(); err != nil {
			return nil, err
		}
	}
	if err := rc.open(); err != nil {
		rc.discard()
		return nil, err
	}
	return rc, nil
}

// giveBack returns a record cgroup that no child entered for good (a
// failed start, or the worker's new one) to the spares, closed, unless
// there are enough. A cgroup a child ran in, or that was killed, is never
// reused: its accounting belongs to its record, and cgroup.kill also
// kills what is cloned into it later.
func (h *cgroupHost) giveBack(rc *recordCgroup) {
	rc.close()
	h.mu.Lock()
	keep := !h.closed && len(h.spare) < spareTarget
	if keep {
		h.spare = append(h.spare, rc)
	}
	h.mu.Unlock()
	if !keep {
		removeCgroup(rc.dir)
	}
}

// done queues the removal of a record cgroup whose tree is empty.
func (h *cgroupHost) done(rc *recordCgroup) {
	rc.close()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.remove = append(h.remove, rc.dir)
	h.kickLocked()
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
	go h.work()
}

func (h *cgroupHost) work() {
	defer h.wg.Done()
	for {
		h.mu.Lock()
		switch {
		case len(h.remove) > 0:
			dir := h.remove[0]
			h.remove = h.remove[1:]
			h.mu.Unlock()
			removeCgroup(dir)
		case len(h.spare) < spareTarget && !h.closed:
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
			h.mu.Unlock()
			return
		}
	}
}

// path is the Manager's cgroup directory; "" for nil.
func (h *cgroupHost) path() string {
	if h == nil {
		return ""
	}
	return h.dir
}

// close waits for the worker, removes the spares and whatever is queued,
// and then the Manager's cgroup.
func (h *cgroupHost) close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.wg.Wait()
	h.mu.Lock()
	spare, remove := h.spare, h.remove
	h.spare, h.remove = nil, nil
	h.mu.Unlock()
	for _, rc := range spare {
		rc.discard()
	}
	for _, dir := range remove {
		removeCgroup(dir)
	}
	removeCgroup(h.dir)
}

// removeCgroup removes an empty cgroup directory, and the cgroups a
// member made below it (a tree may use cgroups of its own), deepest first.
// It fails (EBUSY) only if a member lives on that the kernel has not torn
// down; such a cgroup is left for the next Manager on this parent.
func removeCgroup(dir string) {
	err := unix.Rmdir(dir)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			removeCgroup(filepath.Join(dir, e.Name()))
		}
	}
	_ = unix.Rmdir(dir)
}

// cgroupTree is a record's cgroup.
type cgroupTree struct {
	host *cgroupHost   // nil for a dead Manager's cgroup (removeLeftovers)
	rc   *recordCgroup // nil likewise
	dir  string
	rel  string // as /proc/<pid>/cgroup names it

	// mu guards the fields below. It is a leaf lock.
	mu       sync.Mutex
	released bool
	// waiters are the cgroup.events files waitEmpty is blocked on: a
	// removed cgroup's file is never notified again, so release ends them.
	waiters map[*os.File]bool
}

func (c *cgroupTree) signal(sig Signal) error {
	if !c.populated() {
		return ErrNotRunning
	}
	if sig == Kill {
		return c.kill()
	}
	// Terminate and Interrupt go to every member listed, then SIGCONT, so
	// that a stopped member runs its handler. A member started during a
	// pass is caught by the next.
	seen := map[int]bool{}
	for range 3 {
		fresh := 0
		for _, pid := range c.procs() {
			if seen[pid] {
				continue
			}
			seen[pid] = true
			fresh++
			c.signalMember(pid, unixSignal(sig))
		}
		if fresh == 0 {
			break
		}
	}
	if len(seen) == 0 {
		return ErrNotRunning
	}
	return nil
}

// signalMember sends sig (then SIGCONT, unless sig is SIGKILL) to pid if
// it is still a member: a
// pidfd pins the process, and its cgroup is read after the pidfd was
// opened, so a PID reused by a stranger in between is never signalled.
func (c *cgroupTree) signalMember(pid int, sig unix.Signal) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if !c.holds(pid) {
		return
	}
	if unix.PidfdSendSignal(fd, sig, nil, 0) == nil && sig != unix.SIGKILL {
		_ = unix.PidfdSendSignal(fd, unix.SIGCONT, nil, 0)
	}
}

// holds reports whether /proc/<pid>/cgroup names this cgroup.
func (c *cgroupTree) holds(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("0::")); ok {
			return string(rest) == c.rel
		}
	}
	return false
}

// kill ends every member at once: cgroup.kill, or, on kernels before
// 5.14, freezing the cgroup and killing each member.
func (c *cgroupTree) kill() error {
	err := os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0)
	if err == nil {
		// cgroup.kill signals each process through its leader thread; a
		// process whose leader thread already exited (pthread_exit) while
		// others run is missed. A process-directed kill reaches it.
		for _, pid := range c.procs() {
			if state, _, ok := procStat(strconv.Itoa(pid)); ok && state == 'Z' {
				c.signalMember(pid, unix.SIGKILL)
			}
		}
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return xerrors.Errorf("kill cgroup: %w", err)
	}
	// Frozen members cannot fork; a fatal signal still ends them.
	freeze := filepath.Join(c.dir, "cgroup.freeze")
	_ = os.WriteFile(freeze, []byte("1"), 0)
	defer func() { _ = os.WriteFile(freeze, []byte("0"), 0) }()
	for _, pid := range c.procs() {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
	return nil
}

// procs lists cgroup.procs.
func (c *cgroupTree) procs() []int {
	data, err := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range bytes.Fields(data) {
		if pid, err := strconv.Atoi(string(f)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// populated reads "populated" from cgroup.events: whether any live process
// is in the cgroup. A cgroup that is gone is not populated.
func (c *cgroupTree) populated() bool {
	if c.rc == nil {
		data, err := os.ReadFile(filepath.Join(c.dir, "cgroup.events"))
		return err == nil && eventsPopulated(data)
	}
	var buf [128]byte
	n, err := c.rc.events.ReadAt(buf[:], 0)
	return (err == nil || errors.Is(err, io.EOF)) && eventsPopulated(buf[:n])
}

func eventsPopulated(data []byte) bool {
	for _, line := range bytes.Split(data, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("populated ")); ok {
			return string(bytes.TrimSpace(v)) != "0"
		}
	}
	return false
}

func (c *cgroupTree) alive() bool { return c.populated() }

// usage reads the tree's accounting: cpu.stat (always there), and
// memory.peak, pids.peak and memory.events where their controllers are
// enabled.
func (c *cgroupTree) usage() *TreeUsage {
	u := &TreeUsage{}
	stat := readKeyed(filepath.Join(c.dir, "cpu.stat"))
	u.User = time.Duration(stat["user_usec"]) * time.Microsecond
	u.System = time.Duration(stat["system_usec"]) * time.Microsecond
	u.MemoryPeak = readInt(filepath.Join(c.dir, "memory.peak"))
	u.PidsPeak = int(readInt(filepath.Join(c.dir, "pids.peak")))
	u.OOMKills = int(readKeyed(filepath.Join(c.dir, "memory.events"))["oom_kill"])
	return u
}

// readKeyed reads a cgroup file of "key value" lines; missing is empty.
func readKeyed(path string) map[string]int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	m := map[string]int64{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				m[k] = n
			}
		}
	}
	return m
}

// readInt reads a cgroup file holding one integer; missing is 0.
func readInt(path string) int64 {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n
}

// members lists cgroup.procs: every process in the cgroup, however it
// left its session or process group.
func (c *cgroupTree) members() ([]int, bool) { return c.procs(), true }

// rewatch: the watchdog kills the Manager's whole cgroup; nothing to
// register.
func (c *cgroupTree) rewatch(*watchdog) {}

// reaped: a cgroup names this tree for as long as we hold it.
func (c *cgroupTree) reaped() {}

// waitEmpty waits on cgroup.events, which the kernel marks changed when
// "populated" flips, through the runtime poller: no thread is parked and
// nothing spins.
func (c *cgroupTree) waitEmpty(ctx context.Context) {
	fd, err := unix.Open(filepath.Join(c.dir, "cgroup.events"), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return // the cgroup is gone
	}
	f := os.NewFile(uintptr(fd), "cgroup.events")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	c.mu.Lock()
	if c.released {
		c.mu.Unlock()
		return // it was empty, and is gone
	}
	if c.waiters == nil {
		c.waiters = map[*os.File]bool{}
	}
	c.waiters[f] = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiters, f)
		c.mu.Unlock()
	}()
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(pastDeadline) })
	defer stop()
	buf := make([]byte, 256)
	_ = rc.Read(func(fd uintptr) bool {
		n, err := unix.Pread(int(fd), buf, 0)
		return err != nil || !eventsPopulated(buf[:max(n, 0)])
	})
}

// release hands the cgroup to the worker for removal. The tree is empty:
// it leaves the registry only then, or after Close killed it.
func (c *cgroupTree) release() {
	c.mu.Lock()
	c.released = true
	for f := range c.waiters {
		_ = f.SetReadDeadline(pastDeadline)
	}
	c.mu.Unlock()
	c.host.done(c.rc)
}

// cgroup2Mount finds the cgroup v2 mount in /proc/self/mountinfo: its
// mount point and the cgroup path it shows as its root.
func cgroup2Mount() (mount, root string, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "id parent major:minor root mountpoint options ... - fstype source super"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, after := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(after) < 1 || after[0] != "cgroup2" {
			continue
		}
		return unescapeMount(fields[4]), unescapeMount(fields[3]), nil
	}
	if err := sc.Err(); err != nil {
		return "", "", err
	}
	return "", "", errors.New("no cgroup2 file system is mounted")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// selfCgroup is this process's cgroup v2 path (the "0::" line).
func selfCgroup() (string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return rest, nil
		}
	}
	return "", errors.New("this process is in no cgroup v2 (no 0:: line in /proc/self/cgroup)")
}

// isCgroup2Dir reports whether dir is a directory of a cgroup v2 file
// system.
func isCgroup2Dir(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		return false
	}
	_, err := os.Stat(filepath.Join(dir, "cgroup.procs"))
	return err == nil
}

// selfPIDNamespace is the inode number of this process's PID namespace:
// a PID names a host only within it.
var selfPIDNamespace = sync.OnceValue(func() string {
	link, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return "0"
	}
	// "pid:[4026531836]"
	return strings.TrimSuffix(strings.TrimPrefix(link, "pid:["), "]")
})

// selfStartTime is this process's start time in clock ticks after boot
// (field 22 of /proc/self/stat): with the PID, it names the host for good.
func selfStartTime() string {
	data, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return "0"
	}
	if i := bytes.LastIndexByte(data, ')'); i >= 0 {
		// Fields after comm start at field 3 (state).
		if fields := bytes.Fields(data[i+1:]); len(fields) > 19 {
			return string(fields[19])
		}
	}
	return "0"
}
