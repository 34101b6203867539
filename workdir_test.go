package proc_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/procvisor/proc"
)

// wd-nobase starts, in a Manager of its own, a request whose WorkDir is
// relative while neither Options.WorkingDir nor $HOME names a directory
// (its parent unset $HOME), and prints the error; it exits 0 when that is
// ErrInvalid and nothing was started.
var _ = helper("wd-nobase", func(args []string) int {
	m := proc.NewManager(proc.Options{WorkingDir: func() string { return "" }})
	defer m.Close()
	p, err := m.Start(proc.StartRequest{Args: []string{os.Args[0]}, WorkDir: args[0]})
	fmt.Print(err)
	if p != nil || !errors.Is(err, proc.ErrInvalid) || len(m.List()) != 0 {
		return 1
	}
	return 0
})

// TestStartWorkDirRelative: a relative WorkDir is resolved against the
// base an empty one would get, never against the host's current directory
// (the test's is this package, which has testdata; the base has none): a
// directory missing there is ErrInvalid naming the base, and so is any
// relative WorkDir when there is no base at all. Nothing process-wide is
// changed: the no-base case runs in a child whose $HOME is unset.
func TestStartWorkDirRelative(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	if fi, err := os.Stat("testdata"); err != nil || !fi.IsDir() {
		t.Fatalf("the test's current directory has no testdata: %v", err)
	}
	base := t.TempDir()
	m := newManager(t, proc.Options{WorkingDir: func() string { return base }})
	for _, rel := range []string{"testdata", filepath.Join("testdata", "..", "testdata")} {
		req := helperReq("mgr-pwd")
		req.WorkDir = rel
		p, err := m.Start(req)
		if !errors.Is(err, proc.ErrInvalid) || p != nil || !strings.Contains(err.Error(), base) || !strings.Contains(err.Error(), rel) {
			t.Errorf("Start(WorkDir %q) with base %s = %v, %v; want an ErrInvalid naming %q and the base", rel, base, p, err, rel)
		}
	}
	if n := len(m.List()); n != 0 {
		t.Errorf("refused starts left %d records", n)
	}

	// No base: Options.WorkingDir gives "" and $HOME is unset (in a child,
	// whose own current directory has testdata).
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	req := helperReq("wd-nobase", "testdata")
	req.WorkDir = wd
	req.UnsetEnv = []string{"HOME", "USERPROFILE", "home"}
	snap := waitFinal(ctx, t, mustStart(t, newManager(t, proc.Options{}), req))
	if code := exitCode(t, snap.Info); code != 0 || !strings.Contains(snap.Output.Text, "Options.WorkingDir") || !strings.Contains(snap.Output.Text, "$HOME") {
		t.Errorf("relative WorkDir with no base: exit %d, %q; want 0 and an ErrInvalid naming Options.WorkingDir and $HOME", code, snap.Output.Text)
	}
}

// TestStartOrGetWorkDirResolved: StartOrGet compares a relative WorkDir
// resolved: "sub" asks for what its absolute path does, and "sub" once
// the base moved asks for another directory.
func TestStartOrGetWorkDirResolved(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	var base atomic.Value
	one, two := t.TempDir(), t.TempDir()
	for _, dir := range []string{one, two} {
		if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	base.Store(one)
	m := newManager(t, proc.Options{WorkingDir: func() string { return base.Load().(string) }})
	orig := helperReq("mgr-exit", "0")
	orig.ID, orig.WorkDir = "rel", "sub"
	p, started, err := m.StartOrGet(orig)
	if err != nil || !started {
		t.Fatalf("first StartOrGet() = %v, %v; want true, nil", started, err)
	}
	waitFinal(ctx, t, p)
	if want := filepath.Join(one, "sub"); p.Info().WorkDir != want {
		t.Errorf("Info.WorkDir = %q; want %q", p.Info().WorkDir, want)
	}
	for _, tc := range []struct {
		name    string
		workDir string
		base    string
		same    bool
	}{
		{"same-relative", "sub", one, true},
		{"absolute", filepath.Join(one, "sub"), one, true},
		{"unclean", "./sub/", one, true},
		{"empty", "", one, false},
		{"other-base", "sub", two, false},
	} {
		base.Store(tc.base)
		req := orig
		req.WorkDir = tc.workDir
		got, started, err := m.StartOrGet(req)
		switch {
		case tc.same && (err != nil || started || got != p):
			t.Errorf("%s: StartOrGet(WorkDir %q) = %p, %v, %v; want %p, false, nil", tc.name, tc.workDir, got, started, err, p)
		case !tc.same && (!errors.Is(err, proc.ErrDuplicateID) || started || got != nil):
			t.Errorf("%s: StartOrGet(WorkDir %q) = %p, %v, %v; want nil, false, ErrDuplicateID", tc.name, tc.workDir, got, started, err)
		}
	}
}
