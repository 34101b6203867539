//go:build linux && !proc_otherunix

package proc

import (
	"context"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/coder/quartz"
	"golang.org/x/sys/unix"
)

// TestPumpGrowsPipeWhenPolled pins when a pump grows its pipe: once a read
// finds a full read's worth waiting while Output is being polled (the
// readers share the Ps with the pump), and not when nobody polls.
func TestPumpGrowsPipeWhenPolled(t *testing.T) {
	t.Parallel()
	bothWays(t, "alone", "polled", func(t *testing.T, polled bool) {
		ctx, r, w, before := growablePipe(t)
		b := NewHeadTailBuffer(0, 0, 0)
		if polled {
			pollOnce(b)
		}
		// A read's worth waiting before the pump's first read.
		if _, err := w.Write(make([]byte, pumpBufSize)); err != nil {
			t.Fatalf("write to the pipe: %v", err)
		}
		_ = w.Close()
		done := make(chan struct{}, 1)
		pu := &pump{r: r, dst: b, clock: quartz.NewReal(), activity: make(chan struct{}, 1), done: done}
		go pu.run() // ends at EOF: w is closed
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatalf("pump did not end at EOF: %v", ctx.Err())
		}
		size, err := pipeSize(r)
		if err != nil {
			t.Fatalf("F_GETPIPE_SZ = %v", err)
		}
		want := before
		if polled {
			want = observedPipeSize
		}
		if size != want {
			t.Errorf("pipe size after a full read = %d; want %d", size, want)
		}
	})
}

// pipeSize returns the capacity of f's pipe, without making f blocking
// (as f.Fd would).
func pipeSize(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var size int
	var serr error
	if err := rc.Control(func(fd uintptr) { size, serr = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0) }); err != nil {
		return 0, err
	}
	return size, serr
}

// testPipe returns a context that ends in 10 s or with t, and a pipe
// closed when t ends.
func testPipe(t *testing.T) (ctx context.Context, r, w *os.File) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatalf("os.Pipe() = %v", err)
	}
	t.Cleanup(func() { _ = r.Close(); _ = w.Close() })
	return ctx, r, w
}

// growablePipe returns a context that ends in 10 s or with t, a pipe
// whose read end the test closes when it ends, and its size, which is
// smaller than observedPipeSize; it skips t where pipes are not (Linux's
// default is 64 KiB).
func growablePipe(t *testing.T) (ctx context.Context, r, w *os.File, size int) {
	t.Helper()
	ctx, r, w = testPipe(t)
	size, err := pipeSize(r)
	if err != nil || size >= observedPipeSize {
		t.Skipf("F_GETPIPE_SZ = %d, %v: a pipe that is not smaller than %d by default (runs on Linux defaults, 64 KiB)", size, err, observedPipeSize)
	}
	return ctx, r, w, size
}

// pollOnce makes b look polled, as an Output that returns an unchanged
// rendering does (so a pump would grow its pipe).
func pollOnce(b *HeadTailBuffer) {
	_, _ = b.Write([]byte("x"))
	_ = b.Output()
	_ = b.Output() // unchanged: polled
}

// TestPumpPipeBudget pins the Manager's budget of grown pipes: a pump
// grows its pipe only while fewer than maxGrownPipes of the Manager's
// pipes are grown, and gives its place back when it ends.
func TestPumpPipeBudget(t *testing.T) {
	t.Parallel()
	bothWays(t, "room", "full", func(t *testing.T, full bool) {
		ctx, r, w, before := growablePipe(t)
		var budget pipeBudget
		if full {
			budget.grown.Store(maxGrownPipes)
		}
		b := NewHeadTailBuffer(0, 0, 0)
		pollOnce(b)
		if _, err := w.Write(make([]byte, pumpBufSize)); err != nil {
			t.Fatalf("write to the pipe: %v", err)
		}
		done := make(chan struct{}, 1)
		pu := &pump{r: r, dst: b, clock: quartz.NewReal(), activity: make(chan struct{}, 1), done: done, pipes: &budget}
		go pu.run() // ends at EOF: w is closed below
		grown := before
		if !full {
			grown = observedPipeSize
		}
		spinUntil(ctx, t, "pump reading the pipe", func() bool { return b.Len() > pumpBufSize })
		if size, err := pipeSize(r); err != nil || size != grown {
			t.Errorf("pipe size with budget %d of %d taken = %d, %v; want %d", budget.grown.Load(), maxGrownPipes, size, err, grown)
		}
		if got, want := budget.grown.Load(), int32(maxGrownPipes); !full && got != 1 || full && got != want {
			t.Errorf("grown pipes while the pump runs = %d; want %d", got, map[bool]int32{false: 1, true: want}[full])
		}
		_ = w.Close()
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatalf("pump did not end at EOF: %v", ctx.Err())
		}
		want := int32(0)
		if full {
			want = maxGrownPipes
		}
		if got := budget.grown.Load(); got != want {
			t.Errorf("grown pipes after the pump ended = %d; want %d", got, want)
		}
	})
}

// TestPolledPumpCounted pins the count of a Manager's pumps that try their
// pipes between pollers' turns, which makes pollers of a final record
// step aside (HeadTailBuffer.output): a pump is counted while polled
// between reads, not while it may park in a blocking read, and not once
// it reached EOF. So a one-off Snapshot of a final record does not yield
// its thread because of a pump parked on a silent child.
func TestPolledPumpCounted(t *testing.T) {
	t.Parallel()
	ctx, r, w, sig, b := polledPumpSetup(t)
	pu := &pump{r: r, dst: b, clock: quartz.NewReal(), activity: make(chan struct{}, 1), done: make(chan struct{}, 1)}
	buf := make([]byte, 64)
	type result struct {
		n   int
		err error
	}
	read := func() <-chan result {
		c := make(chan result, 1) // one sender
		// Ends when read returns.
		go func() {
			n, err := pu.read(buf)
			c <- result{n, err}
		}()
		return c
	}
	recv := func(c <-chan result) result {
		t.Helper()
		select {
		case res := <-c:
			return res
		case <-ctx.Done():
			t.Fatalf("pump read did not return: %v", ctx.Err())
			return result{}
		}
	}

	if _, err := w.Write([]byte("abc")); err != nil {
		t.Fatalf("write to the pipe: %v", err)
	}
	if res := recv(read()); res.n != 3 || res.err != nil {
		t.Fatalf("read() = %d, %v; want 3, nil", res.n, res.err)
	}
	if n := sig.pumps.Load(); n != 1 {
		t.Errorf("polled pump after a read: counted %d; want 1", n)
	}
	// Nothing in the pipe and nobody polling: the pump stops trying and
	// parks, uncounted.
	c := read()
	for sig.pumps.Load() != 0 {
		if ctx.Err() != nil {
			t.Fatalf("pump about to park on an empty pipe still counted: %v", ctx.Err())
		}
		runtime.Gosched()
	}
	if _, err := w.Write([]byte("d")); err != nil {
		t.Fatalf("write to the pipe: %v", err)
	}
	if res := recv(c); res.n != 1 || res.err != nil {
		t.Fatalf("read() = %d, %v; want 1, nil", res.n, res.err)
	}
	_ = w.Close()
	if res := recv(read()); res.err == nil {
		t.Fatalf("read() at EOF = %d, nil; want an error", res.n)
	}
	if n := sig.pumps.Load(); n != 0 {
		t.Errorf("pump that reached EOF: counted %d; want 0", n)
	}
}

// TestFollowerWokenWhilePolled pins that a wake the pump owes a follower
// (writeQuiet leaves it for later) comes while Output is polled in a
// tight loop: the pump then tries its pipe between the pollers' turns
// instead of parking in a read. The read deadline that bounds a late wake
// (armWake) has no parked read to end then: each non-blocking try reports
// it once passed, and the pump wakes the follower (pump.run, wakeLate).
func TestFollowerWokenWhilePolled(t *testing.T) {
	t.Parallel()
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("the poller must run beside the pump: GOMAXPROCS < 2 (CI has 2)")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatalf("os.Pipe() = %v", err)
	}
	defer r.Close()
	defer w.Close()
	b := NewHeadTailBuffer(0, 0, 0)
	pu := &pump{r: r, dst: b, clock: quartz.NewReal(), activity: make(chan struct{}, 1), done: make(chan struct{}, 1)}
	// A follower blocked in Read.
	f := mustFollow(t, b, 0, FollowOptions{})
	waited := make(chan error, 1) // one send
	// Ends when Read returns (ctx bounds it).
	go func() {
		_, err := f.Read(ctx, make([]byte, 64))
		waited <- err
	}()
	spinUntil(ctx, t, "the follower to wait", func() bool {
		return pumpTestLocked(b, func() bool { return b.waitc != nil })
	})
	pu.writeQuiet([]byte("hi\n"))
	if !pu.wakeDue {
		t.Fatal("writeQuiet woke the lone follower at once; want the wake left to the pump")
	}
	// A poller that never stops: the pump keeps trying its empty pipe.
	b.polled.Store(true)
	stop := make(chan struct{})
	polling := make(chan struct{})
	defer func() { <-polling }()
	defer close(stop)
	// Ends when stop is closed.
	go func() {
		defer close(polling)
		for {
			select {
			case <-stop:
				return
			default:
				b.polled.Store(true)
			}
		}
	}()
	read := make(chan error, 1) // one send
	// Ends when a read returns bytes or fails: the pipe gets a byte below.
	go func() {
		buf := make([]byte, 64)
		for {
			// As pump.run does: a late wake's deadline is not the end.
			if _, err := pu.read(buf); !pu.wakeLate(err) {
				read <- err
				return
			}
		}
	}()
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("Read = %v", err)
		}
	case <-ctx.Done():
		t.Fatalf("the follower was not woken while the pump tried its pipe between pollers' turns: %v", ctx.Err())
	}
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatalf("write to the pipe: %v", err)
	}
	if err := <-read; err != nil {
		t.Errorf("pump read = %v; want nil", err)
	}
}

// polledPumpSetup is the start of the polled-pump tests: a pipe (closed
// when the test ends), a context of 10 s, and a buffer sharing sig that
// a poller already found unchanged, so that its pump counts as polled.
func polledPumpSetup(t *testing.T) (ctx context.Context, r, w *os.File, sig *pollSignal, b *HeadTailBuffer) {
	t.Helper()
	ctx, r, w = testPipe(t)
	sig = new(pollSignal)
	b = NewHeadTailBuffer(0, 0, 0)
	b.sharePolls(sig)
	_, _ = b.Write([]byte("x"))
	_ = b.Output()
	_ = b.Output() // unchanged: polled, so the pump tries its pipe
	return ctx, r, w, sig, b
}
