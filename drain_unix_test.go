//go:build unix

package proc_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/quartz"
	"github.com/creack/pty"
	"github.com/procvisor/proc"
)

// The drain on Unix: background children and grandchildren holding
// stdout, the chunks of a drain, and log files that are FIFOs, terminals,
// /dev/full or out of descriptors.

// TestDrainBackgroundChild: a command that leaves a silent background
// child holding stdout is final about DrainQuiet after the shell exits,
// and Signal still reaches the background child afterwards.
func TestDrainBackgroundChild(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	start := time.Now()
	p := mustStart(t, m, proc.StartRequest{Command: "sleep 30 & echo hi"})
	s := waitFinal(ctx, t, p)
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("final after %v; want about DrainQuiet (50ms) after sh exits", elapsed)
	}
	if s.Output.Text != "hi\n" {
		t.Errorf("Output() = %q; want %q", s.Output.Text, "hi\n")
	}
	wantExit(t, s, 0)
	if err := p.Signal(proc.Kill); err != nil {
		t.Errorf("Signal(Kill) after final, background sleep alive = %v; want nil", err)
	}
}

// TestDrainGrandchildTail is the case of the issue, on the real clock: the
// child exits at once, its grandchild writes "ta", 30 ms later "il", and
// then holds stdout silently. The record is final one quiet window after
// the last byte, with all of the output.
func TestDrainGrandchildTail(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{DrainQuiet: 500 * time.Millisecond})
	start := time.Now()
	p := mustStart(t, m, helperReq("lc-spawn", "nopid", "lc-tail"))
	s := waitFinal(ctx, t, p)
	elapsed := time.Since(start)
	if s.Output.Text != "tail" || s.Output.Truncation != nil {
		t.Errorf("Output() = %q (%+v); want %q", s.Output.Text, s.Output.Truncation, "tail")
	}
	wantExit(t, s, 0)
	// The grandchild holds stdout for 30 s; the drain must not wait for it.
	if elapsed > 10*time.Second {
		t.Errorf("final after %v; want about DrainQuiet (500ms) after the last byte", elapsed)
	}
}

// TestDrainChunks drives a grandchild's output against the mock clock:
// the drain waits for a quiet window that every chunk restarts (the
// issue's "ta" ... "il" case), EOF ends it at once, and DrainTimeout caps
// it.
func TestDrainChunks(t *testing.T) {
	t.Parallel()

	t.Run("chunk-restarts-quiet-window", func(t *testing.T) {
		t.Parallel()
		const quiet = 100 * time.Millisecond
		ctx, mClock, m := testMockManager(t, proc.Options{DrainQuiet: quiet})
		path, f := lcFIFO(t)
		quietTrap := mClock.Trap().NewTimer("drain", "quiet")
		defer quietTrap.Close()
		resetTrap := mClock.Trap().TimerReset("drain", "quiet")
		defer resetTrap.Close()

		p := mustStart(t, m, helperReq("lc-spawn", "nopid", "lc-cat", path))
		// The drain's first timer: the child exited, the grandchild holds
		// stdout.
		releaseTrapped(ctx, t, quietTrap, quiet, "quiet timer")
		lcCheckRunning(t, p.Info())

		lcWrite(t, f, "ta")
		call := resetTrap.MustWait(ctx)
		if call.Duration != quiet {
			t.Errorf("quiet timer reset to %v; want DrainQuiet %v", call.Duration, quiet)
		}
		if got := p.Output().Text; got != "ta" {
			t.Errorf("Output() at the first chunk's reset = %q; want %q", got, "ta")
		}
		call.MustRelease(ctx)
		mClock.Advance(quiet / 2).MustWait(ctx)
		lcCheckPeek(t, mClock, quiet/2, "half a window after the first chunk")

		lcWrite(t, f, "il")
		resetTrap.MustWait(ctx).MustRelease(ctx)
		lcCheckPeek(t, mClock, quiet, "at the second chunk")
		mClock.Advance(quiet / 2).MustWait(ctx)
		// The window the first chunk opened is over; the second one's is not.
		lcCheckPeek(t, mClock, quiet/2, "one window after the first chunk")
		lcCheckRunning(t, p.Info())

		mClock.Advance(quiet / 2).MustWait(ctx)
		s := waitFinal(ctx, t, p)
		lcCheckFinal(t, s.Info)
		if s.Output.Text != "tail" {
			t.Errorf("Output() = %q; want %q", s.Output.Text, "tail")
		}
		wantExit(t, s, 0)
		if !s.Info.ExitedAt.Equal(s.Info.StartedAt) {
			t.Errorf("ExitedAt = %v; want the exit time %v, not the end of the drain", s.Info.ExitedAt, s.Info.StartedAt)
		}
	})

	t.Run("EOF-mid-drain", func(t *testing.T) {
		t.Parallel()
		ctx, mClock, m := testMockManager(t, proc.Options{})
		path, f := lcFIFO(t)
		quietTrap := mClock.Trap().NewTimer("drain", "quiet")
		defer quietTrap.Close()

		p := mustStart(t, m, helperReq("lc-spawn", "nopid", "lc-cat", path))
		quietTrap.MustWait(ctx).MustRelease(ctx)
		lcCheckRunning(t, p.Info())
		// The grandchild writes its last words and exits: EOF, with the
		// mock clock standing still.
		lcWrite(t, f, "last words\n")
		_ = f.Close()
		s := waitFinal(ctx, t, p)
		if s.Output.Text != "last words\n" {
			t.Errorf("Output() = %q; want %q", s.Output.Text, "last words\n")
		}
		lcCheckFinal(t, s.Info)
	})

	// A grandchild that writes without pause keeps resetting the quiet
	// window; DrainTimeout ends the drain all the same.
	t.Run("cap-ends-endless-output", func(t *testing.T) {
		t.Parallel()
		const drainCap = 2 * time.Second
		// A quiet window longer than the cap: only the cap can end it.
		ctx, mClock, m := testMockManager(t, proc.Options{DrainQuiet: time.Hour, DrainTimeout: drainCap})
		mClock.WithLogger(quartz.NoOpLogger)
		quietTrap := mClock.Trap().NewTimer("drain", "quiet")
		defer quietTrap.Close()
		capTrap := mClock.Trap().NewTimer("drain", "cap")
		defer capTrap.Close()

		p := mustStart(t, m, helperReq("lc-spawn", "nopid", "lc-flood"))
		quietTrap.MustWait(ctx).MustRelease(ctx)
		releaseTrapped(ctx, t, capTrap, drainCap, "drain cap timer")
		lcCheckRunning(t, p.Info())
		if err := p.WaitOutput(ctx, 0); err != nil {
			t.Fatalf("WaitOutput(0) = %v", err)
		}

		mClock.Advance(drainCap).MustWait(ctx)
		s := waitFinal(ctx, t, p)
		lcCheckFinal(t, s.Info)
		if s.Info.OutputBytes == 0 {
			t.Errorf("final OutputBytes = 0; want the flood's bytes")
		}
		wantExit(t, s, 0)
		// I1: nothing changes after final, though the grandchild may still
		// be writing into a closed pipe.
		if again := p.Snapshot(); again.Info.OutputBytes != s.Info.OutputBytes || !reflect.DeepEqual(again.Output, s.Output) {
			t.Errorf("after final: OutputBytes %d -> %d, output changed %v", s.Info.OutputBytes, again.Info.OutputBytes, !reflect.DeepEqual(again.Output, s.Output))
		}
	})
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
