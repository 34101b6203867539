//go:build unix

package proc_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/procvisor/proc"
)

// Unix-only tests of design section 11: log file modes, paths that are not
// regular files, a failing disk, descriptors, and WaitFor on a terminal.

// cvMode returns the permission bits of path.
func cvMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("Stat(%s) = %v", path, err)
	}
	return fi.Mode().Perm()
}

func TestLogPathMode(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	dir := t.TempDir()

	created := filepath.Join(dir, "new.log")
	req := cvReq("out:secret output\n")
	req.LogPath = created
	waitFinal(ctx, t, mustStart(t, m, req))
	if mode := cvMode(t, created); mode != 0o600 {
		t.Errorf("mode of a created log file = %v; want 0600", mode)
	}

	existing := filepath.Join(dir, "old.log")
	if err := os.WriteFile(existing, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(existing, 0o644); err != nil {
		t.Fatal(err)
	}
	req.LogPath = existing
	waitFinal(ctx, t, mustStart(t, m, req))
	if mode := cvMode(t, existing); mode != 0o644 {
		t.Errorf("mode of an appended log file = %v; want it unchanged, 0644", mode)
	}
	if got, err := os.ReadFile(existing); err != nil || string(got) != "old\nsecret output\n" {
		t.Errorf("appended log file = %q, %v; want %q", got, err, "old\nsecret output\n")
	}
}

func TestLogPathNotAFile(t *testing.T) {
	t.Parallel()
	m := newManager(t, proc.Options{})
	dir := t.TempDir()

	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatalf("Mkfifo = %v", err)
	}
	// A FIFO with a reader opens for writing; it must be refused all the same.
	readFifo := filepath.Join(dir, "fifo-with-reader")
	if err := syscall.Mkfifo(readFifo, 0o600); err != nil {
		t.Fatalf("Mkfifo = %v", err)
	}
	reader, err := os.OpenFile(readFifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatalf("open FIFO for reading = %v", err)
	}
	defer reader.Close()

	cases := []cvLogPath{
		{"missing-folder", filepath.Join(dir, "missing", "x.log")},
		{"directory", dir},
		{"fifo", fifo},
		{"fifo-with-reader", readFifo},
	}
	if os.Geteuid() != 0 { // root ignores permissions
		noPerm := filepath.Join(dir, "no-perm.log")
		if err := os.WriteFile(noPerm, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(noPerm, 0); err != nil {
			t.Fatal(err)
		}
		roDir := filepath.Join(dir, "read-only")
		if err := os.Mkdir(roDir, 0o500); err != nil {
			t.Fatal(err)
		}
		cases = append(cases,
			cvLogPath{"file-mode-0", noPerm},
			cvLogPath{"read-only-folder", filepath.Join(roDir, "x.log")})
	} else {
		t.Log("running as root: permission cases skipped")
	}
	cvWantBadLogPaths(t, m, cases)
	buf := make([]byte, 16)
	if n, _ := reader.Read(buf); n != 0 {
		t.Errorf("the FIFO got %q from a refused start", buf[:n])
	}
}

// A log that cannot be written (ENOSPC) costs nothing but the log.
func TestLogPathWriteError(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	ctx, m := testManager(t, proc.Options{})
	req := cvReq("out:before\n", "lines:5000", "out:after\n", "exit:7")
	req.LogPath = "/dev/full"
	snap := waitFinal(ctx, t, mustStart(t, m, req))
	want := "before\n" + cvFiller(5000) + "after\n"
	if snap.Info.LogError == "" {
		t.Errorf("Info.LogError is empty; want the write error of /dev/full")
	}
	wantExit(t, snap, 7)
	if snap.Info.OutputBytes != int64(len(want)) {
		t.Errorf("OutputBytes = %d; want %d", snap.Info.OutputBytes, len(want))
	}
	if tail := want[len(want)-(16<<10):]; !strings.HasPrefix(snap.Output.Text, "before\nfiller 00000\n") || !strings.HasSuffix(snap.Output.Text, tail) {
		t.Errorf("Output lost bytes to the failing log: %d bytes of text", len(snap.Output.Text))
	}
	if snap.Info.LogPath != "/dev/full" {
		t.Errorf("Info.LogPath = %q; want /dev/full", snap.Info.LogPath)
	}
}

// The log is complete and closed before Done closes, also when the drain
// ends by its quiet window because a background child holds the pipe.
func TestLogPathClosedBeforeDone(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	ctx, m := testManager(t, proc.Options{})
	for _, tc := range []struct{ name, command, want string }{
		{"exit", "echo one; echo two >&2", "one\ntwo\n"},
		{"background-holder", "echo one; sleep 30 & echo two", "one\ntwo\n"},
	} {
		path := filepath.Join(t.TempDir(), tc.name+".log")
		p := mustStart(t, m, proc.StartRequest{Command: tc.command, LogPath: path})
		waitFinal(ctx, t, p)
		for fd, target := range openFDs(t) {
			if target == path {
				t.Errorf("%s: descriptor %s of the log still open after Done", tc.name, fd)
			}
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != tc.want {
			t.Errorf("%s: log file after Done = %q, %v; want %q", tc.name, got, err, tc.want)
		}
		if err := p.Signal(proc.Kill); err != nil && !errors.Is(err, proc.ErrNotRunning) {
			t.Errorf("%s: Signal(Kill) = %v", tc.name, err)
		}
	}
}

// A terminal ends lines in \r\n; WaitFor returns them without the \r.
func TestWaitForTTY(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	p := mustStart(t, m, proc.StartRequest{Command: "echo booting; echo 'listening on :8080'", TTY: true})
	line, err := p.WaitFor(ctx, regexp.MustCompile(`^listening on :\d+$`), true)
	if err != nil || line != "listening on :8080" {
		t.Errorf("WaitFor() on a TTY = %q, %v; want %q", line, err, "listening on :8080")
	}
	snap := waitFinal(ctx, t, p)
	if !strings.Contains(snap.Output.Text, "listening on :8080\r\n") {
		t.Errorf("TTY output %q has no \\r\\n line ending; the test does not exercise \\r removal", snap.Output.Text)
	}
}
