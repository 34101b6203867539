//go:build linux

package proc

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"
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
	defer m.Close()
	run := func(args ...string) (*Process, string) {
		t.Helper()
		p, err := m.Start(StartRequest{Args: args})
		if errors.Is(err, ErrUnsupported) {
			t.Skipf("no cgroups here (%v): this test runs where cgroup v2 is writable", err)
		}
		if err != nil {
			t.Fatalf("Start(%q) = %v", args, err)
		}
		dir := p.tree.sys.(*cgroupTree).d.Path
		select {
		case <-p.Done():
		case <-ctx.Done():
			t.Fatalf("%q did not end: %v", args, ctx.Err())
		}
		return p, dir
	}
	host := func() *cgroupHost {
		m.trees.contain.mu.Lock()
		defer m.trees.contain.mu.Unlock()
		return m.trees.contain.host
	}
	spares := func() []string {
		h := host()
		// The worker recycles a done cgroup; done was called before Done
		// closed, so once the worker is idle the cgroup is a spare or gone.
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
	killedDir := p.tree.sys.(*cgroupTree).d.Path
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
