package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/coder/quartz"
)

// spinUntil yields until cond holds, failing t when ctx ends first.
func spinUntil(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatalf("%s: %v", what, ctx.Err())
		}
		runtime.Gosched()
	}
}

// pumpTestLocked runs f under b.mu.
func pumpTestLocked(b *HeadTailBuffer, f func() bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return f()
}

// waitBlocked starts b.WaitOutput(waitCtx, cursor) and returns once it
// blocks (the only waiter), with its result to come on the channel; ctx
// bounds the spin.
func waitBlocked(ctx, waitCtx context.Context, t *testing.T, b *HeadTailBuffer, cursor int64) <-chan error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- b.WaitOutput(waitCtx, cursor) }()
	spinUntil(ctx, t, "waiting", func() bool { return pumpTestLocked(b, func() bool { return b.waiters == 1 }) })
	return errc
}

// mustFollow registers a follower of b (no Process) or fails t.
func mustFollow(t *testing.T, b *HeadTailBuffer, from int64, opts FollowOptions) *Follower {
	t.Helper()
	f, err := b.follow(nil, from, opts)
	if err != nil {
		t.Fatalf("follow(%d, %+v) = %v; want nil", from, opts, err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// pumpRig is a pump of a buffer of head 4 and tail 8 reading a pipe, on
// a mock clock, with a window of window bytes (0: none) once anyone
// follows.
type pumpRig struct {
	b     *HeadTailBuffer
	pu    *pump
	w     *os.File
	clock *quartz.Mock
	// holds gets the bound of each wait of the pump for its followers
	// (the timer it sets or resets), released at once.
	holds chan time.Duration
}

func newPumpRig(ctx context.Context, t *testing.T, window int) *pumpRig {
	t.Helper()
	mClock := quartz.NewMock(t)
	rig := &pumpRig{b: NewHeadTailBuffer(4, 8, 0), clock: mClock, holds: make(chan time.Duration, 64)}
	fwdCtx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	for _, trap := range []*quartz.Trap{mClock.Trap().NewTimer("pump", "follower"), mClock.Trap().TimerReset("pump", "follower")} {
		done := make(chan struct{})
		// Ends when fwdCtx does (at cleanup); joined there.
		go func() {
			defer close(done)
			for {
				call, err := trap.Wait(fwdCtx)
				if err != nil {
					return
				}
				if call.Release(fwdCtx) != nil {
					return
				}
				rig.holds <- call.Duration
			}
		}()
		t.Cleanup(func() { stop(); <-done; trap.Close() })
	}
	rig.b.flowLocked().testMax = window
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatalf("os.Pipe() = %v", err)
	}
	rig.w = w
	done := make(chan struct{}, 1)
	rig.pu = &pump{r: r, dst: rig.b, clock: mClock, activity: make(chan struct{}, 1), done: done}
	go rig.pu.run() // ends at EOF (w closed) or when stopped; joined below
	t.Cleanup(func() {
		_ = w.Close()
		// Not ctx: the test's deferred cancel ran already.
		end, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		select {
		case <-done:
		case <-end.Done():
			t.Errorf("pump did not end: %v", end.Err())
		}
		_ = r.Close()
	})
	return rig
}

// write puts p in the pipe.
func (rig *pumpRig) write(t *testing.T, p []byte) {
	t.Helper()
	if _, err := rig.w.Write(p); err != nil {
		t.Fatalf("write to the pipe: %v", err)
	}
}

// waitLen spins until the buffer holds n bytes.
func (rig *pumpRig) waitLen(ctx context.Context, t *testing.T, n int64) {
	t.Helper()
	spinUntil(ctx, t, "the pump writing", func() bool { return rig.b.Len() == n })
}

// held waits for the pump's next wait for its followers and checks its
// bound.
func (rig *pumpRig) held(ctx context.Context, t *testing.T, want time.Duration) {
	t.Helper()
	select {
	case d := <-rig.holds:
		if d != want {
			t.Errorf("the pump waits %v for its followers; want %v", d, want)
		}
	case <-ctx.Done():
		t.Fatalf("the pump did not wait for its followers: %v", ctx.Err())
	}
}

var testStream = []byte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!?")

// TestPumpHoldsForFollower pins the pump's hold (design section 20) through
// a head of 4, a tail of 8 and a window of 16: a registered follower that
// keeps up makes the pump wait before it writes over its unread bytes, so
// that it reads 64 bytes put in the pipe at once without a loss; the hold
// ends when it reads, when it closes, when the drain stops the pump, and
// MaxHold after its wake when it does not read (once: it is not held for
// again until a read of it reaches the end). A follower with MaxHold < 0
// never holds the pump. Stats().Held counts the pump's wait.
func TestPumpHoldsForFollower(t *testing.T) {
	t.Parallel()
	for _, release := range []string{"reads", "never-reads", "closes", "drain-stops", "regains"} {
		t.Run(release, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			rig := newPumpRig(ctx, t, 16)
			f := mustFollow(t, rig.b, 0, FollowOptions{})
			rig.write(t, testStream)
			rig.held(ctx, t, DefaultFollowHold)
			if got := rig.b.Len(); got != 16 {
				t.Fatalf("the pump wrote %d bytes past an unread follower; want 16 (its window)", got)
			}
			switch release {
			case "reads":
				var got []byte
				buf := make([]byte, 12)
				for len(got) < len(testStream) {
					c, err := f.Read(ctx, buf)
					if err != nil || c.Lost != 0 {
						t.Fatalf("Read() = %+v, %v; want bytes, nil", c, err)
					}
					got = append(got, c.Data...)
				}
				if !bytes.Equal(got, testStream) {
					t.Errorf("the follower read %q; want %q", got, testStream)
				}
				if st := f.Stats(); st.Cursor != 64 || st.Lost != 0 || st.Held != 0 {
					t.Errorf("Stats() = %+v; want cursor 64, nothing lost or held (the clock stood)", st)
				}
			case "never-reads", "regains":
				rig.clock.Advance(DefaultFollowHold - time.Nanosecond).MustWait(ctx)
				if got := rig.b.Len(); got != 16 {
					t.Errorf("before MaxHold: the pump wrote %d bytes; want 16", got)
				}
				rig.clock.Advance(time.Nanosecond).MustWait(ctx)
				rig.waitLen(ctx, t, 64)
				if st := f.Stats(); st.Held != DefaultFollowHold || st.Cursor != 0 {
					t.Errorf("Stats() = %+v; want held %v, cursor 0", st, DefaultFollowHold)
				}
				// At most one MaxHold: the pump writes on at once.
				rig.write(t, testStream)
				rig.waitLen(ctx, t, 128)
				if release == "never-reads" {
					break
				}
				// A read short of the end does not bring the hold back.
				c, err := f.Read(ctx, make([]byte, 4))
				if err != nil || c.Lost != 0 || string(c.Data) != "abcd" {
					t.Fatalf("Read(4) = %+v, %v; want %q", c, err, "abcd")
				}
				rig.write(t, testStream)
				rig.waitLen(ctx, t, 192)
				// One that reaches the end does.
				c, err = f.Read(ctx, make([]byte, 256))
				if err != nil || c.Next != 192 || c.Lost == 0 {
					t.Fatalf("Read(256) = %+v, %v; want bytes lost, then to the end", c, err)
				}
				rig.write(t, testStream)
				rig.held(ctx, t, DefaultFollowHold)
				if got := rig.b.Len(); got != 192+16 {
					t.Errorf("held again: the pump wrote %d bytes; want %d", got, 192+16)
				}
				_ = f.Close()
				rig.waitLen(ctx, t, 256)
			case "closes":
				_ = f.Close()
				rig.waitLen(ctx, t, 64)
				if _, err := f.Read(ctx, make([]byte, 1)); !errors.Is(err, ErrClosed) {
					t.Errorf("Read after Close = %v; want ErrClosed", err)
				}
			case "drain-stops":
				rig.pu.stop()
				if !stopTakesPipe {
					return // Windows: stop closes the pipe
				}
				rig.waitLen(ctx, t, 64)
			}
		})
	}
}

// TestPumpNeverHoldsFor pins who the pump does not wait for: a follower
// with MaxHold < 0, one registered behind the end (until a read of it
// reaches the end), and pollers, waiting or not.
func TestPumpNeverHoldsFor(t *testing.T) {
	t.Parallel()
	for _, who := range []string{"negative-hold", "behind", "pollers"} {
		t.Run(who, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			rig := newPumpRig(ctx, t, 16)
			switch who {
			case "negative-hold":
				mustFollow(t, rig.b, 0, FollowOptions{MaxHold: -1})
			case "behind":
				_, _ = rig.b.Write([]byte("xyz"))
				mustFollow(t, rig.b, 0, FollowOptions{})
			case "pollers":
				_ = rig.b.ReadSince(0, 0)
				waitc := waitBlocked(ctx, ctx, t, rig.b, 0)
				defer func() { <-waitc }()
			}
			start := rig.b.Len()
			for range 4 {
				rig.write(t, testStream)
				start += int64(len(testStream))
				rig.waitLen(ctx, t, start)
			}
		})
	}
}

// TestHoldsRunAtOnce pins that the holds of several followers run at the
// same time: two followers woken by one write that never read, with holds
// of 5 and 10 ms, hold the pump 10 ms in all, not 15.
func TestHoldsRunAtOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	rig := newPumpRig(ctx, t, 16)
	a := mustFollow(t, rig.b, 0, FollowOptions{MaxHold: 5 * time.Millisecond})
	b := mustFollow(t, rig.b, 0, FollowOptions{MaxHold: 10 * time.Millisecond})
	rig.write(t, testStream)
	rig.held(ctx, t, 5*time.Millisecond)
	rig.clock.Advance(5 * time.Millisecond).MustWait(ctx)
	rig.held(ctx, t, 5*time.Millisecond) // b's bound, from the same wake
	rig.clock.Advance(5 * time.Millisecond).MustWait(ctx)
	rig.waitLen(ctx, t, 64)
	if sa, sb := a.Stats(), b.Stats(); sa.Held != 5*time.Millisecond || sb.Held != 10*time.Millisecond {
		t.Errorf("Held = %v and %v; want 5ms and 10ms", sa.Held, sb.Held)
	}
}

// TestFollowerRead pins Read's contract on a buffer: bytes from the
// cursor, Lost for what left the window, io.EOF with Chunk.EOF at the end
// of a finished stream, ctx's end, ErrInvalid for an empty buf, ErrClosed
// after Close, and Close ending a blocked Read at once.
func TestFollowerRead(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b := NewHeadTailBuffer(4, 8, 0)
	_, _ = b.Write([]byte("0123456789abcdefghij"))
	f := mustFollow(t, b, 0, FollowOptions{})
	buf := make([]byte, 64)
	if _, err := f.Read(ctx, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("Read(nil) = %v; want ErrInvalid", err)
	}
	if c, err := f.Read(ctx, buf); err != nil || string(c.Data) != "0123" {
		t.Errorf("Read() = %+v, %v; want the head", c, err)
	}
	if c, err := f.Read(ctx, buf); err != nil || c.Lost != 8 || string(c.Data) != "cdefghij" {
		t.Errorf("Read() = %+v, %v; want 8 lost, then the tail", c, err)
	}
	short, stop := context.WithCancel(ctx)
	stop()
	if _, err := f.Read(short, buf); !errors.Is(err, context.Canceled) {
		t.Errorf("Read(canceled ctx) at the end = %v; want context.Canceled", err)
	}
	// A blocked Read returns what comes, then io.EOF at the end.
	read := make(chan error, 1)
	go func() {
		c, err := f.Read(ctx, buf)
		if err == nil && string(c.Data) != "k" {
			err = errors.New("read " + string(c.Data))
		}
		read <- err
	}()
	_, _ = b.Write([]byte("k"))
	if err := <-read; err != nil {
		t.Errorf("blocked Read() = %v; want %q", err, "k")
	}
	b.Finish()
	if c, err := f.Read(ctx, buf); err != io.EOF || !c.EOF {
		t.Errorf("Read() at the end of a finished stream = %+v, %v; want EOF, io.EOF", c, err)
	}
	if st := f.Stats(); st.Cursor != 21 || st.Lost != 8 {
		t.Errorf("Stats() = %+v; want cursor 21, lost 8", st)
	}

	// Close ends a blocked Read at once.
	live := NewHeadTailBuffer(4, 8, 0)
	g := mustFollow(t, live, -1, FollowOptions{})
	go func() {
		_, err := g.Read(ctx, buf)
		read <- err
	}()
	spinUntil(ctx, t, "Read blocking", func() bool { return pumpTestLocked(live, func() bool { return live.waitc != nil }) })
	_ = g.Close()
	if err := <-read; !errors.Is(err, ErrClosed) {
		t.Errorf("blocked Read across Close = %v; want ErrClosed", err)
	}
	if err := g.Close(); err != nil {
		t.Errorf("second Close() = %v; want nil", err)
	}
}

// TestFollowerReadsFinishedWindow pins the reads of what a finished
// stream's window holds, which copy from the ring without the buffer's
// lock (follower.rest): in small and large pieces, across the ring's
// wrap, two followers at once, Stats on the way and from another
// goroutine meanwhile, and ErrClosed for a Read after Close in the middle
// of it.
func TestFollowerReadsFinishedWindow(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	data := make([]byte, 300_001)
	for i := range data {
		data[i] = byte(i % 251)
	}
	b := NewHeadTailBuffer(4, 8, 0)
	opts := FollowOptions{Window: minFollowWindow}
	small, large := mustFollow(t, b, 0, opts), mustFollow(t, b, 0, opts)
	for p := data; len(p) > 0; { // odd pieces, so that the ring wraps
		n := min(len(p), 7_919)
		_, _ = b.Write(p[:n])
		p = p[n:]
	}
	b.Finish()
	pumpTestLocked(b, func() bool {
		if b.flow.windowPos == 0 {
			t.Errorf("window starts at its ring's start; the test wants a wrapped ring")
		}
		return true
	})
	windowStart := int64(len(data) - minFollowWindow)
	read := func(f *Follower, size int) {
		// Stats from another goroutine sees the cursor only move forward.
		done, watched := make(chan struct{}), make(chan error, 1)
		go func() { // ends when read returns (done)
			var last int64
			for {
				select {
				case <-done:
					watched <- nil
					return
				default:
				}
				c := f.Stats().Cursor
				if c < last || c > int64(len(data)) {
					watched <- fmt.Errorf("Stats().Cursor %d after %d; want it between that and %d", c, last, len(data))
					return
				}
				last = c
			}
		}()
		defer func() {
			close(done)
			if err := <-watched; err != nil {
				t.Error(err)
			}
		}()
		buf := make([]byte, size)
		c, err := f.Read(ctx, buf)
		if err != nil || string(c.Data) != string(data[:4]) {
			t.Fatalf("first Read(%d) = %+v, %v; want the head", size, c, err)
		}
		c, err = f.Read(ctx, buf)
		if err != nil || c.Lost != windowStart-4 || len(c.Data) == 0 || c.Data[0] != data[windowStart] {
			t.Fatalf("second Read(%d) = lost %d, %d bytes, %v; want %d lost, then the window", size, c.Lost, len(c.Data), err, windowStart-4)
		}
		at := windowStart + int64(len(c.Data))
		for {
			c, err = f.Read(ctx, buf)
			if string(c.Data) != string(data[at:at+int64(len(c.Data))]) {
				t.Fatalf("Read(%d) at %d: wrong bytes", size, at)
			}
			at += int64(len(c.Data))
			if st := f.Stats(); st.Cursor != at || st.Lost != windowStart-4 {
				t.Fatalf("Stats() = %+v after reading to %d; want that cursor, %d lost", st, at, windowStart-4)
			}
			if err != nil {
				break
			}
		}
		if err != io.EOF || at != int64(len(data)) {
			t.Errorf("Read(%d) ended at %d with %v; want io.EOF at %d", size, at, err, len(data))
		}
	}
	read(small, 10)
	read(large, 3_000)

	// Close in the middle of the window: the next Read is ErrClosed.
	closed := mustFollow(t, b, windowStart, FollowOptions{})
	buf := make([]byte, 10)
	if c, err := closed.Read(ctx, buf); err != nil || string(c.Data) != string(data[windowStart:windowStart+10]) {
		t.Fatalf("Read() from the window's start = %+v, %v; want its first 10 bytes", c, err)
	}
	if closed.s.rest.Load() == nil {
		t.Fatalf("a follower reading a finished window keeps no piece of it; the test wants one")
	}
	_ = closed.Close()
	if closed.s.rest.Load() != nil {
		t.Errorf("a closed follower still holds its piece of the window; want it dropped, so that the window is freed")
	}
	if _, err := closed.Read(ctx, buf); !errors.Is(err, ErrClosed) {
		t.Errorf("Read() after Close, bytes left in the window = %v; want ErrClosed", err)
	}
}

// TestFollowOptions pins Follow's bad input: it is ErrInvalid and
// registers nothing.
func TestFollowOptions(t *testing.T) {
	t.Parallel()
	b := NewHeadTailBuffer(4, 8, 0)
	_, _ = b.Write([]byte("abc"))
	for _, tc := range []struct {
		from int64
		opts FollowOptions
	}{
		{4, FollowOptions{}},
		{0, FollowOptions{Window: -1}},
		{0, FollowOptions{Window: MaxFollowWindow + 1}},
		{0, FollowOptions{MaxHold: MaxFollowHold + 1}},
	} {
		if _, err := b.follow(nil, tc.from, tc.opts); !errors.Is(err, ErrInvalid) {
			t.Errorf("follow(%d, %+v) = %v; want ErrInvalid", tc.from, tc.opts, err)
		}
	}
	if b.flow != nil && len(b.flow.followers) != 0 {
		t.Errorf("bad follows registered %d followers; want none", len(b.flow.followers))
	}
	for _, tc := range []struct {
		from, want int64
	}{{-1, 3}, {0, 0}, {3, 3}} {
		f := mustFollow(t, b, tc.from, FollowOptions{Window: 1, MaxHold: MaxFollowHold})
		if got := f.Stats().Cursor; got != tc.want {
			t.Errorf("follow(%d).Stats().Cursor = %d; want %d", tc.from, got, tc.want)
		}
		if f.s.window != minFollowWindow {
			t.Errorf("Window 1 became %d; want %d", f.s.window, minFollowWindow)
		}
	}
}

// TestSharedWindow pins the one window of a buffer (design section 20):
// kept while a WaitOutput waits or a follower is open, read by every
// cursor read, sized by the largest window asked (1 MiB for waiters), and
// freed when nobody waits or follows; once finished, cursor reads see
// head and tail alone, and open followers still read their window.
func TestSharedWindow(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b := NewHeadTailBuffer(4, 8, 0)
	b.sharePolls(&pollSignal{})
	windowLen := func() (n, size int) {
		pumpTestLocked(b, func() bool {
			if b.flow != nil {
				n, size = b.flow.windowLen, len(b.flow.window)
			}
			return true
		})
		return n, size
	}
	_, _ = b.Write(bytes.Repeat([]byte("x"), 100))
	if n, _ := windowLen(); n != 0 {
		t.Fatalf("window of %d bytes with nobody waiting or following; want none", n)
	}
	// A waiter: the window keeps what comes, for every cursor read.
	waited := waitBlocked(ctx, ctx, t, b, 100)
	_, _ = b.Write(testStream)
	if err := <-waited; err != nil {
		t.Fatalf("WaitOutput() = %v", err)
	}
	if c := b.ReadSince(100, 0); c.Lost != 0 || !bytes.Equal(c.Data, testStream) {
		t.Errorf("ReadSince(100) after a wait = %+v; want the 64 bytes, none lost", c)
	}
	if n, _ := windowLen(); n != 64 {
		t.Errorf("window holds %d bytes after the waiter's wake; want 64", n)
	}
	// As of the wait's return (the machine may pause the test longer than
	// waiterKeep here).
	if max := pumpTestLocked(b, func() bool { return b.windowMaxLocked(b.flow.lastWait) == waiterWindow }); !max {
		t.Errorf("the waiters' window is not %d bytes", waiterWindow)
	}
	// Long after the last wait, and with no follower: freed.
	pumpTestLocked(b, func() bool { b.flow.lastWait = time.Since(paceEpoch) - waiterKeep; return true })
	_, _ = b.Write([]byte("y"))
	if n, size := windowLen(); n != 0 || size != 0 {
		t.Errorf("window of %d bytes (%d stored) once nobody waits; want none", n, size)
	}
	// A follower that closes: its window goes with it, at once.
	g := mustFollow(t, b, -1, FollowOptions{MaxHold: -1})
	_, _ = b.Write(testStream)
	if n, _ := windowLen(); n != 64 {
		t.Errorf("window holds %d bytes for an open follower behind by 64; want 64", n)
	}
	_ = g.Close()
	if n, size := windowLen(); n != 0 || size != 0 {
		t.Errorf("window of %d bytes (%d stored) once the only follower closed; want none", n, size)
	}
	// A follower: its window, from its cursor on.
	f := mustFollow(t, b, -1, FollowOptions{MaxHold: -1})
	_, _ = b.Write(testStream)
	if c := b.ReadSince(b.Len()-64, 0); c.Lost != 0 || len(c.Data) != 64 {
		t.Errorf("a poller's ReadSince in a follower's window = %+v; want 64 bytes", c)
	}
	b.Finish()
	if c := b.ReadSince(b.Len()-64, 0); c.Lost != 56 {
		t.Errorf("ReadSince of a finished buffer = %+v; want head and tail alone (56 lost)", c)
	}
	if c, err := f.Read(ctx, make([]byte, 128)); err != io.EOF || c.Lost != 0 || !bytes.Equal(c.Data, testStream) {
		t.Errorf("the follower's Read after Finish = %+v, %v; want its 64 bytes and io.EOF", c, err)
	}
	_ = f.Close()
	if n, size := windowLen(); n != 0 || size != 0 {
		t.Errorf("window of %d bytes (%d stored) after the last follower closed; want none", n, size)
	}
}

// TestFollowerMemory pins the heap an open follower costs: under 256
// bytes besides the shared window, also once it read in small pieces.
func TestFollowerMemory(t *testing.T) {
	// Not parallel: it reads the process's heap.
	const n = 1000
	b := NewHeadTailBuffer(4, 8, 0)
	_, _ = b.Write([]byte("0123456789"))
	b.Finish()
	fs := make([]*Follower, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	buf := make([]byte, 10)
	for i := range fs {
		f, err := b.follow(nil, 0, FollowOptions{})
		if err != nil {
			t.Fatalf("follow() = %v", err)
		}
		fs[i] = f
		// Half of them read in small pieces up to the end: a follower
		// that read keeps nothing per read.
		for i%2 == 0 && f.Stats().Cursor < b.Len() {
			if _, err := f.Read(t.Context(), buf[:3]); err != nil && !errors.Is(err, io.EOF) {
				t.Fatalf("Read() = %v", err)
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	for _, f := range fs {
		_ = f.Close()
	}
	if per >= 256 {
		t.Errorf("an open follower costs %d bytes of heap; want < 256", per)
	}
}

// TestFollowerClosedAsGarbage pins that a follower nobody closes is
// closed once it is garbage: the buffer lists it no more.
func TestFollowerClosedAsGarbage(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b := NewHeadTailBuffer(4, 8, 0)
	func() {
		if _, err := b.follow(nil, 0, FollowOptions{}); err != nil {
			t.Fatalf("follow() = %v", err)
		}
	}()
	spinUntil(ctx, t, "the lost follower closed", func() bool {
		runtime.GC()
		return pumpTestLocked(b, func() bool { return len(b.flow.followers) == 0 })
	})
}

// TestHeadTailBufferPolled pins the signal the pump tries its pipe on:
// Output returning an unchanged rendering sets it, takePolled reports and
// clears it, and an Output that renders anew does not set it.
func TestHeadTailBufferPolled(t *testing.T) {
	t.Parallel()
	b := NewHeadTailBuffer(4, 4, 0)
	_, _ = b.Write([]byte("abc"))
	_ = b.Output() // renders
	if b.takePolled() {
		t.Errorf("takePolled() after a first Output = true; want false")
	}
	_ = b.Output() // unchanged
	if !b.takePolled() {
		t.Errorf("takePolled() after an unchanged Output = false; want true")
	}
	if b.takePolled() {
		t.Errorf("second takePolled() = true; want false")
	}
	_, _ = b.Write([]byte("d"))
	_ = b.Output() // renders anew
	if b.takePolled() {
		t.Errorf("takePolled() after Write + Output = true; want false")
	}
}

// TestPollSignalPerManager pins that the signal a pump tries its pipe on
// when another record is polled is its Manager's alone: an unchanged
// Output of a buffer sets the signal of the buffers that share its
// Manager's, and not that of a buffer of another Manager or of a buffer
// of NewHeadTailBuffer.
func TestPollSignalPerManager(t *testing.T) {
	t.Parallel()
	var mine, other pollSignal
	polled, peer, stranger, alone := NewHeadTailBuffer(4, 4, 0), NewHeadTailBuffer(4, 4, 0), NewHeadTailBuffer(4, 4, 0), NewHeadTailBuffer(4, 4, 0)
	polled.sharePolls(&mine)
	peer.sharePolls(&mine)
	stranger.sharePolls(&other)
	_, _ = polled.Write([]byte("abc"))
	_ = polled.Output() // renders
	_ = polled.Output() // unchanged
	if !peer.polledLately() || !peer.takePeersPolled() {
		t.Errorf("a buffer of the same Manager: polledLately, takePeersPolled = false after an unchanged Output of another; want true")
	}
	if peer.takePeersPolled() {
		t.Errorf("second takePeersPolled() = true; want false")
	}
	if stranger.polledLately() || stranger.takePeersPolled() {
		t.Errorf("a buffer of another Manager sees the poll of this Manager's buffer; want not")
	}
	if alone.polledLately() || alone.takePeersPolled() {
		t.Errorf("a buffer of NewHeadTailBuffer sees the poll of a Manager's buffer; want not")
	}
}

// TestOutputWaitsForRenderingUnderWay pins that Output does not render
// bytes another Output rendered or is rendering: it returns the newest
// rendering (once made) when it covers every byte written before the
// call, and renders itself when that one is older.
func TestOutputWaitsForRenderingUnderWay(t *testing.T) {
	t.Parallel()
	b := NewHeadTailBuffer(4, 4, 0)
	_, _ = b.Write([]byte("abc"))
	// A rendering of more bytes than written so far, as a caller that
	// copied after a later write leaves it, with a text no rendering of
	// the buffer makes; made already, so that the call below cannot hang.
	b.rendered.Store(&rendering{at: 5, out: Output{Text: "under way"}})
	if out := b.Output(); out.Text != "under way" {
		t.Errorf("Output() = %q with a rendering of every byte under way; want that one, %q", out.Text, "under way")
	}
	// Newer bytes than it covers: Output renders.
	_, _ = b.Write([]byte("def"))
	if out := b.Output(); out.Text != "abcdef" {
		t.Errorf("Output() after writes past the rendering under way = %q; want %q", out.Text, "abcdef")
	}
}

// BenchmarkFollowerReadFinished reads what a finished stream's window
// holds (1 MiB past a default head and tail) through a follower, in
// reads of 10 bytes and of 64 KiB: what a small reader has left to do
// once the record ended.
func BenchmarkFollowerReadFinished(b *testing.B) {
	data := bytes.Repeat([]byte("0123456789abcdef"), (1<<20+DefaultHeadBytes+DefaultTailBytes)/16)
	for _, size := range []int{10, 64 << 10} {
		b.Run(fmt.Sprintf("read-%d", size), func(b *testing.B) {
			buf := make([]byte, size)
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				hb := NewHeadTailBuffer(0, 0, 0)
				f, err := hb.follow(nil, 0, FollowOptions{})
				if err != nil {
					b.Fatal(err)
				}
				_, _ = hb.Write(data)
				hb.Finish()
				var got int64
				for {
					c, err := f.Read(b.Context(), buf)
					got += int64(len(c.Data)) + c.Lost
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				if got != int64(len(data)) {
					b.Fatalf("read %d bytes; want %d", got, len(data))
				}
				_ = f.Close()
			}
		})
	}
}
