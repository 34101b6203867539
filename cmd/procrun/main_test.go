//go:build unix

package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/procvisor/proc"
)

// Tests of procrun as the scripts that call it see it (DESIGN.md section
// 16): a binary built from this package, run as a child, judged by its exit
// code, its directory and its output. Unix only: the commands it runs are
// sh, pwd, sleep and echo.

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// prResult is what one run of procrun did.
type prResult struct {
	code           int
	stdout, stderr string
}

// prRun runs the procrun binary bin with args in dir and returns its exit
// code and output.
func prRun(ctx context.Context, t *testing.T, bin, dir string, args ...string) prResult {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("run procrun %q: %v", args, err)
	}
	return prResult{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// prSnapshot decodes the snapshot procrun printed.
func prSnapshot(t *testing.T, r prResult) proc.Snapshot {
	t.Helper()
	var snap proc.Snapshot
	if err := json.Unmarshal([]byte(r.stdout), &snap); err != nil {
		t.Fatalf("procrun printed no snapshot (%v): stdout %q, stderr %q", err, r.stdout, r.stderr)
	}
	return snap
}

// prBuild builds procrun into a temporary directory and returns the path,
// with a context that ends with the test (Cleanup, not defer: parallel
// subtests run after the test function returns), within two minutes.
func prBuild(t *testing.T) (context.Context, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	bin := filepath.Join(t.TempDir(), "procrun")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return ctx, bin
}

// prRealDir resolves symbolic links in dir (a temporary directory may sit
// behind one, as on macOS).
func prRealDir(t *testing.T, dir string) string {
	t.Helper()
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

func TestProcrun(t *testing.T) {
	t.Parallel()
	ctx, bin := prBuild(t)

	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"exit-0", []string{"--", "true"}, 0},
		{"exit-code", []string{"--", "sh", "-c", "exit 3"}, 3},
		{"shell", []string{"-shell", "--", "exit", "42"}, 42},
		{"timeout", []string{"-timeout", "100ms", "--", "sleep", "30"}, proc.ExitTimedOut},
		{"killed", []string{"--", "sh", "-c", "kill -KILL $$"}, 128 + 9},
		{"terminated", []string{"--", "sh", "-c", "kill -TERM $$"}, 128 + 15},
		{"help", []string{"-h"}, 0},
		{"unknown-flag", []string{"-no-such-flag", "--", "true"}, 2},
		{"not-found", []string{"--", "procrun-test-no-such-program"}, 127},
		{"not-found-by-path", []string{"--", "./procrun-test-no-such-program"}, 127},
		{"bad-dir", []string{"-dir", "/procrun-test-no-such-dir", "--", "true"}, 125},
		{"wait-for-never-matched", []string{"-wait-for", "ready", "--", "echo", "nope"}, 125},
		{"wait-for-failed-command", []string{"-wait-for", "ready", "--", "sh", "-c", "exit 5"}, 5},
		{"watch-no-name", []string{"-watch", "=x", "--", "true"}, 2},
		{"watch-bad-pattern", []string{"-watch", "a=(", "--", "true"}, 2},
		{"watch-twice", []string{"-watch", "a=x", "-watch", "a=y", "--", "true"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := prRun(ctx, t, bin, t.TempDir(), tc.args...)
			if r.code != tc.code {
				t.Errorf("procrun %q exited %d; want %d\nstdout %q\nstderr %q", tc.args, r.code, tc.code, r.stdout, r.stderr)
			}
		})
	}

	t.Run("help-prints-usage", func(t *testing.T) {
		t.Parallel()
		r := prRun(ctx, t, bin, t.TempDir(), "-h")
		if !strings.Contains(r.stderr, "usage: procrun") || !strings.Contains(r.stderr, "-dir") {
			t.Errorf("procrun -h printed %q; want the usage with its flags", r.stderr)
		}
	})

	t.Run("timeout-snapshot", func(t *testing.T) {
		t.Parallel()
		snap := prSnapshot(t, prRun(ctx, t, bin, t.TempDir(), "-timeout", "100ms", "--", "sleep", "30"))
		if !snap.Info.TimedOut || snap.Info.ExitCode == nil || *snap.Info.ExitCode != proc.ExitTimedOut {
			t.Errorf("snapshot of a timed-out command: timed out %v, exit %v; want true, 124", snap.Info.TimedOut, snap.Info.ExitCode)
		}
	})

	// The command runs where procrun is called, not in $HOME.
	t.Run("current-dir", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "server"), []byte("#!/bin/sh\necho ready\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		r := prRun(ctx, t, bin, dir, "-wait-for", "ready", "--", "./server")
		snap := prSnapshot(t, r)
		if r.code != 0 || snap.Output.Text != "ready\n" || prRealDir(t, snap.Info.WorkDir) != prRealDir(t, dir) {
			t.Errorf("procrun -- ./server in %s = exit %d, output %q, work dir %q; want 0, %q, the current dir\nstderr %q",
				dir, r.code, snap.Output.Text, snap.Info.WorkDir, "ready\n", r.stderr)
		}
		r = prRun(ctx, t, bin, dir, "--", "pwd")
		if got := strings.TrimSpace(prSnapshot(t, r).Output.Text); prRealDir(t, got) != prRealDir(t, dir) {
			t.Errorf("pwd under procrun in %s printed %q", dir, got)
		}
	})

	t.Run("dir-flag", func(t *testing.T) {
		t.Parallel()
		here, there := t.TempDir(), t.TempDir()
		r := prRun(ctx, t, bin, here, "-dir", there, "--", "pwd")
		if got := strings.TrimSpace(prSnapshot(t, r).Output.Text); prRealDir(t, got) != prRealDir(t, there) {
			t.Errorf("pwd under procrun -dir %s printed %q", there, got)
		}
		// A relative -dir is resolved against procrun's current directory
		// (the library would resolve it against $HOME).
		if err := os.Mkdir(filepath.Join(here, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		r = prRun(ctx, t, bin, here, "-dir", "sub", "--", "pwd")
		snap := prSnapshot(t, r)
		want := filepath.Join(here, "sub")
		if got := strings.TrimSpace(snap.Output.Text); prRealDir(t, got) != prRealDir(t, want) || snap.Info.WorkDir != want {
			t.Errorf("pwd under procrun -dir sub in %s printed %q, Info.WorkDir %q; want %s", here, got, snap.Info.WorkDir, want)
		}
	})

	// The snapshot is for people and scripts: <, > and & stay as they are.
	t.Run("json-not-html-escaped", func(t *testing.T) {
		t.Parallel()
		r := prRun(ctx, t, bin, t.TempDir(), "--", "echo", "<a & b>")
		if !strings.Contains(r.stdout, `"text": "<a & b>\n"`) {
			t.Errorf("procrun printed %q; want the output unescaped", r.stdout)
		}
		if snap := prSnapshot(t, r); snap.Output.Text != "<a & b>\n" {
			t.Errorf("decoded output = %q; want %q", snap.Output.Text, "<a & b>\n")
		}
	})
}

// TestProcrunWatch: -watch NAME=REGEXP with -follow prints each match on
// stderr as it happens, and the snapshot lists the record's events:
// started, the matches in order, final.
func TestProcrunWatch(t *testing.T) {
	t.Parallel()
	ctx, bin := prBuild(t)
	r := prRun(ctx, t, bin, t.TempDir(), "-follow", "-watch", "ready=^ready$", "-watch", "num=[0-9]+",
		"--", "sh", "-c", `echo hi; echo ready; echo 42; printf "last 7"`)
	if r.code != 0 {
		t.Fatalf("procrun exited %d; stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{"procrun: matched ready: ready\n", "procrun: matched num: 42\n", "procrun: matched num: last 7\n"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q; want it to hold %q", r.stderr, want)
		}
	}
	// The streamed output comes before the snapshot on stdout: decode
	// from where the JSON begins.
	var out struct {
		proc.Snapshot
		Events []proc.Event `json:"events"`
	}
	if err := json.Unmarshal([]byte(r.stdout[strings.Index(r.stdout, "{"):]), &out); err != nil {
		t.Fatalf("procrun printed no snapshot (%v): stdout %q", err, r.stdout)
	}
	var got []string
	for _, ev := range out.Events {
		got = append(got, strings.TrimSpace(string(ev.Kind)+" "+ev.Watch+" "+ev.Line))
	}
	want := []string{"started", "matched ready ready", "matched num 42", "matched num last 7", "final"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("snapshot events %q; want %q", got, want)
	}
}
