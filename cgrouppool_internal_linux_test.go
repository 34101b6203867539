//go:build linux && !proc_otherunix

package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/procvisor/proc/internal/testkit"
)

// The pool of ready record cgroups (cgrouppool_linux.go): reuse, spares,
// held descriptors, and the release when starts stop.

// TestCgroupReuse pins the reuse of record cgroups (issue 22): a cgroup
// whose tree ended with its child is handed to a later record, which does
// not see the earlier record's usage; a killed cgroup is never reused but
// removed.
func TestCgroupReuse(t *testing.T) {
	t.Parallel()
	ctx, m := internalManager(t, 60*time.Second, Options{Containment: ContainCgroup})
	poolOnMock(t, m) // the spares stay while the test looks
	run := func(args ...string) (*Process, string) {
		t.Helper()
		// The command waits for its stdin to close, so that its cgroup is
		// read while it runs: a final record forgets its tree.
		argv := append([]string{"sh", "-c", `read -r _; exec "$@"`, "sh"}, args...)
		p, err := m.Start(StartRequest{Args: argv, Stdin: true})
		if errors.Is(err, ErrUnsupported) {
			t.Skipf("no cgroups here (%v): this test runs where cgroup v2 is writable", err)
		}
		if err != nil {
			t.Fatalf("Start(%q) = %v", args, err)
		}
		dir := p.tree().sys.(*cgroupTree).d.Path
		if err := p.CloseStdin(); err != nil {
			t.Fatalf("CloseStdin() = %v", err)
		}
		select {
		case <-p.Done():
		case <-ctx.Done():
			t.Fatalf("%q did not end: %v", args, ctx.Err())
		}
		// Its exit goroutine readies the cgroup for reuse after Done.
		m.waitEnded([]*Process{p})
		return p, dir
	}
	host := func() *cgroupHost {
		m.trees.contain.mu.Lock()
		defer m.trees.contain.mu.Unlock()
		return m.trees.contain.host
	}
	spares := func() []string {
		h := host()
		// The record's exit goroutine recycles its done cgroup after Done
		// (run waited for it), or the worker does if it ran: once the
		// worker is idle too, the cgroup is a spare or gone.
		h.wg.Wait()
		h.mu.Lock()
		defer h.mu.Unlock()
		var dirs []string
		for _, rc := range h.spare {
			dirs = append(dirs, rc.dir)
		}
		return dirs
	}
	run("true")
	if !host().reuse {
		t.Skip("the memory or pids controller is enabled for the record cgroups here: they are never reused")
	}

	burner, burnDir := run("sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done")
	burnt := burner.Snapshot().Info.Usage.Tree
	if burnt == nil || burnt.User+burnt.System <= 0 {
		t.Fatalf("the burner's tree usage = %+v; want CPU time", burnt)
	}
	if !slices.Contains(spares(), burnDir) {
		t.Fatalf("the burner's cgroup %s, empty with its child, is not a spare (%q)", burnDir, spares())
	}
	// Its cpu.stat and cgroup.events stay open for the next record in it
	// (recordCgroup): the burner's tree held its directory, being alone.
	func() {
		h := host()
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, rc := range h.spare {
			if rc.dir == burnDir && (rc.stat == nil || rc.events == nil) {
				t.Errorf("the burner's spare cgroup holds cpu.stat %v, cgroup.events %v; want both held open", rc.stat, rc.events)
			}
		}
	}()
	// The next starts take spares newest first: the worker may have made
	// new ones after the burner's came back.
	reused := false
	for range 2*spareBurst + 2 {
		p, dir := run("true")
		if dir != burnDir {
			continue
		}
		reused = true
		u := p.Snapshot().Info.Usage.Tree
		if u == nil || u.User+u.System >= burnt.User+burnt.System {
			t.Errorf("a record in the burner's reused cgroup reports %+v; want its own usage, below the burner's %v", u, burnt.User+burnt.System)
		}
		break
	}
	if !reused {
		t.Errorf("the burner's cgroup %s was never reused", burnDir)
	}

	// A killed cgroup is removed, never reused.
	p, err := m.Start(StartRequest{Args: []string{"sleep", "60"}})
	if err != nil {
		t.Fatalf("Start(sleep) = %v", err)
	}
	killedDir := p.tree().sys.(*cgroupTree).d.Path
	if err := p.Signal(Kill); err != nil {
		t.Fatalf("Signal(Kill) = %v", err)
	}
	<-p.Done()
	if slices.Contains(spares(), killedDir) {
		t.Errorf("the killed cgroup %s is a spare; want it never reused", killedDir)
	}
	if _, err := os.Stat(killedDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the killed cgroup %s: %v; want it removed", killedDir, err)
	}
}

// TestCgroupRefusedStartLeavesNothing pins design section 8 for the
// cgroup a refused start took: once Start returned the OS's refusal (the
// work dir went after validation, so the child failed before its exec),
// the cgroup is back among the spares, rebaselined, and the worker is not
// running for it: nothing of the start reads a file after Start returned.
// It failed when the refusal queued the cgroup for the worker:
// TestFaultWorkDirRemoved then counted the worker's read of cgroup.stat or
// cpu.stat as a descriptor the start left (2 runs of 40 under load).
func TestCgroupRefusedStartLeavesNothing(t *testing.T) {
	t.Parallel()
	ctx := testkit.Ctx(t, 30*time.Second)
	var remove atomic.Pointer[string]
	m := NewManager(Options{Containment: ContainCgroup, CommandContext: func(ctx context.Context, name string, args ...string) *exec.Cmd {
		if dir := remove.Load(); dir != nil {
			_ = os.Remove(*dir)
		}
		return exec.CommandContext(ctx, name, args...)
	}})
	defer m.Close()
	p, err := m.Start(StartRequest{Args: []string{"true"}})
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("no cgroups here (%v): this test runs where cgroup v2 is writable", err)
	}
	if err != nil {
		t.Fatalf("Start(true) = %v", err)
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		t.Fatalf("true did not end: %v", ctx.Err())
	}
	CgroupWorkerIdle(m)
	m.trees.contain.mu.Lock()
	h := m.trees.contain.host
	m.trees.contain.mu.Unlock()
	spares := func() []string {
		h.mu.Lock()
		defer h.mu.Unlock()
		var dirs []string
		for _, rc := range h.spare {
			dirs = append(dirs, rc.dir)
		}
		slices.Sort(dirs)
		return dirs
	}
	before := spares()
	if len(before) < 2 {
		t.Fatalf("spares %q once the worker is idle; want at least %d (a start that takes one does not wake the worker then)", before, 2)
	}

	dir := filepath.Join(t.TempDir(), "wd")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	remove.Store(&dir)
	p, err = m.Start(StartRequest{Args: []string{"true"}, WorkDir: dir})
	if p != nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Start with its work dir removed = %v, %v; want nil, the OS's refusal", p, err)
	}
	h.mu.Lock()
	working, recycle := h.working, len(h.recycle)
	h.mu.Unlock()
	if after := spares(); working || recycle != 0 || !slices.Equal(after, before) {
		t.Errorf("once the refused Start returned: worker running %v, %d cgroups queued for it, spares %q; want no worker, none queued, the spares as before %q",
			working, recycle, after, before)
	}
}

// TestCgroupRunningRecordsHoldFewDescriptors pins that records whose
// child runs hold no cgroup.events, and at most heldMax of them their
// cgroup's directory: every descriptor the host holds is copied into
// each child it forks and closed at that child's exec, so descriptors
// held per running record made each start slower the more records ran
// (issue 22: 1,000 concurrent starts). The trees still read and signal
// their cgroups, relative to the Manager's. It failed before the start
// closed the directory and cgroup.events was opened at the first look:
// each running record held two.
func TestCgroupRunningRecordsHoldFewDescriptors(t *testing.T) {
	t.Parallel()
	ctx, m := internalManager(t, 30*time.Second, Options{Containment: ContainCgroup})
	const n = heldMax + 8
	var procs []*Process
	dirs := map[string]bool{}
	for range n {
		p, err := m.Start(StartRequest{Args: []string{"sleep", "60"}})
		if errors.Is(err, ErrUnsupported) {
			t.Skipf("no cgroups here (%v): this test runs where cgroup v2 is writable", err)
		}
		if err != nil {
			t.Fatalf("Start(sleep) = %v", err)
		}
		procs = append(procs, p)
		dirs[p.tree().sys.(*cgroupTree).d.Path] = true
	}
	if len(dirs) != n {
		t.Fatalf("%d running records have %d cgroups; want one each", n, len(dirs))
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	heldDirs := 0
	for _, fd := range fds {
		target, err := os.Readlink("/proc/self/fd/" + fd.Name())
		if err != nil {
			continue // closed since the listing
		}
		for dir := range dirs {
			switch {
			case target == dir:
				heldDirs++
			case strings.HasPrefix(target, dir+"/"):
				t.Errorf("descriptor %s names %s, of a running record's cgroup; want no file of it held while the child runs", fd.Name(), target)
			}
		}
	}
	if heldDirs > heldMax {
		t.Errorf("%d running records hold %d cgroup directories open; want at most %d", n, heldDirs, heldMax)
	}
	// The trees still see and stop their cgroups.
	for _, p := range procs {
		if !p.tree().alive() {
			t.Errorf("record %s: tree not alive while its sleep runs", p.ID())
		}
		if err := p.Signal(Kill); err != nil {
			t.Errorf("Signal(Kill) of %s = %v", p.ID(), err)
		}
	}
	for _, p := range procs {
		select {
		case <-p.Done():
		case <-ctx.Done():
			t.Fatalf("record %s did not end after its kill: %v", p.ID(), ctx.Err())
		}
		if u := p.Snapshot().Info.Usage; u == nil || u.Tree == nil {
			t.Errorf("record %s: no tree usage after its end", p.ID())
		}
	}
}

// removeNextSpares removes the spare cgroups the next n starts on h take
// (newest first) from outside, as another program could, having the
// worker make them first if there are fewer, and returns their paths.
func removeNextSpares(t *testing.T, h *cgroupHost, n int) []string {
	t.Helper()
	h.mu.Lock()
	short := len(h.spare) < n
	if short {
		h.want = n
	}
	h.mu.Unlock()
	if short {
		h.runQueue() // starts the worker, which makes the spares wanted
		h.wg.Wait()
	}
	h.mu.Lock()
	var dirs []string
	for i := len(h.spare) - 1; i >= 0 && len(dirs) < n; i-- {
		dirs = append(dirs, h.spare[i].dir)
	}
	h.mu.Unlock()
	if len(dirs) < n {
		t.Fatalf("%d spare cgroups; want %d to remove", len(dirs), n)
	}
	for _, dir := range dirs {
		if err := os.Remove(dir); err != nil {
			t.Fatalf("remove a spare cgroup from outside: %v", err)
		}
	}
	return dirs
}

// TestRunQueueKicksWorker pins that a record's exit goroutine, which
// readies queued cgroups but makes no spares (runQueue, work(false)),
// starts the worker when spares are missing, so that they are made.
func TestRunQueueKicksWorker(t *testing.T) {
	t.Parallel()
	ctx, m := internalManager(t, 30*time.Second, Options{Containment: ContainCgroup})
	poolOnMock(t, m) // the spares stay while the test looks
	h := ranCgroupHost(ctx, t, m, "true")
	h.mu.Lock()
	want := len(h.spare) + 4
	h.want = want
	h.mu.Unlock()
	h.runQueue()
	h.wg.Wait()
	h.mu.Lock()
	got := len(h.spare)
	h.mu.Unlock()
	if got < want {
		t.Errorf("%d spare cgroups once the queue ran and the worker is idle; want %d: the worker was not started", got, want)
	}
}

// TestCgroupRemovedSpareNotReused pins that record cgroups removed from
// outside cost no start: the start that takes one fails to clone into it,
// finds it gone (treeSetup.cgroupGone) and is made again into another
// (launch, up to cgroupTries cgroups), and a removed cgroup is never
// handed to a start again: its held directory still stats as a cgroup
// without children, but its cpu.stat cannot be read, so readying it for
// reuse discards it (recycled) instead of giving it back.
func TestCgroupRemovedSpareNotReused(t *testing.T) {
	t.Parallel()
	ctx, m := internalManager(t, 60*time.Second, Options{Containment: ContainCgroup})
	poolOnMock(t, m) // the spares stay while the test looks
	h := ranCgroupHost(ctx, t, m, "true")
	victims := removeNextSpares(t, h, cgroupTries-1)
	for i := range 20 {
		snap, err := m.Run(ctx, StartRequest{Args: []string{"sh", "-c", "sed -n 's/^0:://p' /proc/self/cgroup"}})
		if err != nil {
			t.Fatalf("start %d after %d spare cgroups were removed from outside: %v; want it made into another", i, len(victims), err)
		}
		for _, dir := range victims {
			if rel := strings.TrimSpace(snap.Output.Text); strings.HasSuffix(dir, rel) {
				t.Errorf("start %d ran in %s, removed from outside", i, rel)
			}
		}
		CgroupWorkerIdle(m)
	}
}

// poolOnMock puts the idle timer of m's spare cgroup pool on a mock clock
// of its own, which only the test advances, and returns it: the pool then
// keeps its spares while the test looks at them. m has not started yet.
func poolOnMock(t testing.TB, m *Manager) *quartz.Mock {
	mClock := quartz.NewMock(t)
	m.trees.contain.mu.Lock()
	m.trees.contain.poolClock = mClock
	m.trees.contain.mu.Unlock()
	return mClock
}

// TestCgroupPoolReleasedWhenIdle pins that the spare cgroup pool gives its
// cgroups and their descriptors back when starts stop: after bursts of
// starts it keeps spares through a spareIdle period in which a start
// came, and holds none, no descriptor of one and no directory, after a
// period without; each new burst makes them again, and Close removes the
// Manager's cgroup.
func TestCgroupPoolReleasedWhenIdle(t *testing.T) {
	t.Parallel()
	ctx, m := internalManager(t, 60*time.Second, Options{Containment: ContainCgroup})
	mClock := poolOnMock(t, m)
	h := ranCgroupHost(ctx, t, m, "true")
	burst := func() {
		t.Helper()
		errs := make(chan error, 8)
		inParallel(8, func() {
			if _, err := m.Run(ctx, StartRequest{Args: []string{"true"}}); err != nil {
				errs <- err
			}
		})
		close(errs)
		for err := range errs {
			t.Fatalf("Run(true) in a burst = %v", err)
		}
		CgroupWorkerIdle(m)
	}
	// held counts the spares, the descriptors of record cgroups (below the
	// Manager's cgroup) this process holds, and the record cgroups.
	held := func() (spares, fds, dirs int) {
		t.Helper()
		h.mu.Lock()
		spares = len(h.spare)
		h.mu.Unlock()
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(target, h.dir+"/") {
				fds++
			}
		}
		below, err := os.ReadDir(h.dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range below {
			if e.IsDir() {
				dirs++
			}
		}
		return spares, fds, dirs
	}
	for round := range 3 {
		burst()
		burst()
		spares, fds, dirs := held()
		if spares == 0 || fds == 0 || dirs == 0 {
			t.Fatalf("round %d: after two bursts the pool keeps %d spares, %d descriptors, %d cgroups; want some while starts go on", round, spares, fds, dirs)
		}
		t.Logf("round %d: after two bursts: %d spares, %d descriptors, %d cgroups", round, spares, fds, dirs)
		mClock.Advance(spareIdle).MustWait(ctx)
		CgroupWorkerIdle(m)
		if spares, _, _ := held(); spares == 0 {
			t.Errorf("round %d: the pool was emptied after a period in which starts came", round)
		}
		mClock.Advance(spareIdle).MustWait(ctx)
		CgroupWorkerIdle(m)
		if spares, fds, dirs := held(); spares != 0 || fds != 0 || dirs != 0 {
			t.Errorf("round %d: after a period without a start the pool keeps %d spares, %d descriptors, %d cgroups; want none", round, spares, fds, dirs)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if _, err := os.Stat(h.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the Manager's cgroup %s after Close: %v; want it removed", h.dir, err)
	}
}
