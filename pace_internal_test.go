package proc

import (
	"strings"
	"testing"
	"time"
)

// TestPacer pins when a paced call pauses (pacer.paced): only once calls
// come in a streak of paceStreak, each within paceGap of the one before,
// and then on every tight one after, a pause included (pacer.resumed: a
// lone tight poller pauses at each call once its streak is made); a gap
// resets the streak, so that a caller that looks twice, or now and then,
// never pauses. A call whose time is older than the last one noted
// (another caller's, stored meanwhile) continues the streak. Each pacer
// keeps its own (a rendering's: a change, or another record, starts anew).
func TestPacer(t *testing.T) {
	t.Parallel()
	const step = paceGap - time.Microsecond // tight
	var p pacer
	now := time.Second
	for i := 1; i <= paceStreak; i++ {
		now += step
		if p.paced(now) {
			t.Fatalf("call %d of a tight streak paused; want the first pause at call %d", i, paceStreak+1)
		}
	}
	// Past the streak's 8-bit count: each tight call pauses, and a
	// pause (longer than paceGap) does not end the streak.
	for i := range 300 {
		now += step
		if !p.paced(now) {
			t.Fatalf("tight call %d after a streak of %d did not pause; want it to", paceStreak+1+i, paceStreak)
		}
		now += 5 * pacePause
		p.resumed(now)
	}
	if !p.paced(now - time.Millisecond) {
		t.Errorf("call with a time older than the last noted did not pause; want it to continue the streak")
	}
	now += paceGap // a gap: the streak starts anew
	if p.paced(now) {
		t.Errorf("call after a gap of paceGap paused; want not")
	}
	for i := 1; i < paceStreak; i++ {
		now += step
		if p.paced(now) {
			t.Fatalf("call %d of a new streak paused; want not before %d", i, paceStreak+1)
		}
	}
	// Another pacer (a change, or another record) starts its own.
	var other pacer
	if other.paced(now + step) {
		t.Errorf("first call of another pacer during a streak paused; want not")
	}
}

// TestPaceDue pins which calls pause (paceDue): those of a Process's
// buffer that continue a streak while a pump of its Manager read
// something within paceActive before; not before any pump read, and
// never for a buffer of no Process.
func TestPaceDue(t *testing.T) {
	t.Parallel()
	var sig pollSignal
	b := NewHeadTailBuffer(4, 4, 0)
	b.sharePolls(&sig)
	lone := NewHeadTailBuffer(4, 4, 0)
	now := time.Second
	streak := func() *pacer { // a streak made, its last call at now
		var p pacer
		p.last.Store(uint64(now/time.Microsecond)<<8 | paceStreak)
		return &p
	}
	if b.paceDue(streak(), now+time.Microsecond) {
		t.Errorf("streak, no pump ever read: pause; want none")
	}
	sig.pumped.Store(int64(now / time.Microsecond))
	if !b.paceDue(streak(), now+time.Microsecond) {
		t.Errorf("streak, a pump read just now: no pause; want one")
	}
	if b.paceDue(streak(), now+paceActive) {
		// The streak goes on (a later call than the last), the pump not.
		t.Errorf("streak, the pump's last read paceActive ago: pause; want none")
	}
	if b.paceDue(new(pacer), now+time.Microsecond) {
		t.Errorf("first call, a pump read just now: pause; want none")
	}
	if lone.paceDue(streak(), now+time.Microsecond) {
		t.Errorf("buffer of no Process: pause; want none")
	}
	lone.pumped() // no Manager: nothing to note, and no panic

	// A pump's read is noted only when a millisecond passed since the
	// last noted one, so that pumps seldom write the line pollers read.
	// (Noted a second from now: within the millisecond however slow the
	// machine.)
	recent := int64((time.Since(paceEpoch) + time.Second) / time.Microsecond)
	sig.pumped.Store(recent)
	b.pumped()
	if got := sig.pumped.Load(); got != recent {
		t.Errorf("a read within a millisecond of the last noted: pumped %d; want %d kept", got, recent)
	}
	old := int64((time.Since(paceEpoch) - 2*time.Millisecond) / time.Microsecond)
	sig.pumped.Store(old)
	b.pumped()
	if got := sig.pumped.Load(); got <= old {
		t.Errorf("a read 2 ms or more after the last noted: pumped %d; want it moved past %d", got, old)
	}
}

// TestOutputPaced pins that Output consults the pacer of the rendering it
// returns again (so that a streak of tight pollers pauses), and that a
// call that must not pause (Manager.Run's one snapshot, outputPaced
// false) does not count in the streak; both return the rendering.
func TestOutputPaced(t *testing.T) {
	t.Parallel()
	b, _ := sharingBuffer("abc")
	if out := b.Output(); out.Text != "abc" {
		t.Fatalf("Output() = %q; want %q", out.Text, "abc")
	}
	r := b.rendered.Load()
	// A streak of 20 noted a minute from now: every call until then
	// continues it (pacer.paced), however slow the machine; no pump
	// read, so that nothing pauses.
	r.polled.last.Store(uint64((time.Since(paceEpoch)+time.Minute)/time.Microsecond)<<8 | 20)
	if out, paused := b.outputPaced(false); out.Text != "abc" || paused {
		t.Errorf("unpaced Output() = %q, paused %v; want %q, no pause", out.Text, paused, "abc")
	}
	if got := r.polled.last.Load() & 0xff; got != 20 {
		t.Errorf("streak after an unpaced Output = %d; want 20 (not counted)", got)
	}
	if out := b.Output(); out.Text != "abc" {
		t.Errorf("Output() = %q; want %q", out.Text, "abc")
	}
	if got := r.polled.last.Load() & 0xff; got != 21 {
		t.Errorf("streak after Output = %d; want 21 (counted)", got)
	}
}

// TestReadPaced pins which cursor reads count in a streak of tight reads
// (readPacedLocked): those of a running stream of a Process that could
// return less than a tail's worth and stop short of the end, and those
// that find nothing new at the end (a poller spinning there; a Follower
// blocks instead). Not a read that reaches the end with bytes, nor one of
// a tail's worth or more short of it, nor any read of a finished stream
// or of a buffer of no Process.
func TestReadPaced(t *testing.T) {
	t.Parallel()
	const head, tail = 4, 8
	stream := []byte("0123456789abcdefghij") // 20 bytes: head 4, tail 12..20
	var sig pollSignal
	b := NewHeadTailBuffer(head, tail, 0)
	b.sharePolls(&sig)
	_, _ = b.Write(stream)
	lone := NewHeadTailBuffer(head, tail, 0)
	_, _ = lone.Write(stream)
	read := func(b *HeadTailBuffer, cursor int64, size int) (Chunk, bool) {
		b.mu.Lock()
		defer b.mu.Unlock()
		c, p := b.readPacedLocked(cursor, make([]byte, size), size, false)
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
		{20, 2, true},     // at the end: nothing new
		{20, 64, true},    // nothing new, whatever the size
	} {
		if c, paced := read(b, tc.cursor, tc.size); paced != tc.paced {
			t.Errorf("running: read of %d from %d (%+v) paced %v; want %v", tc.size, tc.cursor, c, paced, tc.paced)
		}
		if c, paced := read(lone, tc.cursor, tc.size); paced {
			t.Errorf("buffer of no Process: read of %d from %d (%+v) paced; want not", tc.size, tc.cursor, c)
		}
	}
	b.Finish()
	if c, paced := read(b, 0, 2); paced {
		t.Errorf("finished: read of 2 from 0 (%+v) paced; want not", c)
	}
}

// tightStreak makes p's streak one that every call continues, pausing
// (pacer.paced): 20 calls noted a minute from now, however slow the
// machine.
func tightStreak(p *pacer) {
	p.last.Store(uint64((time.Since(paceEpoch)+time.Minute)/time.Microsecond)<<8 | 20)
}

// pacedSignal returns a Manager's signal whose pump read something a
// minute from now, so that its buffers' tight calls pause (paceDue), and
// whose pauses run nap instead of sleeping.
func pacedSignal(nap func()) *pollSignal {
	sig := &pollSignal{nap: nap}
	sig.pumped.Store(int64((time.Since(paceEpoch) + time.Minute) / time.Microsecond))
	return sig
}

// TestPausedCallsLookAgain pins that a paced call returns what is newest
// after its pause: Output renders again, and ReadSince and ReadSinceInto
// read again, so that bytes written during the pause are in what they
// return.
func TestPausedCallsLookAgain(t *testing.T) {
	t.Parallel()
	var b *HeadTailBuffer
	naps := 0
	sig := pacedSignal(func() {
		naps++
		_, _ = b.Write([]byte("+"))
	})
	b = NewHeadTailBuffer(4, 8, 0)
	b.sharePolls(sig)
	_, _ = b.Write([]byte("0123456789abcdefghij")) // 20 bytes
	b.Output()
	tightStreak(&b.rendered.Load().polled)
	if out := b.Output(); naps != 1 || !strings.HasSuffix(out.Text, "+") {
		t.Errorf("paced Output() = %q after %d pauses; want one pause and the byte it wrote", out.Text, naps)
	}

	for _, read := range []struct {
		name string
		read func() Chunk
	}{
		{"ReadSince", func() Chunk { return b.ReadSince(0, 2) }},
		{"ReadSinceInto", func() Chunk { return b.ReadSinceInto(0, make([]byte, 2)) }},
	} {
		naps = 0
		end := b.Len()
		b.mu.Lock()
		tightStreak(&b.flowLocked().pieces)
		b.mu.Unlock()
		// A read of 2 from 0 is in pieces: the head's first 2 bytes,
		// short of the end.
		if c := read.read(); naps != 1 || c.End != end+1 || string(c.Data) != "01" {
			t.Errorf("paced %s(0, 2) = %+v after %d pauses; want one pause, %q and End %d (the byte written during it)", read.name, c, naps, "01", end+1)
		}
	}
}

// TestSnapshotPausesOnce pins that a snapshot of a record with separate
// stderr pauses once at most (Process.snapshot): its output's pause
// leaves its stderr unpaced and uncounted, and Manager.Run's snapshot
// (paced false) never pauses.
func TestSnapshotPausesOnce(t *testing.T) {
	t.Parallel()
	naps := 0
	sig := pacedSignal(func() { naps++ })
	out, errOut := NewHeadTailBuffer(64, 64, 0), NewHeadTailBuffer(64, 64, 0)
	out.sharePolls(sig)
	errOut.sharePolls(sig)
	_, _ = out.Write([]byte("out"))
	_, _ = errOut.Write([]byte("err"))
	p := &Process{info: &Info{ID: "paced"}, out: out, errOut: errOut, done: make(chan struct{})}
	p.snapshot(false)
	outPolled, errPolled := &out.rendered.Load().polled, &errOut.rendered.Load().polled
	tightStreak(outPolled)
	tightStreak(errPolled)
	if s := p.snapshot(false); naps != 0 || s.Output.Text != "out" || s.Stderr.Text != "err" {
		t.Errorf("unpaced snapshot: %q, %q after %d pauses; want %q, %q and none", s.Output.Text, s.Stderr.Text, naps, "out", "err")
	}
	errStreak := errPolled.last.Load() & 0xff
	if s := p.snapshot(true); naps != 1 || s.Output.Text != "out" || s.Stderr.Text != "err" {
		t.Errorf("paced snapshot: %q, %q after %d pauses; want %q, %q and one pause", s.Output.Text, s.Stderr.Text, naps, "out", "err")
	}
	if got := errPolled.last.Load() & 0xff; got != errStreak {
		t.Errorf("stderr's streak after a snapshot whose output paused = %d; want %d (not counted)", got, errStreak)
	}
}
