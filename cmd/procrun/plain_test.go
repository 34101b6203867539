//go:build unix

package main_test

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestProcrunPlainAndEnv: -plain prints the output as plain text, and
// -quiet-env and -drop-env shape the command's real environment.
func TestProcrunPlainAndEnv(t *testing.T) {
	t.Parallel()
	ctx, bin := prBuild(t)

	t.Run("plain", func(t *testing.T) {
		t.Parallel()
		r := prRun(ctx, t, bin, t.TempDir(), "-plain", "--", "printf", `\033[1;32mok\033[0m 10%%\r\033[Kok 100%%\n\033]0;title\007done\n`)
		if r.code != 0 || r.stdout != "ok 100%\ndone\n" {
			t.Errorf("procrun -plain = exit %d, stdout %q; want 0, %q\nstderr %q", r.code, r.stdout, "ok 100%\ndone\n", r.stderr)
		}
	})
	t.Run("plain-exit-code", func(t *testing.T) {
		t.Parallel()
		r := prRun(ctx, t, bin, t.TempDir(), "-plain", "--", "sh", "-c", "echo failing; exit 3")
		if r.code != 3 || r.stdout != "failing\n" {
			t.Errorf("procrun -plain of a failing command = exit %d, stdout %q; want 3, %q", r.code, r.stdout, "failing\n")
		}
	})

	// env runs procrun with extra variables in its own environment and
	// returns the command's environment, one NAME=value a line.
	env := func(t *testing.T, args ...string) (string, string) {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, append(args, "--", "env")...)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "PR_TEST_TOKEN=tok-31a", "PR_TEST_SECRET_KEY=sec-77b", "PR_TEST_KEEP=1", "PAGER=less", "TERM=xterm")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("procrun %q: %v\nstderr %q", args, err, stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	t.Run("quiet-env", func(t *testing.T) {
		t.Parallel()
		out, _ := env(t, "-plain", "-quiet-env")
		for _, kv := range []string{"NO_COLOR=1", "PAGER=cat", "GIT_PAGER=cat", "GIT_TERMINAL_PROMPT=0", "CI=1", "TERM=dumb"} {
			if !strings.Contains(out, "\n"+kv+"\n") && !strings.HasPrefix(out, kv+"\n") {
				t.Errorf("procrun -quiet-env: the command's environment lacks %s:\n%s", kv, out)
			}
		}
	})
	t.Run("drop-env", func(t *testing.T) {
		t.Parallel()
		out, _ := env(t, "-plain", "-drop-env", "*_TOKEN", "-drop-env", "*SECRET*")
		if strings.Contains(out, "PR_TEST_TOKEN") || strings.Contains(out, "PR_TEST_SECRET_KEY") || !strings.Contains(out, "PR_TEST_KEEP=1") {
			t.Errorf("procrun -drop-env: the command's environment is\n%s\nwant PR_TEST_TOKEN and PR_TEST_SECRET_KEY gone, PR_TEST_KEEP kept", out)
		}
		snap, _ := env(t, "-drop-env", "PR_TEST_*")
		if !strings.Contains(snap, `"PR_TEST_KEEP"`) || !strings.Contains(snap, `"dropped_env"`) || strings.Contains(snap, "tok-31a") {
			t.Errorf("procrun -drop-env snapshot: want dropped_env naming PR_TEST_KEEP, without values:\n%s", snap)
		}
	})
	t.Run("drop-env-malformed", func(t *testing.T) {
		t.Parallel()
		r := prRun(ctx, t, bin, t.TempDir(), "-drop-env", "[", "--", "true")
		if r.code != 125 || !strings.Contains(r.stderr, "DropEnv") {
			t.Errorf("procrun -drop-env [ = exit %d, stderr %q; want 125 and the reason", r.code, r.stderr)
		}
	})
}
