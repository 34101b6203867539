package proc

import (
	"bytes"
	"context"
	"math"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/coder/quartz"
)

// TestPumpFollowerFlowControl pins the pump's flow control (design section
// 10): a pump does not overwrite bytes a follower woken by its write has
// not read, so a follower that reads each wake's bytes at once through an
// 8-byte tail loses nothing of 64 bytes that sit in the pipe at once; and
// the pump stops holding back when the drain stops it, when the follower
// reads in pieces that do not reach the end, or once followBound (on the
// clock) has passed since the follower's wake without it reaching the
// end. A follower that reaches the end starts a new bound at its next
// wake.
func TestPumpFollowerFlowControl(t *testing.T) {
	t.Parallel()
	stream := []byte("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!?")

	for _, release := range []string{"follower-reads", "follower-gone", "small-reads", "caught-up", "drain-stops"} {
		t.Run(release, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			mClock := quartz.NewMock(t)
			trap := mClock.Trap().NewTimer("pump", "follower")
			defer trap.Close()
			var resets *quartz.Trap
			if release == "caught-up" {
				resets = mClock.Trap().TimerReset("pump", "follower")
				defer resets.Close()
			}

			b := NewHeadTailBuffer(4, 8, 0)
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatalf("os.Pipe() = %v", err)
			}
			done := make(chan struct{}, 1)
			pu := &pump{r: r, dst: b, clock: mClock, activity: make(chan struct{}, 1), done: done}
			go pu.run() // ends at EOF (w closed) or when stopped; joined below
			defer func() {
				_ = w.Close()
				select {
				case <-done:
				case <-ctx.Done():
					t.Errorf("pump did not end: %v", ctx.Err())
				}
				_ = r.Close()
			}()

			// A follower: it read to the end (0), then waits there. Its
			// buffer takes all that head and tail hold at once.
			buf := make([]byte, 12)
			if c := b.ReadSinceInto(0, buf); c.Next != 0 || c.End != 0 {
				t.Fatalf("ReadSinceInto(0) of an empty buffer = %+v", c)
			}
			// No follow window: the pump runs no further ahead than head
			// and tail hold (TestFollowWindow covers the window).
			pumpTestLocked(b, func() bool { b.flow.windowMax = 0; return true })
			errc := make(chan error, 1)
			go func() { errc <- b.WaitOutput(ctx, 0) }()
			spinUntil(ctx, t, "follower waiting", func() bool {
				return pumpTestLocked(b, func() bool { return b.flow != nil && len(b.flow.waiting) == 1 })
			})
			if _, err := w.Write(stream); err != nil {
				t.Fatalf("write to the pipe: %v", err)
			}
			if err := <-errc; err != nil {
				t.Fatalf("WaitOutput(ctx, 0) = %v; want nil", err)
			}
			// The pump writes what head and tail hold of the follower's
			// unread bytes (4 + 8), then waits for room, with a timer.
			call := trap.MustWait(ctx)
			call.MustRelease(ctx)
			if call.Duration != followBound {
				t.Errorf("follower timer set for %v; want %v", call.Duration, followBound)
			}
			if got := b.Len(); got != 12 {
				t.Fatalf("pump wrote %d bytes past an unread follower; want 12 (head 4 + tail 8)", got)
			}

			switch release {
			case "follower-reads":
				var got []byte
				var lost int64
				for cursor := int64(0); cursor < int64(len(stream)); {
					c := b.ReadSinceInto(cursor, buf)
					got = append(got, c.Data...)
					lost += c.Lost
					cursor = c.Next
					if c.Next >= c.End && cursor < int64(len(stream)) {
						if err := b.WaitOutput(ctx, cursor); err != nil {
							t.Fatalf("WaitOutput(ctx, %d) = %v; want nil", cursor, err)
						}
					}
				}
				if lost != 0 || !bytes.Equal(got, stream) {
					t.Errorf("follower read %q, lost %d; want %q, lost 0", got, lost, stream)
				}
			case "follower-gone":
				mClock.Advance(followBound - time.Nanosecond).MustWait(ctx)
				if got := b.Len(); got != 12 {
					t.Errorf("before followBound: pump wrote %d bytes; want 12", got)
				}
				mClock.Advance(time.Nanosecond).MustWait(ctx)
				spinUntil(ctx, t, "pump writing all", func() bool { return b.Len() == int64(len(stream)) })
				if c := b.ReadSinceInto(4, make([]byte, 64)); c.Lost == 0 {
					t.Errorf("gone follower: ReadSinceInto(4) = %+v; want bytes lost", c)
				}
			case "small-reads":
				// A read in pieces smaller than the follower's reads
				// (another reader's, or the follower's own in smaller
				// pieces: leases carry no owner) leaves its lease; the
				// pump writes no more until followBound, then all.
				if c := b.ReadSinceInto(0, make([]byte, 6)); c.Next != 6 || c.Next >= c.End {
					t.Fatalf("ReadSinceInto(0) = %+v; want 6 bytes, not the end", c)
				}
				mClock.Advance(followBound - time.Nanosecond).MustWait(ctx)
				if got := b.Len(); got != 12 {
					t.Errorf("after a smaller read in pieces, before followBound: pump wrote %d bytes; want 12", got)
				}
				mClock.Advance(time.Nanosecond).MustWait(ctx)
				spinUntil(ctx, t, "pump writing all", func() bool { return b.Len() == int64(len(stream)) })
				if c := b.ReadSinceInto(6, buf); c.Lost == 0 {
					t.Errorf("follower reading in pieces: ReadSinceInto(6) = %+v; want bytes lost", c)
				}
			case "caught-up":
				// A read that reaches the end ends the bound; the next one
				// runs in full from the next wake.
				mClock.Advance(followBound / 2).MustWait(ctx)
				if c := b.ReadSinceInto(0, make([]byte, 64)); c.Next != 12 || c.End != 12 {
					t.Fatalf("ReadSinceInto(0) = %+v; want to the end, 12", c)
				}
				reset := resets.MustWait(ctx)
				reset.MustRelease(ctx)
				if reset.Duration != followBound {
					t.Errorf("after the follower caught up, the pump waits %v; want a full bound, %v", reset.Duration, followBound)
				}
				if got := b.Len(); got != 20 {
					t.Errorf("after the follower caught up: pump wrote %d bytes; want 20", got)
				}
				mClock.Advance(followBound).MustWait(ctx)
				spinUntil(ctx, t, "pump writing all", func() bool { return b.Len() == int64(len(stream)) })
			case "drain-stops":
				pu.stop()
				if !stopTakesPipe {
					// Windows: stop closes the pipe (no final pass); the
					// pump writes what it holds and ends (joined above).
					return
				}
				spinUntil(ctx, t, "pump writing all", func() bool { return b.Len() == int64(len(stream)) })
			}
		})
	}
}

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

// wokenAt4 has a follower wait at 4 in b (waitBlocked), writes p, and
// returns once the write woke it.
func wokenAt4(ctx context.Context, t *testing.T, b *HeadTailBuffer, p []byte) {
	t.Helper()
	errc := waitBlocked(ctx, ctx, t, b, 4)
	_, _ = b.Write(p)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// readTo4 returns a buffer (head 4, tail 8) holding "0123" that a reader
// per entry of reads read to the end with a buffer of that many bytes,
// with no lease: their classes are in caught at 4.
func readTo4(reads ...int) *HeadTailBuffer {
	b := NewHeadTailBuffer(4, 8, 0)
	_, _ = b.Write([]byte("0123"))
	for _, n := range reads {
		b.ReadSinceInto(0, make([]byte, n))
	}
	return b
}

// followedAt4 returns a buffer (head 4, tail 8) holding "0123" that a
// follower reading followerRead bytes a call and a poller reading 64
// bytes a call both read to the end, with no lease: the poller's class is
// in caught for the follower's split.
func followedAt4(followerRead int) *HeadTailBuffer { return readTo4(followerRead, 64) }

// TestLeaseMovesWithReadFromStart pins that a follower which reads
// everything from the start each time (ReadSince(0), then WaitOutput at
// the end: the simplest follower loop) releases its lease as it reads
// past it, so the pump does not wait a follower grace for every tail's
// worth of output.
func TestLeaseMovesWithReadFromStart(t *testing.T) {
	t.Parallel()
	b := NewHeadTailBuffer(4, 8, 0)
	_, _ = b.Write([]byte("0123"))
	if c := b.ReadSince(0, 0); c.Next != 4 || c.End != 4 {
		t.Fatalf("ReadSince(0) = %+v; want to the end, 4", c)
	}
	// The follower waits at the end; the write that wakes it leases 4.
	b.mu.Lock()
	b.flow.waiting = append(b.flow.waiting, lease{cursor: 4})
	b.mu.Unlock()
	_, _ = b.Write([]byte("456789ab")) // all the tail holds of it
	if n := b.room(followWindow); n != followWindow-8 {
		t.Fatalf("room(%d) with the follower's 8 bytes unread = %d; want %d", followWindow, n, followWindow-8)
	}
	c := b.ReadSince(0, 0) // from the start, not from the lease's cursor
	if c.Next != 12 {
		t.Fatalf("ReadSince(0) = %+v; want it to reach 12", c)
	}
	if n := b.room(followWindow); n != followWindow {
		t.Errorf("room(%d) after the follower read past its lease from the start = %d; want all", followWindow, n)
	}
}

// waitingAt4 returns a buffer of head 4 and tail bytes holding "0123",
// read to its end (a follower's read: no limit), with n followers waiting
// at 4: the next write wakes them, leasing 4 n times.
func waitingAt4(t *testing.T, tail, n int) *HeadTailBuffer {
	t.Helper()
	b := NewHeadTailBuffer(4, tail, 0)
	_, _ = b.Write([]byte("0123"))
	if c := b.ReadSince(0, 0); c.Next != 4 {
		t.Fatalf("ReadSince(0) = %+v; want to the end, 4", c)
	}
	b.mu.Lock()
	for range n {
		b.flow.waiting = append(b.flow.waiting, lease{cursor: 4})
	}
	b.mu.Unlock()
	return b
}

// TestFollowersAtOneCursor pins that followers woken at one cursor keep
// a lease each as they read: a read from the cursor moves the lease there,
// not one a faster follower already moved past it (issue 22: the slower
// follower's lease was left behind and held the pump until its bound
// passed, and the follower then lost output).
func TestFollowersAtOneCursor(t *testing.T) {
	t.Parallel()
	// Two followers wait at the end; the write that wakes them leases 4
	// twice.
	b := waitingAt4(t, 8, 2)
	_, _ = b.Write([]byte("456789abcdefghij"))
	if c := b.ReadSinceInto(4, make([]byte, 8)); c.Next != 12 || string(c.Data) != "456789ab" {
		t.Fatalf("first follower's ReadSinceInto(4, 8 bytes) = %+v; want 456789ab up to 12", c)
	}
	if c := b.ReadSinceInto(4, make([]byte, 16)); c.Next != 20 || c.Lost != 0 {
		t.Fatalf("second follower's ReadSinceInto(4, 16 bytes) = %+v; want all 16 up to 20", c)
	}
	// The first follower has 8 bytes left to read, from 12.
	if n := b.room(followWindow); n != followWindow-8 {
		t.Errorf("room(%d) with the first follower at 12 of 20 = %d; want %d", followWindow, n, followWindow-8)
	}
	if c := b.ReadSinceInto(12, make([]byte, 8)); c.Next != 20 || string(c.Data) != "cdefghij" {
		t.Fatalf("first follower's ReadSinceInto(12, 8 bytes) = %+v; want cdefghij up to 20", c)
	}
	if n := b.room(followWindow); n != followWindow {
		t.Errorf("room(%d) with both followers at the end = %d; want all", followWindow, n)
	}
}

// TestLeaseOutlivesOthersReads pins that a read of another reader neither
// ends nor moves a follower's lease when it skips the leased bytes (Lost)
// to the tail, whatever it reads after them, nor when it reads some of
// them in pieces from before the lease's cursor, nor when it skips to the
// lease's cursor and reads on (issue 22: the lease was ended or moved,
// and the follower lost output until its reads reached the end again),
// and that such a read sends a pump waiting for room no token.
func TestLeaseOutlivesOthersReads(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		reader int64 // the other reader's cursor
		size   int   // and its buffer's
		lease  int   // the follower's read before it, from 4
	}{
		// From 5 (in the omitted middle), past the lease at 8, to the
		// tail's start, 16.
		{"skipping in pieces", 5, 2, 4},
		{"skipping to the end", 5, 4, 4},
		// Skips 15 (not in the tail), reads 16 and 17 from the lease at 16.
		{"in pieces", 15, 2, 12},
		// Skips 15, reads from the lease at 16 to the end: it has the
		// bytes, the follower has not (found in review: the lease moved
		// to 20, and the follower lost the window's worth).
		{"skipping to the lease, to the end", 15, 64, 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := waitingAt4(t, 4, 1)
			_, _ = b.Write([]byte("456789abcdefghij")) // the tail holds 16 to 20
			leased := 4 + int64(tc.lease)
			if c := b.ReadSinceInto(4, make([]byte, tc.lease)); c.Next != leased {
				t.Fatalf("follower's ReadSinceInto(4, %d bytes) = %+v; want up to %d", tc.lease, c, leased)
			}
			want := followWindow - int(20-leased)
			if n := b.room(followWindow); n != want {
				t.Fatalf("room(%d) with the follower at %d of 20 = %d; want %d", followWindow, leased, n, want)
			}
			b.mu.Lock()
			roomc := make(chan struct{}, 1)
			b.flow.roomc = roomc
			b.mu.Unlock()
			if c := b.ReadSinceInto(tc.reader, make([]byte, tc.size)); c.Next <= leased {
				t.Fatalf("other reader's ReadSinceInto(%d, %d bytes) = %+v; want it past %d", tc.reader, tc.size, c, leased)
			}
			if n := b.room(followWindow); n != want {
				t.Errorf("room(%d) after another reader's read = %d; want %d (the follower's lease at %d)", followWindow, n, want, leased)
			}
			if len(roomc) != 0 {
				t.Errorf("another reader's read that left the lease alone signalled room: a pump waiting for it woke for nothing")
			}
		})
	}
}

// TestSmallReadLeavesFollowerLease pins that a reader that is never a
// follower (its reads could return fewer than followMinRead bytes, or
// the tail's size if less) neither ends nor moves the lease of a
// follower that reads more, at the same cursor: leases carry no owner,
// and found in review, a 4 KiB reader beside a 64 KiB follower of a
// 50 MB/s stream ended its lease at every wake, and the follower lost
// half the stream. The follower's own read still moves it.
func TestSmallReadLeavesFollowerLease(t *testing.T) {
	t.Parallel()
	const tail = 8
	b := waitingAt4(t, tail, 1)
	_, _ = b.Write([]byte("456789abcd")) // wakes the follower: a lease at 4; End 14
	if c := b.ReadSinceInto(4, make([]byte, tail)); c.Next != 12 {
		t.Fatalf("follower's ReadSinceInto(4, a tail's worth) = %+v; want up to 12", c)
	}
	want := followWindow - (14 - 12)
	if n := b.room(followWindow); n != want {
		t.Fatalf("room with the follower's lease at 12 of 14 = %d; want %d", n, want)
	}
	b.mu.Lock()
	roomc := make(chan struct{}, 1)
	b.flow.roomc = roomc
	b.mu.Unlock()
	for _, size := range []int{1, tail - 1} { // in pieces; then to the end
		c := b.ReadSinceInto(12, make([]byte, size))
		if n := b.room(followWindow); n != want || len(roomc) != 0 {
			t.Errorf("after a small reader's ReadSinceInto(12, %d bytes) = %+v: room %d, %d room tokens; want %d, none (the follower's lease at 12)", size, c, n, len(roomc), want)
		}
	}
	if c := b.ReadSinceInto(12, make([]byte, tail)); c.Next != 14 {
		t.Fatalf("follower's ReadSinceInto(12, a tail's worth) = %+v; want to the end, 14", c)
	}
	if n := b.room(followWindow); n != followWindow || len(roomc) != 1 {
		t.Errorf("after the follower read to the end: room %d, %d room tokens; want %d (its lease at the end), one", n, len(roomc), followWindow)
	}
}

// TestWaitTakesFollowerClass pins that the class of a follower's read
// reaches its lease through its wait even when the follower held no lease
// at that read (its first, or one after it lost the help): found in
// review, a 4 KiB reader that waited at the same cursor first got the
// follower's help as a lease any read took, and its first read ended it
// (the 64 KiB follower lost 1.5-7 MB of 197 MB at 50 MB/s). Whichever of
// them waits first, the small reader's read leaves the lease and the
// follower's moves it; two such followers at one cursor get a lease each,
// bytes already there or not.
func TestWaitTakesFollowerClass(t *testing.T) {
	t.Parallel()
	const tail = 8
	// held reports the cursor the pump may not drop bytes from, as the
	// room it has: only a lease at 4 leaves it less than followWindow.
	heldAt4 := func(b *HeadTailBuffer) bool { return b.room(followWindow) < followWindow }
	for _, tc := range []struct {
		name        string
		smallFirst  bool // the small reader waits before the follower
		twoFollower bool // a second follower instead of the small reader
		bytesThere  bool // the write comes before the waits
	}{
		{"small reader waits first, bytes there", true, false, true},
		{"small reader waits first", true, false, false},
		{"follower waits first", false, false, false},
		{"two followers, bytes there", true, true, true},
		{"two followers", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			b := NewHeadTailBuffer(4, tail, 0)
			_, _ = b.Write([]byte("0123"))
			if c := b.ReadSinceInto(0, make([]byte, 64)); c.Next != 4 {
				t.Fatalf("follower's ReadSinceInto(0, 64 bytes) = %+v; want to the end, 4", c)
			}
			other := 2 // the small reader's buffer
			if tc.twoFollower {
				other = 64
			}
			for cursor := int64(0); cursor < 4; {
				cursor = b.ReadSinceInto(cursor, make([]byte, other)).Next
			}
			errc := make(chan error, 2)
			wait := func(n int) {
				go func() { errc <- b.WaitOutput(ctx, 4) }() // returns at the write
				if !tc.bytesThere {
					spinUntil(ctx, t, "waiting", func() bool {
						return pumpTestLocked(b, func() bool { return int(b.waiters) == n })
					})
				} else if err := <-errc; err != nil {
					t.Fatalf("WaitOutput(ctx, 4) with bytes there = %v; want nil", err)
				}
			}
			if tc.bytesThere {
				_, _ = b.Write([]byte("4567"))
			}
			wait(1)
			wait(2)
			if !tc.bytesThere {
				_, _ = b.Write([]byte("4567"))
				for range 2 {
					if err := <-errc; err != nil {
						t.Fatalf("WaitOutput(ctx, 4) = %v; want nil", err)
					}
				}
			}
			if c := b.ReadSinceInto(4, make([]byte, other)); c.Next <= 4 {
				t.Fatalf("other reader's ReadSinceInto(4, %d bytes) = %+v; want bytes", other, c)
			}
			if !heldAt4(b) {
				t.Errorf("after the other reader's read from 4: no lease at 4; want the follower's left")
			}
			if c := b.ReadSinceInto(4, make([]byte, 64)); c.Next != 8 {
				t.Fatalf("follower's ReadSinceInto(4, 64 bytes) = %+v; want to the end, 8", c)
			}
			if heldAt4(b) {
				t.Errorf("after the follower read to the end: a lease at 4 still holds the pump")
			}
		})
	}
}

// TestLeaseClasses pins how reads of different sizes at one cursor tell
// their leases apart (readClass): with a tail larger than followMinRead,
// a reader of followMinRead bytes in pieces neither ends nor moves the
// lease of a follower of a tail's worth (found in review: it ended it);
// a follower that gives up its wait takes its own entry, not another's
// at its cursor; and reads from the end again, or from the start to the
// same end, leave the follower classes to take one and caughtMax at most.
func TestLeaseClasses(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	const tail = 4 * followMinRead
	b := waitingAt4(t, tail, 1)
	_, _ = b.Write([]byte("456789abcd")) // the follower's lease at 4; End 14
	if c := b.ReadSinceInto(4, make([]byte, tail)); c.Next != 14 {
		t.Fatalf("follower's ReadSinceInto(4, a tail's worth) = %+v; want to the end, 14", c)
	}
	_, _ = b.Write(make([]byte, 2*followMinRead))
	want := b.room(followWindow)
	if want == followWindow {
		t.Fatalf("room(%d) with the follower's lease at 14 of %d = all; want less", followWindow, b.Len())
	}
	if c := b.ReadSinceInto(14, make([]byte, followMinRead)); c.Next != 14+followMinRead {
		t.Fatalf("reader's ReadSinceInto(14, followMinRead) = %+v; want %d bytes", c, followMinRead)
	}
	if n := b.room(followWindow); n != want {
		t.Errorf("room after a followMinRead reader's read in pieces from the follower's cursor = %d; want %d (its lease left)", n, want)
	}

	// A small reader and a follower wait at the end; the small reader
	// gives up: the follower keeps its class.
	end := b.Len()
	if c := b.ReadSinceInto(14, make([]byte, tail)); c.Next != end {
		t.Fatalf("follower's ReadSinceInto(14, a tail's worth) = %+v; want to the end, %d", c, end)
	}
	errc := make(chan error, 2)
	smallCtx, giveUp := context.WithCancel(ctx)
	defer giveUp()
	for i, wctx := range []context.Context{ctx, smallCtx} {
		go func() { errc <- b.WaitOutput(wctx, end) }() // the follower's ends at the write, the other's at giveUp
		spinUntil(ctx, t, "waiting", func() bool {
			return pumpTestLocked(b, func() bool { return len(b.flow.waiting) == i+1 })
		})
	}
	giveUp()
	if err := <-errc; err == nil {
		t.Fatalf("the small reader's WaitOutput after its context ended = nil; want an error")
	}
	if !pumpTestLocked(b, func() bool { return len(b.flow.waiting) == 1 && b.flow.waiting[0].class == readTail }) {
		t.Errorf("after the small reader gave up its wait: waiting %+v; want the follower's, readTail", b.flow.waiting)
	}
	_, _ = b.Write([]byte("x"))
	if err := <-errc; err != nil {
		t.Fatalf("follower's WaitOutput = %v; want nil", err)
	}

	// Reads to the end with no lease: from the end again, one class at
	// most; from the start to the same end, one each, caughtMax at most.
	c := NewHeadTailBuffer(4, 8, 0)
	_, _ = c.Write([]byte("0123"))
	caught := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return int(c.flow.caught[readTail])
	}
	for range 3 {
		c.ReadSinceInto(4, make([]byte, 8))
	}
	if n := caught(); n != 1 {
		t.Errorf("three reads from the end: %d classes caught; want one", n)
	}
	c.ReadSinceInto(0, make([]byte, 8))
	for range 3 {
		c.ReadSinceInto(4, make([]byte, 8))
	}
	if n := caught(); n != 2 {
		t.Errorf("then a read from the start and three from the end: %d classes caught; want two", n)
	}
	for range 2 * caughtMax {
		c.ReadSinceInto(0, make([]byte, 8))
	}
	if n := caught(); n != caughtMax {
		t.Errorf("then %d reads from the start: %d caught; want caughtMax, %d", 2*caughtMax, n, caughtMax)
	}
}

// TestOneEntryPerWait pins that a wait makes one entry whatever other
// readers left at its cursor (no lease that holds the pump is left behind
// once they read): a follower holding a lease there claims it
// rather than a class a poller (64-byte reads that reach the end, never a
// wait) left, and a small reader's wait takes its own class rather than
// one left by WaitFor's last read (unfollow takes that back). Found in
// review: a wait took the poller's class besides its own lease, and the
// lease left behind held the pump for followBound at every wake (a flood
// ran 4x slower beside a 64 KiB poller). Also: a follower that reads first
// takes its own class's lease where a small reader's comes first.
func TestOneEntryPerWait(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// A spare lease (splitLocked: the copy a follower's read leaves for
	// the poller) does not hold the pump.
	leasesAt := func(b *HeadTailBuffer, cursor int64) (n int) {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, l := range b.flow.leases {
			if l.cursor == cursor && !l.spare {
				n++
			}
		}
		return n
	}

	// A follower and a poller; the follower waits with bytes there, or
	// before them.
	for _, bytesThere := range []bool{true, false} {
		b := NewHeadTailBuffer(4, 8, 0)
		_, _ = b.Write([]byte("0123"))
		f := b.ReadSinceInto(0, make([]byte, 64)).Next
		p := b.ReadSinceInto(0, make([]byte, 64)).Next
		for round, w := range []string{"4567", "89ab", "cdef", "ghij"} {
			errc := make(chan error, 1)
			if bytesThere {
				_, _ = b.Write([]byte(w))
			}
			go func() { errc <- b.WaitOutput(ctx, f) }() // returns at once, or at the write below
			if !bytesThere {
				spinUntil(ctx, t, "waiting", func() bool { return pumpTestLocked(b, func() bool { return b.waiters == 1 }) })
				_, _ = b.Write([]byte(w))
			}
			if err := <-errc; err != nil {
				t.Fatalf("WaitOutput(ctx, %d) = %v; want nil", f, err)
			}
			from := f
			f = b.ReadSinceInto(f, make([]byte, 64)).Next
			if n := leasesAt(b, from); n != 0 {
				t.Errorf("bytes there %v, round %d: the follower read from %d to the end; %d leases left at %d; want none", bytesThere, round, from, n, from)
			}
			p = b.ReadSinceInto(p, make([]byte, 64)).Next // the poll
		}
	}

	// A small reader waits where WaitFor's last read reached the end and
	// matched, beside a follower; both read: no lease is left.
	for _, bytesThere := range []bool{true, false} {
		b := readTo4(64) // the follower, to 4
		for s := int64(0); s < 4; {
			s = b.ReadSinceInto(s, make([]byte, 2)).Next // the small reader
		}
		b.mu.Lock()
		c := b.readSinceLocked(0, 0) // WaitFor's read, which matches
		b.mu.Unlock()
		b.unfollow(c.Next)
		if bytesThere {
			_, _ = b.Write([]byte("4567"))
		}
		errc := make(chan error, 2)
		for i := range 2 { // the follower, then the small reader
			go func() { errc <- b.WaitOutput(ctx, 4) }() // returns at once, or at the write below
			if bytesThere {
				if err := <-errc; err != nil {
					t.Fatalf("WaitOutput(ctx, 4) = %v; want nil", err)
				}
				continue
			}
			spinUntil(ctx, t, "waiting", func() bool { return pumpTestLocked(b, func() bool { return int(b.waiters) == i+1 }) })
		}
		if !bytesThere {
			_, _ = b.Write([]byte("4567"))
			for range 2 {
				if err := <-errc; err != nil {
					t.Fatalf("WaitOutput(ctx, 4) = %v; want nil", err)
				}
			}
		}
		b.ReadSinceInto(4, make([]byte, 2))  // the small reader
		b.ReadSinceInto(4, make([]byte, 64)) // the follower, to the end
		if n := leasesAt(b, 4); n != 0 {
			t.Errorf("bytes there %v: both read from 4; %d leases left there; want none", bytesThere, n)
		}
	}

	// A follower, a poller and a small reader reach the end at 4; the
	// small reader waits first, and takes its own class, not the
	// follower's nor the poller's: once both read, no lease is left.
	// Then a small reader alone waits where WaitFor matched: its read
	// leaves no lease either.
	for _, withFollower := range []bool{true, false} {
		b := NewHeadTailBuffer(4, 8, 0)
		_, _ = b.Write([]byte("0123"))
		small := func() {
			for s := int64(0); s < 4; {
				s = b.ReadSinceInto(s, make([]byte, 2)).Next
			}
		}
		if withFollower {
			b.ReadSinceInto(0, make([]byte, 64)) // the follower
			b.ReadSinceInto(0, make([]byte, 64)) // the poller
			small()
		} else {
			small()
			b.mu.Lock()
			c := b.readSinceLocked(0, 0) // WaitFor's read, which matches
			b.mu.Unlock()
			b.unfollow(c.Next)
		}
		_, _ = b.Write([]byte("4567"))
		for range 2 {
			if err := b.WaitOutput(ctx, 4); err != nil { // the small reader, then the follower
				t.Fatalf("WaitOutput(ctx, 4) = %v; want nil", err)
			}
			if !withFollower {
				break
			}
		}
		b.ReadSinceInto(4, make([]byte, 2))
		if withFollower {
			b.ReadSinceInto(4, make([]byte, 64))
		}
		if n := leasesAt(b, 4); n != 0 {
			t.Errorf("with a follower %v: the small reader read from 4 (and the follower): %d leases left there; want none", withFollower, n)
		}
	}

	// Entries of both classes at 4, the small one first: the follower's
	// read takes its class's, then the small reader's the other. And
	// a follower's entry alone: a small reader's read leaves its lease.
	b := readTo4(64)
	b.mu.Lock()
	b.flow.caught = [readTail + 1]int8{}
	b.flow.waiting = append(b.flow.waiting, lease{cursor: 4, class: readSmall}, lease{cursor: 4, class: readTail})
	b.mu.Unlock()
	_, _ = b.Write([]byte("4567")) // the wake keeps their classes
	b.ReadSinceInto(4, make([]byte, 64))
	b.ReadSinceInto(4, make([]byte, 2))
	if n := leasesAt(b, 4); n != 0 {
		t.Errorf("the follower, then the small reader read from 4; %d leases left there; want none", n)
	}
	b.mu.Lock()
	b.flow.leases = b.flow.leases[:0] // the follower's, moved to 8: it waits there
	b.flow.waiting = append(b.flow.waiting, lease{cursor: 8, class: readTail})
	b.mu.Unlock()
	_, _ = b.Write([]byte("89ab")) // the wake keeps its class
	b.ReadSinceInto(8, make([]byte, 2))
	if n := leasesAt(b, 8); n != 1 {
		t.Errorf("a small reader read where a follower was woken: %d leases left there; want the follower's", n)
	}
}

// TestGivenUpWaitKeepsClass pins that a follower whose wait ends by its
// context (a wait with a timeout, in a loop) waits as its class again:
// the class it took goes back for its next wait, so that a small reader's
// read at its cursor does not end its lease.
func TestGivenUpWaitKeepsClass(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b := readTo4(64) // the follower, to 4, no lease
	waitCtx, giveUp := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- b.WaitOutput(waitCtx, 4) }() // ends at giveUp
	spinUntil(ctx, t, "waiting", func() bool { return pumpTestLocked(b, func() bool { return b.waiters == 1 }) })
	giveUp()
	if err := <-errc; err == nil {
		t.Fatalf("WaitOutput after its context ended = nil; want an error")
	}
	_, _ = b.Write([]byte("4567"))
	if err := b.WaitOutput(ctx, 4); err != nil { // bytes there
		t.Fatalf("WaitOutput(ctx, 4) = %v; want nil", err)
	}
	b.ReadSinceInto(4, make([]byte, 2)) // a small reader at the cursor
	if n := b.room(followWindow); n == followWindow {
		t.Errorf("after a small reader's read at the follower's cursor: room %d, all; want the follower's lease at 4 left", n)
	}
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

// TestFollowWindow pins the follow window (design section 10, issue 22):
// while a follower waits or holds a lease, the buffer keeps the newest
// bytes for it beyond head and tail, which only reads from a lease's
// cursor see. Another reader at the same cursor loses what the tail
// dropped, as without a follower; rendering and Truncation do not change;
// a follower reading in pieces smaller than the tail loses the lease, and
// one reading a tail's worth at a time keeps it; Finish drops the window.
func TestFollowWindow(t *testing.T) {
	t.Parallel()
	const head, tail, window = 4, 8, 32
	stream := []byte("0123abcdefghijklmnop") // head "0123", then 16 bytes
	// follow returns a buffer holding stream whose follower, once caught
	// up at 4, was woken to read the 16 bytes after it, and a twin that
	// got the same writes with no follower.
	follow := func(t *testing.T) (b, twin *HeadTailBuffer) {
		b, twin = NewHeadTailBuffer(head, tail, 0), NewHeadTailBuffer(head, tail, 0)
		for _, buf := range []*HeadTailBuffer{b, twin} {
			_, _ = buf.Write(stream[:4])
		}
		if c := b.ReadSinceInto(0, make([]byte, 64)); c.Next != 4 || c.End != 4 {
			t.Fatalf("ReadSinceInto(0) = %+v; want to the end, 4", c)
		}
		pumpTestLocked(b, func() bool {
			b.flow.windowMax = window
			b.flow.waiting = append(b.flow.waiting, lease{cursor: 4}) // WaitOutput(ctx, 4)
			return true
		})
		if waiting, _ := b.writeQuiet(stream[4:]); waiting {
			t.Fatalf("writeQuiet reported readers waiting on no channel")
		}
		_, _ = twin.Write(stream[4:])
		if got, want := b.room(64), 4+window-len(stream); got != want {
			t.Errorf("room(64) with the follower at 4 = %d; want %d (the window's)", got, want)
		}
		b.wakeFollowers(time.Unix(0, 0))
		return b, twin
	}

	t.Run("other-reader-loses", func(t *testing.T) {
		t.Parallel()
		b, _ := follow(t)
		c := b.ReadSince(5, 0)
		if c.Lost != 7 || string(c.Data) != "ijklmnop" {
			t.Errorf("ReadSince(5) beside a follower at 4 = %+v; want Lost 7, %q", c, "ijklmnop")
		}
	})
	t.Run("follower-reads-window", func(t *testing.T) {
		t.Parallel()
		b, twin := follow(t)
		// A tail's worth per read: the lease moves with each.
		buf := make([]byte, tail)
		var got []byte
		for cursor := int64(4); cursor < int64(len(stream)); {
			c := b.ReadSinceInto(cursor, buf)
			if c.Lost != 0 {
				t.Fatalf("follower's ReadSinceInto(%d) = %+v; want nothing lost", cursor, c)
			}
			got = append(got, c.Data...)
			cursor = c.Next
		}
		if string(got) != string(stream[4:]) {
			t.Errorf("follower read %q; want %q", got, stream[4:])
		}
		out, want := b.Output(), twin.Output()
		if out.Text != want.Text || out.Truncation == nil || *out.Truncation != *want.Truncation {
			t.Errorf("Output() beside the window = %q, %+v; want %q, %+v, as without a follower", out.Text, out.Truncation, want.Text, want.Truncation)
		}
		b.Finish()
		if h, tl := headTailStorage(b); h != head || tl != tail || !pumpTestLocked(b, func() bool { return b.flow == nil }) {
			t.Errorf("after Finish: head %d, tail %d bytes, flow kept %v; want %d, %d, none", h, tl, b.flow != nil, head, tail)
		}
	})
	t.Run("pieces-lose-help", func(t *testing.T) {
		t.Parallel()
		b, _ := follow(t)
		if c := b.ReadSinceInto(4, make([]byte, tail-1)); c.Lost != 0 || c.Next != 4+tail-1 {
			t.Fatalf("follower's first piece = %+v; want %d bytes from the window", c, tail-1)
		}
		if c := b.ReadSinceInto(4+tail-1, make([]byte, tail-1)); c.Lost == 0 {
			t.Errorf("next piece after the lease ended = %+v; want the bytes the tail dropped lost", c)
		}
	})
}

// TestPumpFollowerLazyWake pins how the pump wakes a follower (follow.go):
// the bytes a waiting follower has not read go to the follow window while
// it sleeps, and it is woken at the latest followLatency later or when the
// window is full. The follower loses nothing. The child's end comes only
// after the follower has read everything, so that no real-time bound of
// the pump's settle is involved (TestSettleWaitsForWindowReads pins that
// the pump waits for a follower at the end of its pipe).
func TestPumpFollowerLazyWake(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	const head, tail, window = 4, 8, 32
	stream := bytes.Repeat([]byte("abcdefghijklmnopqrstuvwxyz0123456789"), 4) // 144 bytes

	b := NewHeadTailBuffer(head, tail, 0)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatalf("os.Pipe() = %v", err)
	}
	defer func() { _ = r.Close() }()
	defer func() { _ = w.Close() }() // a second Close after the one below is harmless
	done := make(chan struct{}, 1)
	pu := &pump{r: r, dst: b, clock: quartz.NewMock(t), activity: make(chan struct{}, 1), done: done}
	go pu.run() // ends at EOF (w.Close below)
	// As the drain does: the buffer is finished (and its window dropped)
	// once the pump has ended. Ends with the pump; joined below.
	finished := make(chan struct{})
	go func() {
		<-done
		b.Finish()
		close(finished)
	}()

	buf := make([]byte, tail)
	if c := b.ReadSinceInto(0, buf); c.Next != 0 {
		t.Fatalf("ReadSinceInto(0) of an empty buffer = %+v", c)
	}
	pumpTestLocked(b, func() bool { b.flow.windowMax = window; return true })
	// The follower waits before the child writes: a pump that wrote the
	// stream before anyone waited would owe nobody its bytes.
	errc := make(chan error, 1)
	go func() { errc <- b.WaitOutput(ctx, 0) }() // ends at the pump's wake
	spinUntil(ctx, t, "follower waiting", func() bool {
		return pumpTestLocked(b, func() bool { return len(b.flow.waiting) == 1 })
	})
	if _, err := w.Write(stream); err != nil {
		t.Fatalf("write to the pipe: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("WaitOutput(ctx, 0) = %v; want nil", err)
	}
	var got []byte
	var lost int64
	for cursor := int64(0); ; {
		c := b.ReadSinceInto(cursor, buf)
		for c.Next < c.End && c.Lost == 0 {
			got = append(got, c.Data...)
			c = b.ReadSinceInto(c.Next, buf)
		}
		got, lost, cursor = append(got, c.Data...), lost+c.Lost, c.Next
		if cursor >= int64(len(stream)) {
			break
		}
		if err := b.WaitOutput(ctx, cursor); err != nil {
			t.Fatalf("WaitOutput(ctx, %d) = %v; want nil", cursor, err)
		}
	}
	if lost != 0 || !bytes.Equal(got, stream) {
		t.Errorf("follower read %q, lost %d; want %q, lost 0", got, lost, stream)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("close the pipe: %v", err)
	}
	select {
	case <-finished:
	case <-ctx.Done():
		t.Fatalf("pump did not end: %v", ctx.Err())
	}
	if c := b.ReadSinceInto(int64(len(stream)), buf); !c.EOF {
		t.Errorf("ReadSinceInto(end) after the pump ended = %+v; want EOF", c)
	}
}

// TestSettleWaitsForWindowReads pins what a pump at the end of its pipe
// waits for (HeadTailBuffer.settle): a follower that holds a lease has not
// read bytes only the follow window holds (Finish would drop them), so
// the pump waits, at most followBound, on the channel a read signals; once
// the follower has read past them, or its bound passed, it waits no more.
func TestSettleWaitsForWindowReads(t *testing.T) {
	t.Parallel()
	const window = 32
	stream := []byte("0123456789abcdefghij") // 20 bytes: head 4, window-only 4..12, tail 12..20
	for _, tc := range []struct {
		name string
		// after runs between the first settle and the second; it returns
		// the time of the second.
		after func(t *testing.T, b *HeadTailBuffer, woken time.Time) time.Time
	}{
		{"follower-reads", func(t *testing.T, b *HeadTailBuffer, woken time.Time) time.Time {
			buf := make([]byte, 8)
			for cursor := int64(0); cursor < 12; {
				c := b.ReadSinceInto(cursor, buf)
				if c.Lost != 0 || !bytes.Equal(c.Data, stream[cursor:c.Next]) {
					t.Fatalf("follower's ReadSinceInto(%d) = %+v; want %q", cursor, c, stream[cursor:c.Next])
				}
				cursor = c.Next
			}
			return woken // well within the bound
		}},
		{"follower-late", func(t *testing.T, b *HeadTailBuffer, woken time.Time) time.Time {
			return woken.Add(followBound)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := NewHeadTailBuffer(4, 8, 0)
			if c := b.ReadSinceInto(0, make([]byte, 8)); c.End != 0 {
				t.Fatalf("ReadSinceInto(0) of an empty buffer = %+v", c)
			}
			pumpTestLocked(b, func() bool {
				b.flow.windowMax = window
				b.flow.waiting = append(b.flow.waiting, lease{cursor: 0})
				return true
			})
			_, _ = b.writeQuiet(stream)
			woken := time.Unix(1000, 0)
			b.wakeFollowers(woken)
			done, wait, roomc := b.settle(woken)
			if done || wait != followBound || roomc == nil {
				t.Fatalf("settle with a follower that has not read the window's bytes = %v, %v, %v; want false, %v, a channel", done, wait, roomc != nil, followBound)
			}
			now := tc.after(t, b, woken)
			if done, _, _ := b.settle(now); !done {
				t.Errorf("settle after the %s = false; want true", tc.name)
			}
		})
	}
}

// TestFollowWindowStorage pins that the follow window's storage grows
// only as far as followers lag: a follower that reads each write before
// the next keeps it at a write's size, one that lags grows it, doubling,
// to the window's size and no further.
func TestFollowWindowStorage(t *testing.T) {
	t.Parallel()
	const window = 64
	chunk := []byte("0123456789abcdef") // 16 bytes
	b := NewHeadTailBuffer(4, 8, 0)
	_, _ = b.Write([]byte("head"))
	if c := b.ReadSinceInto(0, make([]byte, 4)); c.Next != 4 || c.End != 4 {
		t.Fatalf("ReadSinceInto(0) = %+v; want to the end, 4", c)
	}
	storage := func() int {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.flow.window)
	}
	pumpTestLocked(b, func() bool {
		b.flow.windowMax = window
		b.flow.waiting = append(b.flow.waiting, lease{cursor: 4})
		return true
	})
	for i := range 8 {
		_, _ = b.writeQuiet(chunk)
		b.wakeFollowers(time.Unix(0, 0))
		cursor := int64(4 + i*len(chunk))
		if c := b.ReadSinceInto(cursor, make([]byte, 64)); c.Lost != 0 || c.Next != c.End {
			t.Fatalf("prompt follower's ReadSinceInto(%d) = %+v; want all of it", cursor, c)
		}
		// It waits again at the end.
		pumpTestLocked(b, func() bool {
			b.flow.leases = b.flow.leases[:0]
			b.flow.waiting = append(b.flow.waiting, lease{cursor: b.total})
			return true
		})
	}
	if got := storage(); got != len(chunk) {
		t.Errorf("window storage with a prompt follower = %d bytes; want %d, one write", got, len(chunk))
	}
	// It lags now: the window takes what it has not read, up to window.
	for range 8 {
		_, _ = b.writeQuiet(chunk)
	}
	if got := storage(); got != window {
		t.Errorf("window storage with a follower 128 bytes behind = %d bytes; want %d", got, window)
	}
}

// TestWaitOutputWokenWithoutBytes pins that a follower woken with nothing
// past its cursor, whose lease went before it looked (the pump wakes
// followers after its writes, and hold drops leases), waits on as a
// reader that is not helped, and returns at the next write.
func TestWaitOutputWokenWithoutBytes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b := NewHeadTailBuffer(4, 8, 0)
	if c := b.ReadSinceInto(0, make([]byte, 64)); c.End != 0 {
		t.Fatalf("ReadSinceInto(0) of an empty buffer = %+v", c)
	}
	errc := make(chan error, 1)
	go func() { errc <- b.WaitOutput(ctx, 0) }() // ends at the write below
	spinUntil(ctx, t, "follower waiting", func() bool {
		return pumpTestLocked(b, func() bool { return len(b.flow.waiting) == 1 })
	})
	// A wake with nothing written, and the lease it made gone at once.
	pumpTestLocked(b, func() bool {
		b.wakeLocked()
		b.flow.leases = b.flow.leases[:0]
		return true
	})
	spinUntil(ctx, t, "woken follower waiting again", func() bool {
		return pumpTestLocked(b, func() bool { return b.waitc != nil })
	})
	if w := pumpTestLocked(b, func() bool { return len(b.flow.waiting) == 0 && len(b.flow.leases) == 0 }); !w {
		t.Errorf("follower without its lease waits as a follower again; want a reader that is not helped")
	}
	_, _ = b.Write([]byte("x"))
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("WaitOutput(ctx, 0) = %v; want nil", err)
		}
	case <-ctx.Done():
		t.Fatalf("WaitOutput did not return after a write: %v", ctx.Err())
	}
}

// TestSmallReaderIsNoFollower pins that a reader whose read reached the
// end with room for less than followMinRead bytes, or less than the tail
// holds if that is smaller, waits as a reader the pump does not help: it
// gets no waiting entry, which would hold the pump while the follow
// window fills for it, and no lease when woken. A read of at least that
// much that reached the end makes the next wait a follower's, also when
// the tail is larger (a 64 KiB follower of a 1 MiB tail is helped). A
// wait at a negative cursor is never a follower's.
func TestSmallReaderIsNoFollower(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	const head = 4
	for _, tc := range []struct {
		tail, size int
		cursor     int64 // the wait's
		follower   bool
	}{
		{8, 7, 0, false},
		{8, 8, 0, true},
		{8, 7, -1, false}, // caughtUp is -1 before any follower's read
		{4 * followMinRead, followMinRead - 1, 0, false},
		{4 * followMinRead, followMinRead, 0, true},
	} {
		b := NewHeadTailBuffer(head, tc.tail, 0)
		if c := b.ReadSinceInto(0, make([]byte, tc.size)); c.End != 0 {
			t.Fatalf("ReadSinceInto(0) of an empty buffer = %+v", c)
		}
		errc := make(chan error, 1)
		go func() { errc <- b.WaitOutput(ctx, tc.cursor) }() // ends at the write below
		if tc.cursor >= 0 {
			spinUntil(ctx, t, "reader waiting", func() bool {
				return pumpTestLocked(b, func() bool { return b.waitc != nil && b.waiters == 1 })
			})
			if got := pumpTestLocked(b, func() bool { return len(b.flow.waiting) == 1 }); got != tc.follower {
				t.Errorf("tail %d, reader of %d, waiting at %d: a follower %v; want %v", tc.tail, tc.size, tc.cursor, got, tc.follower)
			}
		}
		_, _ = b.Write([]byte("x"))
		if err := <-errc; err != nil {
			t.Fatalf("WaitOutput(ctx, %d) = %v; want nil", tc.cursor, err)
		}
		if got := pumpTestLocked(b, func() bool { return len(b.flow.leases) == 1 }); got != tc.follower {
			t.Errorf("tail %d, reader of %d, waiting at %d: woken with a lease %v; want %v", tc.tail, tc.size, tc.cursor, got, tc.follower)
		}
	}
}

// TestPumpSettlesUnderMockClock pins that a pump at the end of its pipe
// waits for a follower that stopped reading at most followBound in real
// time, whatever Options.Clock is: under a mock clock that nobody moves it
// still ends (settleFollowers), so the record becomes final.
func TestPumpSettlesUnderMockClock(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b := NewHeadTailBuffer(4, 8, 0)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatalf("os.Pipe() = %v", err)
	}
	defer r.Close()
	defer w.Close()
	done := make(chan struct{}, 1)
	pu := &pump{r: r, dst: b, clock: quartz.NewMock(t), activity: make(chan struct{}, 1), done: done}
	// Ends at the end of the pipe (w.Close below).
	go pu.run()
	b.ReadSinceInto(0, make([]byte, 12))
	errc := make(chan error, 1) // one send
	// Ends when the write below wakes it.
	go func() { errc <- b.WaitOutput(ctx, 0) }()
	spinUntil(ctx, t, "the follower to wait", func() bool {
		return pumpTestLocked(b, func() bool { return b.flow != nil && len(b.flow.waiting) == 1 })
	})
	if _, err := w.Write(make([]byte, 100)); err != nil {
		t.Fatalf("write to the pipe: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("WaitOutput = %v", err)
	}
	// The follower reads nothing more; the child ends.
	_ = w.Close()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("the pump did not end at the end of its pipe while a follower that stopped reading held a lease, under a mock clock: %v", ctx.Err())
	}
}

// TestFollowWindowReads pins what reads see through a small follow window
// that wraps: a follower holding a lease reads exactly the stream's bytes
// (Next - cursor == Lost + len(Data) on every read), and a reader from 0
// without a lease sees head, Lost and tail only, summing to Len(). 300
// seeds, windows of 7 to 36 bytes, reads of 5 to 14 (FuzzHeadTail makes no
// leases, so it never reaches the window).
func TestFollowWindowReads(t *testing.T) {
	ctx := t.Context()
	for seed := range 300 {
		rnd := uint64(seed*2654435761 + 1)
		next := func(n int) int {
			rnd ^= rnd << 13
			rnd ^= rnd >> 7
			rnd ^= rnd << 17
			return int(rnd % uint64(n))
		}
		b := NewHeadTailBuffer(3, 5, 0)
		var stream []byte
		write := func(n int) {
			p := make([]byte, n)
			for i := range p {
				p[i] = byte(len(stream) + i)
			}
			stream = append(stream, p...)
			_, _ = b.Write(p)
		}
		cursor := int64(0)
		b.ReadSinceInto(0, make([]byte, 8))
		pumpTestLocked(b, func() bool { b.flow.windowMax = 7 + next(30); return true })
		for round := 0; round < 6; round++ {
			errc := make(chan error, 1) // one send
			// Ends when the writes below wake it.
			go func(c int64) { errc <- b.WaitOutput(ctx, c) }(cursor)
			spinUntil(ctx, t, "waiting", func() bool {
				return pumpTestLocked(b, func() bool { return b.flow != nil && len(b.flow.waiting) == 1 })
			})
			for range 1 + next(4) {
				write(1 + next(20))
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			for cursor < b.Len() {
				c := b.ReadSince(cursor, 5+next(10))
				if c.Next-cursor != c.Lost+int64(len(c.Data)) {
					t.Fatalf("seed %d: read from %d = %+v: Next-cursor != Lost+len(Data)", seed, cursor, c)
				}
				from := cursor + c.Lost
				for i, x := range c.Data {
					if x != stream[from+int64(i)] {
						t.Fatalf("seed %d: read from %d: byte %d = %d, want %d", seed, cursor, from+int64(i), x, stream[from+int64(i)])
					}
				}
				cursor = c.Next
			}
		}
		// A reader from 0 with no lease: head, then Lost, then tail.
		var sum int64
		for cur := int64(0); cur < b.Len(); {
			c := b.ReadSince(cur, 0)
			for i, x := range c.Data {
				if x != stream[cur+c.Lost+int64(i)] {
					t.Fatalf("seed %d: read from %d without a lease: wrong bytes %v", seed, cur, c)
				}
			}
			if c.Lost > 0 && c.Lost != b.Len()-5-3 {
				t.Fatalf("seed %d: a reader without a lease lost %d bytes; want %d (head 3, tail 5)", seed, c.Lost, b.Len()-8)
			}
			sum += c.Lost + int64(len(c.Data))
			cur = c.Next
		}
		if sum != b.Len() {
			t.Fatalf("seed %d: a reader from 0 got Lost and Data summing to %d; want Len() = %d", seed, sum, b.Len())
		}
	}
}

// TestPumpReadsIntoFollowWindow pins the pump's reads into the follow
// window (readTarget): while a follower is helped and the window has free
// storage, the pump's next read goes straight into it, and keepLocked
// keeps those bytes without copying them; the follower still reads
// exactly the stream (Lost 0, every byte right, through a window that
// wraps at odd places), and a reader without the lease, as without a
// follower, head, Lost and tail. 200 seeds, windows of 8 to 71 bytes, the
// pump's reads of 1 to 24 bytes, the follower's of a tail's worth to 3
// tails. It fails if the pump never reads into the window.
func TestPumpReadsIntoFollowWindow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const head, tail = 3, 5
	intoWindow := 0
	for seed := range 200 {
		rnd := uint64(seed*2654435761 + 7)
		next := func(n int) int {
			rnd ^= rnd << 13
			rnd ^= rnd >> 7
			rnd ^= rnd << 17
			return int(rnd % uint64(n))
		}
		b, twin := NewHeadTailBuffer(head, tail, 0), NewHeadTailBuffer(head, tail, 0)
		var stream []byte
		cursor := int64(0)
		b.ReadSinceInto(0, make([]byte, 8))
		pumpTestLocked(b, func() bool { b.flow.windowMax = 8 + next(64); return true })
		pumpBuf := make([]byte, 24)
		for round := 0; round < 8; round++ {
			errc := make(chan error, 1) // one send
			// Ends when the wake below comes.
			go func(c int64) { errc <- b.WaitOutput(ctx, c) }(cursor)
			spinUntil(ctx, t, "waiting", func() bool {
				return pumpTestLocked(b, func() bool { return b.flow != nil && len(b.flow.waiting) == 1 })
			})
			// The pump: reads where readTarget says, and writes what room
			// allows of them (pump.writeFollowed without its waits).
			for range 1 + next(6) {
				p, size := b.readTarget(pumpBuf)
				if size != len(pumpBuf) || len(p) == 0 || len(p) > size {
					t.Fatalf("seed %d: readTarget = %d bytes, size %d; want 1 to %d, size %d", seed, len(p), size, size, len(pumpBuf))
				}
				if pumpTestLocked(b, func() bool {
					w := b.flow.window
					return len(w) > 0 && &p[0] == &w[(b.flow.windowPos+b.flow.windowLen)%len(w)]
				}) {
					intoWindow++
				}
				n := min(1+next(24), len(p), b.room(len(p)))
				if n == 0 {
					break
				}
				for i := range p[:n] {
					p[i] = byte(len(stream) + i)
				}
				stream = append(stream, p[:n]...)
				_, _ = twin.Write(p[:n])
				b.writeQuiet(p[:n])
			}
			b.wakeFollowers(time.Unix(0, 0))
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			for cursor < b.Len() {
				c := b.ReadSinceInto(cursor, make([]byte, tail+next(2*tail)))
				if c.Lost != 0 || c.Next-cursor != int64(len(c.Data)) {
					t.Fatalf("seed %d: follower's read from %d = %+v; want nothing lost", seed, cursor, c)
				}
				for i, x := range c.Data {
					if x != stream[cursor+int64(i)] {
						t.Fatalf("seed %d: follower's read from %d: byte %d = %d, want %d", seed, cursor, cursor+int64(i), x, stream[cursor+int64(i)])
					}
				}
				cursor = c.Next
			}
		}
		out, want := b.Output(), twin.Output()
		if out.Text != want.Text || (out.Truncation == nil) != (want.Truncation == nil) ||
			out.Truncation != nil && *out.Truncation != *want.Truncation {
			t.Fatalf("seed %d: Output() = %q, %+v; want %q, %+v, as without a follower", seed, out.Text, out.Truncation, want.Text, want.Truncation)
		}
		if c, w := b.ReadSince(0, 0), twin.ReadSince(0, 0); !bytes.Equal(c.Data, w.Data) || c.Lost != w.Lost {
			t.Fatalf("seed %d: ReadSince(0) without the lease = %+v; want %+v, as without a follower", seed, c, w)
		}
	}
	if intoWindow == 0 {
		t.Errorf("the pump never read into the follow window; want its reads there while a follower is helped")
	}
}

// TestPollerLeavesFollowerLease pins the split of a woken follower's lease
// (splitLocked): a poller (64-byte reads that reach the end, never a
// wait) at a follower's cursor that polls between the follower's wake and
// its read no longer takes the follower's lease with it (found in review:
// the follower lost 13-41 MB of a 400 MB flood beside a poller every
// 200 us). The follower's read is served from the follow window; the
// poller's copy goes when the follower's wait claims its own (endTwinLocked),
// so that the poller keeps no lease past it; and when the follower reads
// first, the copy left for the poller (a spare) holds the pump for
// spareHold at most, and goes with the poller's read once the follower
// waited.
func TestPollerLeavesFollowerLease(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b := followedAt4(64)
	wait := func(cursor int64) <-chan error { return waitBlocked(ctx, ctx, t, b, cursor) }
	leases := func() (held, spare int) {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, l := range b.flow.leases {
			if l.spare {
				spare++
			} else {
				held++
			}
		}
		return held, spare
	}

	// The poller polls first.
	errc := wait(4)
	_, _ = b.Write([]byte("456789abcdefghij")) // 8 bytes past the tail: only the window holds them
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if c := b.ReadSinceInto(4, make([]byte, 64)); c.Next != 20 { // the poll
		t.Fatalf("the poll from 4: %+v; want Next 20", c)
	}
	if c := b.ReadSinceInto(4, make([]byte, 64)); c.Lost != 0 || string(c.Data) != "456789abcdefghij" {
		t.Fatalf("the follower's read from 4 after the poll: %+v; want the 16 bytes, none lost", c)
	}
	// Both reached 20 with a lease each; the follower's wait claims one,
	// and the other goes, its class given back for the poller's reads.
	errc = wait(20)
	b.mu.Lock()
	n, caught := len(b.flow.leases), b.flow.caught[readTail]
	b.mu.Unlock()
	if n != 0 || caught != 1 {
		t.Fatalf("the follower waits at 20: %d leases, caught %d; want none (its own waits) and the poller's class", n, caught)
	}
	_, _ = b.Write([]byte("klmn"))
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if held, spare := leases(); held != 1 || spare != 0 {
		t.Fatalf("after the wake: %d leases hold the pump, %d spare; want the follower's alone", held, spare)
	}

	// The follower reads first (the poller's class, given back at the
	// follower's wait, splits its lease), then the poller, from its copy; then again
	// at 24, where the copy left for the poller keeps the window's bytes,
	// and does not hold the pump.
	for _, who := range []string{"follower", "poller"} {
		if c := b.ReadSinceInto(20, make([]byte, 64)); c.Lost != 0 || string(c.Data) != "klmn" {
			t.Fatalf("the %s's read from 20: %+v; want klmn", who, c)
		}
	}
	errc = wait(24)
	_, _ = b.Write([]byte("opqrstuvwxyzABCD"))
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if c := b.ReadSinceInto(24, make([]byte, 64)); c.Lost != 0 || c.Next != 40 {
		t.Fatalf("the follower's read from 24: %+v; want Next 40, none lost", c)
	}
	if held, spare := leases(); held != 1 || spare != 1 {
		t.Fatalf("the follower read first: %d leases hold the pump, %d spare; want its own and the poller's spare", held, spare)
	}
	if c := b.ReadSinceInto(24, make([]byte, 64)); c.Lost != 0 || string(c.Data) != "opqrstuvwxyzABCD" {
		t.Errorf("the poller's read from 24: %+v; want the 16 bytes from the window", c)
	}

	// A spare holds the pump until it is read, or for spareHold from the
	// first wake or hold that finds it.
	errc = wait(40)
	_, _ = b.Write([]byte("EFGH"))
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	b.ReadSinceInto(40, make([]byte, 64)) // the follower: the poller's count at 40 splits its lease
	if _, spare := leases(); spare != 1 {
		t.Fatalf("the follower read from 40: %d spare leases; want the poller's", spare)
	}
	if n := b.room(followWindow); n != followWindow-(44-40) {
		t.Errorf("room for %d bytes with a spare at 40 of 44: %d; want the window's from 40", followWindow, n)
	}
	now := time.Now()
	b.wakeFollowers(now)
	if k, _, _ := b.hold(followWindow, now.Add(spareHold-time.Microsecond)); k != followWindow-(44-40) {
		t.Errorf("a hold within spareHold: room %d; want the window's from 40", k)
	}
	if k, _, _ := b.hold(followWindow, now.Add(spareHold)); k != followWindow {
		t.Errorf("a hold spareHold after the wake: room %d; want all %d", k, followWindow)
	}
	if _, spare := leases(); spare != 0 {
		t.Errorf("a hold spareHold after the wake: %d spare leases; want none", spare)
	}
}

// TestPollerBetweenFollowerReads pins the split of a lease a follower
// moved with a read of a tail's worth that did not reach the end (it
// reads on from there within the same wake): a poller whose last poll
// reached the end at that cursor, before the rest of the wake's bytes
// came, and that polls there first, leaves the follower a copy (found
// with 64 KiB bursts every 1 ms and a poller every 200 us: the follower
// lost 49,152 bytes at a time).
func TestPollerBetweenFollowerReads(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b := followedAt4(8) // the follower reads a tail's worth a call
	errc := waitBlocked(ctx, ctx, t, b, 4)
	// The pump writes without waking the follower at once (writeQuiet);
	// the poller polls meanwhile and reaches the end at 12.
	b.writeQuiet([]byte("456789ab"))
	if c := b.ReadSinceInto(4, make([]byte, 64)); c.Next != 12 || c.Lost != 0 {
		t.Fatalf("the poll from 4: %+v; want Next 12", c)
	}
	b.writeQuiet([]byte("cdefghijklmnopqr")) // 8 bytes more than the tail holds
	b.wakeFollowers(time.Now())
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if c := b.ReadSinceInto(4, make([]byte, 8)); c.Next != 12 || c.Lost != 0 {
		t.Fatalf("the follower's first read from 4: %+v; want 4..12 from the window", c)
	}
	if c := b.ReadSinceInto(12, make([]byte, 64)); c.Next != 28 { // the poll
		t.Fatalf("the poll from 12: %+v; want Next 28", c)
	}
	if c := b.ReadSinceInto(12, make([]byte, 8)); c.Lost != 0 || string(c.Data) != "cdefghij" {
		t.Errorf("the follower's second read from 12, after the poll: %+v; want cdefghij, none lost", c)
	}
}

// TestSpareGoesWithPollerRead pins that once the follower that read first
// after a split waits, the copy it left for the poller (a spare) serves
// the poller's next read and then goes (endTwinLocked, orphan), so that
// the poller keeps no lease: one it kept held the pump at every wake until
// its next poll (the review's 4x slower flood).
func TestSpareGoesWithPollerRead(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b := followedAt4(64)
	wokenAt4(ctx, t, b, []byte("456789abcdefghij"))
	if c := b.ReadSinceInto(4, make([]byte, 64)); c.Next != 20 || c.Lost != 0 { // the follower first
		t.Fatalf("the follower's read from 4: %+v; want 4..20", c)
	}
	waitCtx, stop := context.WithCancel(ctx)
	defer stop()
	errc := waitBlocked(ctx, waitCtx, t, b, 20) // the follower waits at 20
	if c := b.ReadSinceInto(4, make([]byte, 64)); c.Lost != 0 || string(c.Data) != "456789abcdefghij" {
		t.Errorf("the poller's read from 4: %+v; want the 16 bytes from its spare", c)
	}
	b.mu.Lock()
	leases, caught := len(b.flow.leases), b.flow.caught[readTail]
	b.mu.Unlock()
	if leases != 0 || caught != 1 {
		t.Errorf("after the poller's read: %d leases, caught %d; want none (the follower waits) and the poller's count", leases, caught)
	}
	stop()
	if err := <-errc; err == nil {
		t.Error("the follower's wait ended without its context")
	}
}

// TestTwinClaimKeepsPiecewiseFollower pins that a wait that claims one
// copy of a split lease keeps the other when a read left it short of the
// end (endTwinLocked): its reader reads a wake's bytes on in pieces, a
// follower, and deleting it lost that follower the rest of its wake
// (found in review). F1 reads 8 bytes a call (a tail's worth), F2 64.
func TestTwinClaimKeepsPiecewiseFollower(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b := followedAt4(8) // F1 as the follower, F2 as the other reader
	wokenAt4(ctx, t, b, []byte("456789abcdefghij"))
	if c := b.ReadSinceInto(4, make([]byte, 8)); c.Next != 12 || c.Lost != 0 { // F1's first piece splits its lease
		t.Fatalf("F1 from 4: %+v; want 4..12", c)
	}
	if c := b.ReadSinceInto(4, make([]byte, 64)); c.Next != 20 { // F2, from the spare, to the end
		t.Fatalf("F2 from 4: %+v; want Next 20", c)
	}
	waitCtx, stop := context.WithCancel(ctx)
	defer stop()
	errc := waitBlocked(ctx, waitCtx, t, b, 20) // F2's wait claims its copy
	if n := b.room(followWindow); n != followWindow-(20-12) {
		t.Errorf("room with F1 at 12 of 20: %d; want %d (the window from 12)", n, followWindow-(20-12))
	}
	_, _ = b.Write(make([]byte, b.room(followWindow))) // all the pump may write
	if c := b.ReadSinceInto(12, make([]byte, 8)); c.Lost != 0 || string(c.Data) != "cdefghij" {
		t.Errorf("F1's next piece from 12: %+v; want cdefghij, none lost", c)
	}
	if err := <-errc; err != nil { // the write woke it
		t.Errorf("F2's wait: %v; want nil", err)
	}
}

// TestClaimedOrphanStays pins that a wait that claims an orphan spare
// (endTwinLocked) makes it an ordinary lease: its claimer's next read,
// which reaches the end, moves it rather than ending it, so the claimer
// keeps the pump's help between that read and its next wait.
func TestClaimedOrphanStays(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b := readTo4(64) // the flow control is made
	b.mu.Lock()
	// An orphan spare at 4, copied from a lease no wait had claimed.
	b.flow.leases = append(b.flow.leases[:0], lease{cursor: 4, class: readTail, spare: true, orphan: true})
	b.flow.caught = [readTail + 1]int8{} // no other reader there: no split
	b.mu.Unlock()
	_, _ = b.Write([]byte("4567"))
	if err := b.WaitOutput(ctx, 4); err != nil { // bytes there: claims it, returns at once
		t.Fatal(err)
	}
	if c := b.ReadSinceInto(4, make([]byte, 64)); c.Next != 8 || c.Lost != 0 {
		t.Fatalf("the claimer's read from 4: %+v; want 4..8", c)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.flow.leases) != 1 || b.flow.leases[0].cursor != 8 {
		t.Errorf("after the claimer's read to the end: leases %+v; want its lease at 8", b.flow.leases)
	}
}

// TestSplitLeavesEachPollerACopy pins that a split leaves a copy for each
// reader that caught counts at the cursor (splitLocked): with two pollers
// there, the second one's read took the only copy, and the follower lost
// what the pump overwrote (found with a model of the pump,
// TestFollowerKeepsUpBesideOthers; beside two 64 KiB pollers, a follower
// of 64 KiB bursts every millisecond lost 0.4 MB every three rounds).
func TestSplitLeavesEachPollerACopy(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b := readTo4(64, 64, 64)                        // the follower and two pollers read to 4
	wokenAt4(ctx, t, b, []byte("456789abcdefghij")) // 8 bytes past the tail: only the window holds them
	for _, who := range []string{"the first poller", "the second poller", "the follower"} {
		if c := b.ReadSinceInto(4, make([]byte, 64)); c.Lost != 0 || string(c.Data) != "456789abcdefghij" {
			t.Errorf("%s's read from 4: %+v; want the 16 bytes, none lost", who, c)
		}
	}
}

// TestSplitForPollerLeftBehind pins that a split still leaves a copy for
// a poller counted at the follower's cursor after another reader reached
// the end further on (followState.before): a poller catching up from
// further back moved caughtUp past the follower's cursor, and the first
// poller's read took the follower's lease whole (found with a model of
// the pump, TestFollowerKeepsUpBesideOthers).
func TestSplitForPollerLeftBehind(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b := followedAt4(64) // the follower and the first poller read to 4
	errc := waitBlocked(ctx, ctx, t, b, 4)
	b.writeQuiet([]byte("4567"))                                // the follower is not woken yet
	if c := b.ReadSinceInto(0, make([]byte, 64)); c.Next != 8 { // the second poller, from the start
		t.Fatalf("the second poller's read from 0: %+v; want Next 8", c)
	}
	b.writeQuiet([]byte("89abcdefghij")) // 4 bytes past the tail: only the window holds them
	b.wakeFollowers(time.Now())
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if c := b.ReadSinceInto(4, make([]byte, 64)); c.Next != 20 { // the first poller reads first
		t.Fatalf("the first poller's read from 4: %+v; want Next 20", c)
	}
	if c := b.ReadSinceInto(4, make([]byte, 64)); c.Lost != 0 || string(c.Data) != "456789abcdefghij" {
		t.Errorf("the follower's read from 4 after the poller's: %+v; want the 16 bytes, none lost", c)
	}
}

// TestNoCopyForPollerGone pins that a poller counted at the follower's
// cursor that read on from there without a lease is no longer counted
// there (followState.before), so that the follower's read leaves no copy
// for it: a copy nobody reads holds the pump for spareHold at the
// follower's wakes (a 64 MiB flood beside a poller every 200 us ran 2x
// slower while a version kept such counts).
func TestNoCopyForPollerGone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// readOn reads on from 4 as the poller, after the follower's
		// wait there and the writes of 4567.
		readOn func(t *testing.T, b *HeadTailBuffer)
	}{
		{"its read moved caughtUp", func(t *testing.T, b *HeadTailBuffer) {
			if c := b.ReadSinceInto(4, make([]byte, 64)); c.Next != 8 {
				t.Fatalf("the poller's read from 4: %+v; want Next 8", c)
			}
		}},
		{"another read moved caughtUp first", func(t *testing.T, b *HeadTailBuffer) {
			if c := b.ReadSinceInto(0, make([]byte, 64)); c.Next != 8 { // a second poller
				t.Fatalf("the second poller's read from 0: %+v; want Next 8", c)
			}
			if c := b.ReadSinceInto(4, make([]byte, 64)); c.Next != 8 {
				t.Fatalf("the poller's read from 4: %+v; want Next 8", c)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			b := followedAt4(64) // the follower and the poller read to 4
			errc := waitBlocked(ctx, ctx, t, b, 4)
			b.writeQuiet([]byte("4567"))
			tc.readOn(t, b)
			b.wakeFollowers(time.Now())
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			if c := b.ReadSinceInto(4, make([]byte, 64)); c.Lost != 0 || string(c.Data) != "4567" {
				t.Fatalf("the follower's read from 4: %+v; want 4567", c)
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			for _, l := range b.flow.leases {
				if l.spare {
					t.Errorf("after the follower's read: a spare lease at %d; want none (its poller read on)", l.cursor)
				}
			}
		})
	}
}

// TestResplitKeepsTwin pins that a copy split again keeps its twin number
// (splitLocked), so that the follower's claim of its old partner still
// ends the poller's copy: renumbered, the partner found no twin to end,
// and the poller kept an ordinary lease that held the pump for followBound
// at each wake (found in review).
func TestResplitKeepsTwin(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b := followedAt4(64) // the follower F and the poller P read to 4
	wokenAt4(ctx, t, b, []byte("456789abcdefghij"))
	if c := b.ReadSinceInto(4, make([]byte, 64)); c.Next != 20 { // P first: it splits F's lease
		t.Fatalf("P's read from 4: %+v; want Next 20", c)
	}
	if c := b.ReadSinceInto(4, make([]byte, 64)); c.Next != 20 || c.Lost != 0 { // F, from its copy
		t.Fatalf("F's read from 4: %+v; want 4..20", c)
	}
	for q := int64(0); q < 20; { // a second poller Q reaches 20, from the start
		q = b.ReadSinceInto(q, make([]byte, 64)).Next
	}
	_, _ = b.Write([]byte("klmnopqrstuvwxyz"))
	if c := b.ReadSinceInto(20, make([]byte, 64)); c.Next != 36 { // P again: it splits its copy for Q
		t.Fatalf("P's read from 20: %+v; want Next 36", c)
	}
	if err := b.WaitOutput(ctx, 20); err != nil { // F's wait: the bytes are there
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.flow.leases {
		if l.cursor == 36 && !l.spare && !l.waited {
			t.Errorf("after F's wait at 20: the poller keeps an ordinary lease at 36 %+v; want it gone", l)
		}
	}
}

// TestTwinNumbersWrap pins that split numbers skip 0 (no twin) when the
// counter wraps (review E's low finding: after 2^31 splits a split made
// copies with no twin, whose claim ended nothing).
func TestTwinNumbersWrap(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b := followedAt4(64)
	wokenAt4(ctx, t, b, []byte("4567"))
	pumpTestLocked(b, func() bool { b.flow.twins = math.MaxInt32; return true })
	b.ReadSinceInto(4, make([]byte, 64)) // the follower: the poller's count at 4 splits its lease
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.flow.leases) != 2 {
		t.Fatalf("after the split: leases %+v; want the lease and its copy", b.flow.leases)
	}
	for _, l := range b.flow.leases {
		if l.twin <= 0 {
			t.Errorf("a split after %d: twin %d; want a number above 0", math.MaxInt32, l.twin)
		}
	}
}
