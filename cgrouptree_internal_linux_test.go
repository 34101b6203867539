//go:build linux && !proc_otherunix

package proc

import (
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A record's cgroup tree (cgrouptree_linux.go).

// TestCgroupSignalWalks pins the two walks of signalEach over a cgroup
// tree: the first signals the child alone; the second the members it
// started, but never the child again (a second TERM means "now" to many
// programs). The child has handled its TERM before the second walk, so a
// second one would show: it would interrupt the child's second wait and
// print child-term again before child-done.
func TestCgroupSignalWalks(t *testing.T) {
	t.Parallel()
	ctx, m := internalManager(t, 30*time.Second, Options{Containment: ContainCgroup})
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
	ctx, m := internalManager(t, 60*time.Second, Options{Containment: ContainCgroup})
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
