//go:build unix

package proc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStartWorkDirGoneFallsBack pins the default work dir found before
// (workBaseSeen): the next start takes it without a look, and when it is
// gone the start is not refused: it runs where a start that looked would
// have run (the next candidate, else the host's work dir), and the
// Manager forgets it.
func TestStartWorkDirGoneFallsBack(t *testing.T) {
	t.Parallel()
	base := filepath.Join(t.TempDir(), "base")
	if err := os.Mkdir(base, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, m := internalManager(t, time.Minute, Options{WorkingDir: func() string { return base }})
	p, err := m.Start(StartRequest{Args: []string{"pwd"}})
	if err != nil {
		t.Fatalf("Start(pwd) = %v", err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	if got := p.Info().WorkDir; got != base || strings.TrimSpace(p.Output().Text) != base {
		t.Fatalf("first start: work dir %q, pwd %q; want %q", got, p.Output().Text, base)
	}
	if got := m.workBases.lookup(base); got != base {
		t.Fatalf("after a start in %s: found %q; want it kept", base, got)
	}
	if err := os.Remove(base); err != nil {
		t.Fatal(err)
	}
	// Where a look finds it: $HOME if it is a directory, else the host's
	// work dir (asked of the OS, not of m, whose looks are under test).
	want, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if home, err := os.UserHomeDir(); err == nil && isDir(home) == nil {
		if want, err = filepath.Abs(home); err != nil {
			t.Fatal(err)
		}
	}
	p, err = m.Start(StartRequest{Args: []string{"pwd"}})
	if err != nil {
		t.Fatalf("Start(pwd) with the work dir gone = %v; want it started where a look finds", err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	if got := p.Info().WorkDir; got != want || strings.TrimSpace(p.Output().Text) != want {
		t.Errorf("with %s gone: work dir %q, pwd %q; want %q", base, got, p.Output().Text, want)
	}
	if code := p.Info().ExitCode; code == nil || *code != 0 {
		t.Errorf("with %s gone: exit %v; want 0", base, code)
	}
	if got := m.workBases.lookup(base); got != "" {
		t.Errorf("with %s gone: still found %q; want it forgotten", base, got)
	}
}

// TestStartWorkDirRelativeBaseLooked pins that a relative candidate
// (Options.WorkingDir() here) is looked at on every start, never kept: it
// resolves against the host's work dir, which may change.
func TestStartWorkDirRelativeBaseLooked(t *testing.T) {
	t.Parallel()
	ctx, m := internalManager(t, time.Minute, Options{WorkingDir: func() string { return "testdata" }})
	want, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Start(StartRequest{Args: []string{"true"}})
	if err != nil {
		t.Fatalf("Start(true) = %v", err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	if got := p.Info().WorkDir; got != want {
		t.Errorf("work dir %q; want %q", got, want)
	}
	if got := m.workBases.lookup("testdata"); got != "" {
		t.Errorf("relative candidate kept as %q; want it looked at every time", got)
	}
}
