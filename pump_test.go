package proc_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/procvisor/proc"

	"github.com/procvisor/proc/internal/testkit"
)

// The pump (pump.go): the tees (OutputTee, StderrTee) and the log file
// (LogPath). The Unix cases are in pump_unix_test.go.

// teeRecorder is a tee that keeps every byte and fails the test if two
// of its Writes ever overlap.
type teeRecorder struct {
	t              testing.TB
	in             atomic.Int32 // Writes in progress
	testkit.Buffer              // every byte
	mu             sync.Mutex
	maxSize        int
}

func (r *teeRecorder) Write(p []byte) (int, error) {
	if r.in.Add(1) != 1 {
		r.t.Errorf("tee: overlapping Writes")
	}
	defer r.in.Add(-1)
	r.mu.Lock()
	r.maxSize = max(r.maxSize, len(p))
	r.mu.Unlock()
	return r.Buffer.Write(p)
}

// TestOutputTeeEveryByte: the tee gets the whole stream in order, though
// the buffer keeps only its head and tail.
func TestOutputTeeEveryByte(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	m := newManager(t, proc.Options{HeadBytes: 100, TailBytes: 100})
	const n = 1 << 20
	rec := &teeRecorder{t: t}
	req := helperReq("lc-write", strconv.Itoa(n))
	req.OutputTee = rec
	snap := waitFinal(ctx, t, mustStart(t, m, req))
	if got, want := rec.String(), string(lcContent(n)); got != want {
		t.Errorf("tee got %d bytes; want the %d the child wrote, in order", len(got), len(want))
	}
	if snap.Info.TeeError != "" || snap.Info.OutputBytes != n || snap.Output.Truncation == nil {
		t.Errorf("Info = TeeError %q, OutputBytes %d, Truncation %+v; want none, %d, truncated",
			snap.Info.TeeError, snap.Info.OutputBytes, snap.Output.Truncation, n)
	}
}

// TestTeeSeparateStderr: each stream's tee gets that stream; one writer
// given as both tees is never written to from both pumps at once.
func TestTeeSeparateStderr(t *testing.T) {
	t.Parallel()
	const lines = 3000
	want := func(name string) string {
		var b strings.Builder
		for i := range lines {
			b.WriteString(iaStreamLine(name, i))
		}
		return b.String()
	}
	t.Run("two-tees", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		m := newManager(t, proc.Options{})
		out, errw := &teeRecorder{t: t}, &teeRecorder{t: t}
		req := helperReq("interactive-streams", strconv.Itoa(lines))
		req.SeparateStderr, req.OutputTee, req.StderrTee = true, out, errw
		waitFinal(ctx, t, mustStart(t, m, req))
		if out.String() != want("out") || errw.String() != want("err") {
			t.Errorf("tees got %d and %d bytes; want stdout's %d and stderr's %d",
				len(out.String()), len(errw.String()), len(want("out")), len(want("err")))
		}
	})
	t.Run("one-writer-both-tees", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		m := newManager(t, proc.Options{})
		both := &teeRecorder{t: t}
		req := helperReq("interactive-streams", strconv.Itoa(lines))
		req.SeparateStderr, req.OutputTee, req.StderrTee = true, both, both
		waitFinal(ctx, t, mustStart(t, m, req))
		if got, wantLen := len(both.String()), len(want("out"))+len(want("err")); got != wantLen {
			t.Errorf("shared tee got %d bytes; want %d", got, wantLen)
		}
	})
}

// failingTee fails its Write number failAt (from 1) with err, or writes
// short if err is nil.
type failingTee struct {
	failAt int
	err    error
	calls  atomic.Int32
}

func (f *failingTee) Write(p []byte) (int, error) {
	if int(f.calls.Add(1)) < f.failAt {
		return len(p), nil
	}
	if f.err == nil {
		return len(p) / 2, nil
	}
	return 0, f.err
}

// TestTeeError: the first error stops that tee and is recorded with the
// tee's own message; the process and its buffer are unaffected.
func TestTeeError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		tee  *failingTee
		want string
	}{
		{"error", &failingTee{failAt: 1, err: errors.New("socket gone")}, "output tee: socket gone"},
		{"short-write", &failingTee{failAt: 1}, "output tee: short write"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			m := newManager(t, proc.Options{})
			const n = 256 << 10
			req := helperReq("lc-write", strconv.Itoa(n))
			req.OutputTee = tc.tee
			snap := waitFinal(ctx, t, mustStart(t, m, req))
			if snap.Info.TeeError != tc.want {
				t.Errorf("TeeError = %q; want %q", snap.Info.TeeError, tc.want)
			}
			if calls := tc.tee.calls.Load(); calls != 1 {
				t.Errorf("tee got %d Writes; want 1 (none after its error)", calls)
			}
			if exitCode(t, snap.Info) != 0 || snap.Info.OutputBytes != n {
				t.Errorf("exit %d, OutputBytes %d; want 0, %d", exitCode(t, snap.Info), snap.Info.OutputBytes, n)
			}
		})
	}
}

// blockingTee blocks every Write until release is closed; started gets a
// value when the first Write begins.
type blockingTee struct {
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func newBlockingTee() *blockingTee {
	return &blockingTee{started: make(chan struct{}, 1), release: make(chan struct{})}
}

func (b *blockingTee) Write(p []byte) (int, error) {
	select {
	case b.started <- struct{}{}:
	default:
	}
	<-b.release
	return len(p), nil
}

func (b *blockingTee) unblock() { b.once.Do(func() { close(b.release) }) }

// TestTeeFlowControl: a tee that does not take the bytes holds the child
// as a full pipe would; once it takes them the child finishes.
func TestTeeFlowControl(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	m := newManager(t, proc.Options{})
	tee := newBlockingTee()
	defer tee.unblock()
	const n = 4 << 20 // far more than a pipe holds
	req := helperReq("lc-write", strconv.Itoa(n))
	req.OutputTee = tee
	p := mustStart(t, m, req)
	recv(ctx, t, tee.started, "the tee's first Write")
	// The child cannot finish 4 MiB through a 64 KiB pipe while the pump
	// is held: a bounded wait must end with the context.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := p.Wait(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait while the tee blocks = %v; want the context's deadline", err)
	}
	if got := p.Info().OutputBytes; got != 0 {
		t.Errorf("OutputBytes = %d while the tee holds the first bytes; want 0 (the tee comes first)", got)
	}
	tee.unblock()
	snap := waitFinal(ctx, t, p)
	if snap.Info.OutputBytes != n || snap.Info.TeeError != "" {
		t.Errorf("OutputBytes %d, TeeError %q; want %d, none", snap.Info.OutputBytes, snap.Info.TeeError, n)
	}
}

func TestLogPath(t *testing.T) {
	t.Parallel()

	// The file holds everything, unbounded, while the buffer keeps 2 KiB;
	// it is complete as soon as Wait returns.
	withManager(t, "full-output", proc.Options{HeadBytes: 1 << 10, TailBytes: 1 << 10}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		path := filepath.Join(t.TempDir(), "out.log")
		req := cvReq("lines:20000", "out:last line")
		req.LogPath = path
		p := mustStart(t, m, req)
		snap := waitFinal(ctx, t, p)
		got, err := os.ReadFile(path)
		want := cvFiller(20000) + "last line"
		if err != nil || string(got) != want {
			t.Fatalf("log file right after Wait = %d bytes, %v; want the %d bytes the child wrote", len(got), err, len(want))
		}
		if snap.Info.LogPath != path || snap.Info.LogError != "" {
			t.Errorf("Info LogPath %q, LogError %q; want %q, \"\"", snap.Info.LogPath, snap.Info.LogError, path)
		}
		if snap.Info.OutputBytes != int64(len(want)) || snap.Output.Truncation == nil {
			t.Errorf("OutputBytes %d, Truncation %+v; want %d and a truncated buffer", snap.Info.OutputBytes, snap.Output.Truncation, len(want))
		}
	})

	withManager(t, "separate-stderr-in-arrival-order", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		path := filepath.Join(t.TempDir(), "both.log")
		req := helperReq("cv-logorder", path, "out:out 1\n", "err:err 1\n", "err:err 2\n", "out:out 2\n", "err:err 3\n")
		req.LogPath, req.SeparateStderr = path, true
		p := mustStart(t, m, req)
		snap := waitFinal(ctx, t, p)
		if code := exitCode(t, snap.Info); code != 0 {
			t.Fatalf("cv-logorder exit %d, stderr %q; want 0", code, snap.Stderr.Text)
		}
		cvWantFile(t, path, "out 1\nerr 1\nerr 2\nout 2\nerr 3\n")
		if snap.Output.Text != "out 1\nout 2\n" || snap.Stderr.Text != "err 1\nerr 2\nerr 3\n" {
			t.Errorf("Output %q, Stderr %q; want the streams kept apart in memory", snap.Output.Text, snap.Stderr.Text)
		}
	})

	withManager(t, "appends", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		path := filepath.Join(t.TempDir(), "app.log")
		if err := os.WriteFile(path, []byte("previous run\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, text := range []string{"run 1\n", "run 2\n"} {
			req := cvReq("out:" + text)
			req.LogPath = path
			waitFinal(ctx, t, mustStart(t, m, req))
		}
		cvWantFile(t, path, "previous run\nrun 1\nrun 2\n")
	})

	// A start that fails after the log was opened removes the file it
	// created, and leaves a file that was there before untouched.
	withManager(t, "failed-start", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		defer cvStop(ctx, t, startStdin(t, m, withReq(cvReq("sleep"), func(r *proc.StartRequest) { r.ID = "held" })))

		dir := t.TempDir()
		for _, tc := range cvFailingStarts {
			created := filepath.Join(dir, tc.name+"-new.log")
			existing := filepath.Join(dir, tc.name+"-old.log")
			if err := os.WriteFile(existing, []byte("keep me\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, path := range []string{created, existing} {
				req := tc.req
				req.LogPath = path
				if _, err := m.Start(req); !errors.Is(err, tc.want) {
					t.Errorf("%s: Start(LogPath %s) = %v; want %v", tc.name, filepath.Base(path), err, tc.want)
				}
			}
			if _, err := os.Lstat(created); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: log file created by the failed start: Lstat = %v; want it removed", tc.name, err)
			}
			cvWantFile(t, existing, "keep me\n")
		}
	})

	// Two starts share a new log path; the one that created the file fails
	// after the other opened it. The failure must not remove a file that a
	// running process writes to.
	t.Run("failed-start-beside-a-started-one", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		hold := cvHoldFirstUpdateEnv(t)
		m := newManager(t, proc.Options{UpdateEnv: hold.updateEnv})
		path := filepath.Join(t.TempDir(), "shared.log")
		failed := make(chan error, 1)
		go func() {
			_, err := m.Start(proc.StartRequest{Args: []string{"cv-no-such-program-7f3a"}, LogPath: path})
			failed <- err
		}()
		recv(ctx, t, hold.held, "the failing Start to reach UpdateEnv")
		req := cvReq("out:from the started one\n")
		req.LogPath = path
		waitFinal(ctx, t, mustStart(t, m, req))
		hold.release()
		if err := recv(ctx, t, failed, "the failing Start"); !errors.Is(err, exec.ErrNotFound) {
			t.Errorf("Start(missing program) = %v; want exec.ErrNotFound", err)
		}
		cvWantFile(t, path, "from the started one\n")
	})

	t.Run("bad-path", func(t *testing.T) {
		t.Parallel()
		m := newManager(t, proc.Options{})
		dir := t.TempDir()
		cvWantBadLogPaths(t, m, []cvLogPath{
			{"missing-folder", filepath.Join(dir, "no-such-dir", "x.log")},
			{"directory", dir},
		})
	})
}

// TestLogPathLargeOutput streams 256 MiB through a process with a log
// file: the file is byte-identical to what the child wrote, and memory
// stays bounded while it runs and after. Not parallel: the heap it
// measures is the whole test binary's, and parallel tests' floods (a
// shuffled run put it beside them: 96 MiB) are not this record's.
func TestLogPathLargeOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 256 MiB")
	}
	const (
		size     = 256 << 20
		seed     = 20240917
		heapMax  = 64 << 20
		sampleAt = 64 << 20
	)
	ctx := testCtx(t, 60*time.Second)
	m := newManager(t, proc.Options{})
	path := filepath.Join(t.TempDir(), "big.log")
	req := helperReq("cv-pattern", strconv.Itoa(size), strconv.Itoa(seed))
	req.LogPath = path
	began := time.Now()
	p := mustStart(t, m, req)

	var peak uint64
	sample := func() {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
	}
	var cursor, next int64
	for {
		if err := p.WaitOutput(ctx, cursor); err != nil {
			t.Fatalf("WaitOutput(%d) = %v", cursor, err)
		}
		cursor = p.Info().OutputBytes
		// The log is written before the buffer: what a reader has seen
		// is already in the file.
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() < cursor {
			t.Fatalf("log file holds %d bytes while the buffer has seen %d; want the file ahead", fi.Size(), cursor)
		}
		if cursor >= next {
			sample()
			next += sampleAt
		}
		if !p.Info().Running {
			break
		}
	}
	snap := waitFinal(ctx, t, p)
	sample()
	if code := exitCode(t, snap.Info); code != 0 || snap.Info.OutputBytes != size || snap.Info.LogError != "" {
		t.Fatalf("final: exit %d, OutputBytes %d, LogError %q; want 0, %d, \"\"", code, snap.Info.OutputBytes, snap.Info.LogError, size)
	}
	if peak > heapMax {
		t.Errorf("HeapInuse peaked at %d MiB while streaming %d MiB; want below %d MiB", peak>>20, size>>20, heapMax>>20)
	}

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g := newCVPattern(seed)
	want := make([]byte, cvPatternChunk)
	got := make([]byte, cvPatternChunk)
	var off int64
	for ; off < size; off += cvPatternChunk {
		if _, err := io.ReadFull(f, got); err != nil {
			t.Fatalf("log file ends at %d bytes (%v); want %d", off, err, size)
		}
		g.next(want)
		if !bytes.Equal(got, want) {
			i := 0
			for got[i] == want[i] {
				i++
			}
			t.Fatalf("log file differs from the child's output at byte %d", off+int64(i))
		}
	}
	if n, err := f.Read(got[:1]); n != 0 || err != io.EOF {
		t.Errorf("log file is longer than the %d bytes the child wrote", size)
	}
	t.Logf("256 MiB streamed and verified in %v; peak HeapInuse %d KiB", time.Since(began).Round(time.Millisecond), peak>>10)
}
