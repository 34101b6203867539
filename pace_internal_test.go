package proc

import (
	"testing"
	"time"
)

// TestPacer pins when a paced call pauses (pacer.paced): only once calls
// come in a streak of paceStreak, each within paceGap of the one before,
// and on every tight one after; a gap resets the streak, so that a caller
// that looks twice, or now and then, never pauses. Each pacer keeps its
// own streak (a rendering's: a change, or another record, starts anew).
func TestPacer(t *testing.T) {
	t.Parallel()
	const step = paceGap - time.Microsecond // tight
	var r pacer
	now := time.Second
	for i := 1; i <= paceStreak; i++ {
		now += step
		if r.paced(now) {
			t.Fatalf("return %d of a tight streak paused; want the first pause at return %d", i, paceStreak+1)
		}
	}
	for i := range 3 * paceStreak { // past the streak's 8-bit count too
		now += step
		if !r.paced(now) {
			t.Fatalf("tight return %d after a streak of %d did not pause; want it to", paceStreak+1+i, paceStreak)
		}
	}
	now += paceGap // a gap: the streak starts anew
	if r.paced(now) {
		t.Errorf("return after a gap of paceGap paused; want not")
	}
	for i := 1; i < paceStreak; i++ {
		now += step
		if r.paced(now) {
			t.Fatalf("return %d of a new streak paused; want not before %d", i, paceStreak+1)
		}
	}
	// Another rendering (a change, or another record) starts its own.
	var other pacer
	if other.paced(now + step) {
		t.Errorf("first return of another rendering during a streak paused; want not")
	}
}

// TestReadPaced pins which cursor reads count in a streak of reads in
// pieces (readPacedLocked): those of a running stream that could return
// less than a tail's worth and stop short of the end. Not a read that
// reaches the end (a follower's), nor one of a tail's worth or more (a
// follower the pump helps, or one catching up to be helped again), nor
// any read of a finished stream.
func TestReadPaced(t *testing.T) {
	t.Parallel()
	const head, tail = 4, 8
	b := NewHeadTailBuffer(head, tail, 0)
	_, _ = b.Write([]byte("0123456789abcdefghij")) // 20 bytes: head 4, tail 12..20
	read := func(cursor int64, size int) (Chunk, bool) {
		b.mu.Lock()
		defer b.mu.Unlock()
		c, p := b.readPacedLocked(cursor, make([]byte, size), size)
		return c, p != nil
	}
	for _, tc := range []struct {
		cursor int64
		size   int
		paced  bool
	}{
		{0, 2, true}, // in pieces, short of the end
		{12, tail - 1, true},
		{12, tail, false}, // a tail's worth
		{0, 64, false},    // a tail's worth or more
		{18, 2, false},    // reaches the end
		{20, 2, false},    // at the end
	} {
		if c, paced := read(tc.cursor, tc.size); paced != tc.paced {
			t.Errorf("running: read of %d from %d (%+v) paced %v; want %v", tc.size, tc.cursor, c, paced, tc.paced)
		}
	}
	b.Finish()
	if c, paced := read(0, 2); paced {
		t.Errorf("finished: read of 2 from 0 (%+v) paced; want not", c)
	}
}
