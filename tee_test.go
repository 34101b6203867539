package proc_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/procvisor/proc"
)

// teeRecorder is a tee that keeps every byte and fails the test if two
// of its Writes ever overlap.
type teeRecorder struct {
	t       testing.TB
	in      atomic.Int32 // Writes in progress
	mu      sync.Mutex
	buf     bytes.Buffer
	maxSize int
}

func (r *teeRecorder) Write(p []byte) (int, error) {
	if r.in.Add(1) != 1 {
		r.t.Errorf("tee: overlapping Writes")
	}
	defer r.in.Add(-1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.maxSize = max(r.maxSize, len(p))
	return r.buf.Write(p)
}

func (r *teeRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
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

// TestTeeCutOff: a tee still blocked DrainTimeout after the child's exit
// is cut off, so that the record becomes final (on the mock clock).
func TestTeeCutOff(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	mClock := quartz.NewMock(t)
	capTrap := mClock.Trap().NewTimer("drain", "cap")
	defer capTrap.Close()
	m := newManager(t, proc.Options{Clock: mClock})
	tee := newBlockingTee()
	// Released after the checks: the pump it holds then ends (goleak).
	defer tee.unblock()
	req := helperReq("lc-print", "hello\n")
	req.OutputTee = tee
	p := mustStart(t, m, req)
	recv(ctx, t, tee.started, "the tee's first Write")

	// The child exits; its pipe is at EOF, but the pump is in the tee.
	capTrap.MustWait(ctx).MustRelease(ctx)
	mClock.Advance(proc.DefaultDrainQuiet).MustWait(ctx)
	mClock.Advance(proc.DefaultDrainTimeout - proc.DefaultDrainQuiet - time.Nanosecond).MustWait(ctx)
	if !p.Info().Running {
		t.Fatalf("record final before DrainTimeout passed")
	}
	mClock.Advance(time.Nanosecond).MustWait(ctx)
	snap := waitFinal(ctx, t, p)
	if !strings.HasPrefix(snap.Info.TeeError, "output tee: cut off") {
		t.Errorf("TeeError = %q; want it to say the output tee was cut off", snap.Info.TeeError)
	}
	if exitCode(t, snap.Info) != 0 {
		t.Errorf("exit code %d; want 0", exitCode(t, snap.Info))
	}
}
