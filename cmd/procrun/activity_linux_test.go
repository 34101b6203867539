//go:build linux

package main_test

import (
	"bufio"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// TestProcrunFollowActivity: with -follow, procrun says on stderr when the
// command starts to wait for input, and which ports it listens on.
func TestProcrunFollowActivity(t *testing.T) {
	t.Parallel()
	ctx, bin := prBuild(t)

	// follow runs procrun with args, and returns its stderr lines as they
	// come; the caller ends the run.
	follow := func(t *testing.T, cmd *exec.Cmd) <-chan string {
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 100)
		// Ends at procrun's exit (EOF on its stderr).
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		return lines
	}
	await := func(t *testing.T, lines <-chan string, re string) string {
		t.Helper()
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("procrun exited without printing a line matching %q", re)
				}
				if regexp.MustCompile(re).MatchString(line) {
					return line
				}
			case <-ctx.Done():
				t.Fatalf("no line matching %q: %v", re, ctx.Err())
			}
		}
	}

	t.Run("input", func(t *testing.T) {
		t.Parallel()
		cmd := exec.CommandContext(ctx, bin, "-follow", "-stdin", "--", "sh", "-c", "read x; echo got $x")
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stdout strings.Builder
		cmd.Stdout = &stdout
		lines := follow(t, cmd)
		await(t, lines, "^procrun: waiting for input$")
		if _, err := stdin.Write([]byte("it\n")); err != nil {
			t.Fatal(err)
		}
		stdin.Close()
		for range lines {
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("procrun: %v", err)
		}
		if !strings.HasPrefix(stdout.String(), "got it\n") {
			t.Errorf("procrun's stdout %q; want the streamed %q first", stdout.String(), "got it\n")
		}
	})

	t.Run("listener", func(t *testing.T) {
		t.Parallel()
		if _, err := exec.LookPath("python3"); err != nil {
			t.Skipf("python3 is not installed (%v); it is on the development machines and in CI", err)
		}
		cmd := exec.CommandContext(ctx, bin, "-follow", "--", "python3", "-m", "http.server", "0", "--bind", "127.0.0.1")
		lines := follow(t, cmd)
		await(t, lines, `^procrun: listening on tcp 127\.0\.0\.1:[0-9]+ \(pid [0-9]+\)$`)
		// procrun terminates the command on SIGTERM and prints the snapshot.
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		for range lines {
		}
		_ = cmd.Wait()
	})
}
