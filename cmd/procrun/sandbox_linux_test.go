//go:build linux

package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/procvisor/proc/internal/sandbox"
)

// TestProcrunSandbox: -sandbox with -write roots (relative to where
// procrun runs) lets the command change only those, and -net only
// decides the network.
func TestProcrunSandbox(t *testing.T) {
	t.Parallel()
	if _, err := sandbox.Probe(sandbox.Steps{}); err != nil {
		t.Skipf("the sandbox cannot run here (CI runs it): %v", err)
	}
	ctx, bin := prBuild(t)
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "work"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := `echo a >work/a && echo in-ok; echo b 2>/dev/null >"$1/b" || echo out-refused`
	r := prRun(ctx, t, bin, dir, "-sandbox", "-write", "work", "--", "sh", "-c", script, "sh", outside)
	snap := prSnapshot(t, r)
	if r.code != 0 || snap.Output.Text != "in-ok\nout-refused\n" || !strings.HasPrefix(snap.Info.Sandbox, "landlock abi ") {
		t.Errorf("procrun -sandbox -write work: exit %d, output %q, sandbox %q; want 0, in-ok and out-refused, landlock", r.code, snap.Output.Text, snap.Info.Sandbox)
	}
	r = prRun(ctx, t, bin, dir, "-write", "work", "-net", "--", "true")
	if snap := prSnapshot(t, r); !strings.Contains(snap.Info.Sandbox, "network") {
		t.Errorf("procrun -write work -net: sandbox %q; want it sandboxed with the network", snap.Info.Sandbox)
	}
	r = prRun(ctx, t, bin, dir, "-sandbox", "-write", "missing", "--", "true")
	if r.code != 125 || !strings.Contains(r.stderr, "missing") {
		t.Errorf("procrun -write missing: exit %d, stderr %q; want 125 naming the root", r.code, r.stderr)
	}
}
