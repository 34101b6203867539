//go:build linux && !proc_otherunix

package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/quartz"
)

// TestCgroupReuse pins the reuse of record cgroups (issue 22): a cgroup
// whose tree ended with its child is handed to a later record, which does
// not see the earlier record's usage; a killed cgroup is never reused but
// removed.
func TestCgroupReuse(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := NewManager(Options{Containment: ContainCgroup})
	poolOnMock(t, m) // the spares stay while the test looks
	defer m.Close()
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := NewManager(Options{Containment: ContainCgroup})
	defer m.Close()
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

// CgroupWorkerIdle waits until the exit goroutines of m's final records
// have returned and m's cgroup worker, if m has cgroups, is idle. Both
// ready a done record's cgroup for reuse off the record's path, reading
// its files after Done closed (the exit goroutine after publishing the
// end, settleOwn; the worker otherwise): a test that counts the process's
// descriptors waits for them first, so that those reads are not counted
// as its own. Nothing may start meanwhile, and no final record may have
// been dropped from m's list (by retention or Remove) just before: its
// exit goroutine, which this does not find, may still be readying its
// cgroup.
func CgroupWorkerIdle(m *Manager) {
	var final []*Process
	m.mu.Lock()
	for _, p := range m.order {
		select {
		case <-p.Done():
			final = append(final, p)
		default:
		}
	}
	m.mu.Unlock()
	m.waitEnded(final)
	m.trees.contain.mu.Lock()
	h := m.trees.contain.host
	m.trees.contain.mu.Unlock()
	if h != nil {
		h.wg.Wait()
	}
}

// ranCgroupHost runs args on m, a cgroup-mode Manager, waits until its
// cgroup worker is idle (CgroupWorkerIdle) and returns its cgroup host;
// the test skips where cgroups cannot be used.
func ranCgroupHost(ctx context.Context, t *testing.T, m *Manager, args ...string) *cgroupHost {
	t.Helper()
	if _, err := m.Run(ctx, StartRequest{Args: args}); errors.Is(err, ErrUnsupported) {
		t.Skipf("no cgroups here (%v): this test runs where cgroup v2 is writable", err)
	} else if err != nil {
		t.Fatalf("Run(%q) = %v", args, err)
	}
	CgroupWorkerIdle(m)
	m.trees.contain.mu.Lock()
	defer m.trees.contain.mu.Unlock()
	return m.trees.contain.host
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := NewManager(Options{Containment: ContainCgroup})
	poolOnMock(t, m) // the spares stay while the test looks
	defer m.Close()
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

// TestCgroupTriesRunOut: a start whose every try took a spare removed
// from outside fails after cgroupTries, saying so, and its error does not
// read as a missing program (the clone's ENOENT is not unwrapped).
func TestCgroupTriesRunOut(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := NewManager(Options{Containment: ContainCgroup})
	poolOnMock(t, m) // the spares stay while the test looks
	defer m.Close()
	h := ranCgroupHost(ctx, t, m, "true")
	removeNextSpares(t, h, cgroupTries)
	_, err := m.Start(StartRequest{Args: []string{"true"}})
	if err == nil || !strings.Contains(err.Error(), "removed from outside") || errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Start after its %d cgroups were removed from outside = %v; want an error saying so, not os.ErrNotExist", cgroupTries, err)
	}
	if _, err := m.Run(ctx, StartRequest{Args: []string{"true"}}); err != nil {
		t.Errorf("Run(true) after the removed cgroups were discarded = %v; want nil", err)
	}
}

// TestRetryHookPanicDiscardsLog: a start made again because its spare
// cgroup was removed from outside calls Options.CommandContext again; a
// hook that panics then leaves no log file the start created, as a hook
// that panics at the first call does (the log is opened after it).
func TestRetryHookPanicDiscardsLog(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var calls atomic.Int32
	m := NewManager(Options{Containment: ContainCgroup, CommandContext: func(ctx context.Context, name string, args ...string) *exec.Cmd {
		if calls.Add(1) == 3 {
			panic("hook panics at the retry")
		}
		return exec.CommandContext(ctx, name, args...)
	}})
	defer m.Close()
	h := ranCgroupHost(ctx, t, m, "true") // call 1
	removeNextSpares(t, h, 1)
	log := filepath.Join(t.TempDir(), "out.log")
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Errorf("Start with a hook that panics at its retry returned; want the panic")
			}
		}()
		_, _ = m.Start(StartRequest{Args: []string{"true"}, LogPath: log}) // calls 2 and 3
	}()
	if _, err := os.Stat(log); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("log file after the hook panicked at the retry: stat = %v; want it removed", err)
	}
	if got := calls.Load(); got != 3 {
		t.Errorf("CommandContext called %d times; want 3 (the first Run, the start and its retry)", got)
	}
}

// TestCgroupSignalWalks pins the two walks of signalEach over a cgroup
// tree: the first signals the child alone; the second the members it
// started, but never the child again (a second TERM means "now" to many
// programs). The child has handled its TERM before the second walk, so a
// second one would show: it would interrupt the child's second wait and
// print child-term again before child-done.
func TestCgroupSignalWalks(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := NewManager(Options{Containment: ContainCgroup})
	defer m.Close()
	const script = `trap 'echo child-term' TERM
sh -c 'trap "echo grandchild-term; exit 0" TERM; echo ready; while :; do sleep 1; done' &
wait; wait; echo child-done`
	p, err := m.Start(StartRequest{Command: script})
	if errors.Is(err, ErrUnsupported) {
		t.Skipf("no cgroups here (%v): this test runs where cgroup v2 is writable", err)
	}
	if err != nil {
		t.Fatalf("Start = %v", err)
	}
	waitLine := func(line string) {
		t.Helper()
		if _, err := p.WaitFor(ctx, regexp.MustCompile("^"+line+"$"), true); err != nil {
			t.Fatalf("waiting for %q: %v; output %q", line, err, p.Output().Text)
		}
	}
	waitLine("ready")
	if !p.tree().signalChild(Terminate) {
		t.Fatal("signalChild(Terminate) = false for a running child; want true")
	}
	waitLine("child-term")
	if err := p.tree().signalOthers(Terminate, true); err != nil {
		t.Errorf("signalOthers(Terminate) = %v; want nil", err)
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		t.Fatalf("the tree did not end after both walks: %v; output %q", ctx.Err(), p.Output().Text)
	}
	s := p.Snapshot()
	lines := map[string]int{} // sh may add "Terminated" for its sleep
	for _, line := range strings.Split(s.Output.Text, "\n") {
		lines[line]++
	}
	if lines["child-term"] != 1 || lines["grandchild-term"] != 1 || lines["child-done"] != 1 || *s.Info.ExitCode != 0 {
		t.Errorf("output %q, exit %d; want child-term, grandchild-term and child-done once each, exit 0: the child terminated once, then its child",
			s.Output.Text, *s.Info.ExitCode)
	}
	if p.tree().signalChild(Terminate) || !errors.Is(p.tree().signalOthers(Terminate, false), ErrNotRunning) {
		t.Error("after the tree ended, the walks still reach it; want false and ErrNotRunning")
	}
}

// TestTreeUsageOfRemovedCgroup: a record whose reused cgroup was removed
// from outside before its end (its child moved itself out and removed
// it) reports no tree usage, nil as where the OS cannot tell, and never
// zero minus the cgroup's baseline, which was negative times.
func TestTreeUsageOfRemovedCgroup(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := NewManager(Options{Containment: ContainCgroup})
	defer m.Close()
	h := ranCgroupHost(ctx, t, m, "sh", "-c", "i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done")
	// The loop's cgroup, readied for reuse, becomes the next start's. The
	// worker made new spares while the loop ran and may have given the
	// last back after it (found in a -race run): put it last.
	h.mu.Lock()
	var next *recordCgroup
	for i, rc := range h.spare {
		if rc.base.User+rc.base.System > 0 {
			next = rc
			h.spare = append(append(h.spare[:i:i], h.spare[i+1:]...), rc)
			break
		}
	}
	h.mu.Unlock()
	if !h.reuse {
		// The memory or pids controller is enabled for the record
		// cgroups (a delegated systemd cgroup): none is reused, and the
		// child could not move into the Manager's cgroup either (no
		// internal processes). It runs on these CI machines.
		t.Skip("record cgroups are not reused here (memory or pids controller enabled): this test runs where they are, as on the CI machines")
	}
	if next == nil {
		t.Fatalf("no spare cgroup has a baseline of CPU time; want the loop's cgroup readied for reuse, its CPU time its baseline")
	}
	// The shell moves itself into the Manager's cgroup, leaving its own
	// empty, and removes it.
	script := `cg=$(sed -n 's/^0:://p' /proc/self/cgroup) && echo "$cg" && echo $$ > "$1/cgroup.procs" && rmdir "$2"`
	snap, err := m.Run(ctx, StartRequest{Args: []string{"sh", "-c", script, "sh", filepath.Dir(next.dir), next.dir}})
	if err != nil {
		t.Fatalf("Run(move out and remove the cgroup) = %v", err)
	}
	if got := strings.TrimSpace(snap.Output.Text); snap.Info.ExitCode == nil || *snap.Info.ExitCode != 0 || got != next.rel {
		t.Fatalf("the script exited %v in cgroup %q, output %q; want 0 in the reused %q", snap.Info.ExitCode, got, snap.Output.Text, next.rel)
	}
	if snap.Info.Usage == nil {
		t.Fatalf("final record's Usage = nil; want the child's usage")
	}
	if tree := snap.Info.Usage.Tree; tree != nil {
		t.Errorf("Usage.Tree of a record whose cgroup was removed from outside = %+v; want nil: its cpu.stat could not be read", *tree)
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
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := NewManager(Options{Containment: ContainCgroup})
	poolOnMock(t, m) // the spares stay while the test looks
	defer m.Close()
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
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := NewManager(Options{Containment: ContainCgroup})
	defer m.Close()
	mClock := poolOnMock(t, m)
	h := ranCgroupHost(ctx, t, m, "true")
	burst := func() {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := m.Run(ctx, StartRequest{Args: []string{"true"}}); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
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
		if spares, fds, dirs := held(); spares == 0 || fds == 0 || dirs == 0 {
			t.Fatalf("round %d: after two bursts the pool keeps %d spares, %d descriptors, %d cgroups; want some while starts go on", round, spares, fds, dirs)
		}
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
