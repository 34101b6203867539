//go:build unix

package proc_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/creack/pty"
	"github.com/procvisor/proc"
)

// The pump on Unix: log files that are FIFOs, terminals, /dev/full or
// out of descriptors.

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

	// A FIFO with a reader opens for writing; it must be refused all the same.
	fifo, readFifo := filepath.Join(dir, "fifo"), filepath.Join(dir, "fifo-with-reader")
	for _, path := range []string{fifo, readFifo} {
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Fatalf("Mkfifo(%s) = %v", path, err)
		}
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

// TestLogPathTerminalRefused pins that a terminal is not accepted as a log
// file: a write to it can block for ever (a stopped terminal), and the log
// is written before the buffer.
func TestLogPathTerminalRefused(t *testing.T) {
	t.Parallel()
	master, slave, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer master.Close()
	defer slave.Close()
	m := newManager(t, proc.Options{})
	_, err = m.Start(proc.StartRequest{Args: []string{"true"}, LogPath: slave.Name()})
	if !errors.Is(err, proc.ErrInvalid) {
		t.Fatalf("Start(LogPath: %s) = %v; want ErrInvalid", slave.Name(), err)
	}
	if got := m.List(); len(got) != 0 {
		t.Errorf("List() after a refused start = %d records; want none", len(got))
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

// TestLogPathOutOfDescriptors pins design section 8: running out of
// descriptors while opening the log file is an OS refusal (EMFILE wrapped,
// no sentinel), not bad input, and leaves nothing behind.
func TestLogPathOutOfDescriptors(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	snap := waitFinal(ctx, t, mustStart(t, m, helperReq("eco-log-emfile", t.TempDir())))
	if code := exitCode(t, snap.Info); code != 0 || snap.Output.Text != "ok\n" {
		t.Errorf("helper exited %d: %q", code, snap.Output.Text)
	}
}

// The log is complete and closed before Done closes, also when the drain
// ends by its quiet window because a background child holds the pipe.
func TestLogPathClosedBeforeDone(t *testing.T) {
	t.Parallel()
	needProcFS(t)
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

// cvMode returns the permission bits of path.
func cvMode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("Stat(%s) = %v", path, err)
	}
	return fi.Mode().Perm()
}

var _ = helper("eco-log-emfile", ecoLogEMFILE)

// ecoLogEMFILE runs in a child of the test, so that the test process keeps
// its own descriptor limit: it lowers RLIMIT_NOFILE, opens descriptors
// until none is left, and starts a process whose LogPath (in args[0]) then
// cannot be opened. It prints "ok" and exits 0 when the start failed as
// design section 8 says; otherwise it prints what was wrong and exits 1.
func ecoLogEMFILE(args []string) int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Println("getrlimit:", err)
		return 1
	}
	lim.Cur = min(lim.Cur, 128)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Println("setrlimit:", err)
		return 1
	}
	m := proc.NewManager(proc.Options{})
	defer m.Close()
	logPath := filepath.Join(args[0], "out.log")
	req := proc.StartRequest{ID: "emfile", Args: []string{os.Args[0]}, LogPath: logPath}

	var fillers []*os.File
	for len(fillers) < 1000 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			break
		}
		fillers = append(fillers, f)
	}
	p, err := m.Start(req)
	for _, f := range fillers {
		_ = f.Close()
	}

	var problems []string
	if p != nil {
		problems = append(problems, "the start succeeded")
	}
	if !errors.Is(err, syscall.EMFILE) {
		problems = append(problems, "the error does not wrap EMFILE")
	}
	if in := mgrSentinelsIn(err); len(in) != 0 {
		problems = append(problems, fmt.Sprintf("the error wraps sentinels %v", in))
	}
	if err != nil && !strings.Contains(err.Error(), logPath) {
		problems = append(problems, "the error does not name the log file")
	}
	if _, statErr := os.Lstat(logPath); !errors.Is(statErr, os.ErrNotExist) {
		problems = append(problems, fmt.Sprintf("the log file is there (%v)", statErr))
	}
	if n := len(m.List()); n != 0 {
		problems = append(problems, fmt.Sprintf("%d records", n))
	}
	if len(problems) > 0 {
		fmt.Printf("Start with no descriptor left = %v: %s\n", err, strings.Join(problems, "; "))
		return 1
	}
	fmt.Println("ok")
	return 0
}
