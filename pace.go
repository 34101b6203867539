package proc

import (
	"sync/atomic"
	"time"
)

// Pacing tight pollers and readers (design section 10). A goroutine that
// calls Snapshot, Output or ReadSince in a loop holds a CPU for as long as
// it runs, and on two CPUs four of them leave the child and its pump a
// third of the machine however little each call costs: yielding
// (runtime.Gosched, sched_yield) gives the CPU away only to a thread
// already waiting for it. So a call that only repeats what a tight loop
// already had parks for a moment first, and its thread sleeps:
//
//   - Output (and so Snapshot) returning the same rendering again
//     (rendering.polled);
//   - a cursor read of a running stream that could return less than a
//     tail's worth and stops short of its end: a reader that reads in
//     pieces what the pump has long written, and loses it as it goes
//     (followState.pieces); a Follower's Read is paced the same way.
//
// Only buffers of a Process are paced, and only while a pump of its
// Manager reads (within paceActive of its last read, pollSignal.pumped):
// pausing helps nobody else. Such a call pauses once calls of its kind
// come in a streak of paceStreak, each within paceGap of the one before,
// whoever made them; the pause then
// counts as part of the streak, so that each further tight call pauses
// too, for pacePause (about a millisecond when the runtime's timers are
// coarse, on an idle host). A caller that looks twice, or now and then, or
// once at each of many records, never pauses unless tight pollers of the
// same record make the streak: it then pauses as they do. A pause delays
// when a tight poller sees a change; the call returns what is newest
// after it. It is taken in real time whatever Options.Clock is, as the
// pump's read deadline is: it decides only when a caller looks, never
// what it sees.

// paceEpoch is the origin of a pacer's times.
var paceEpoch = time.Now()

const (
	// paceGap is the longest time between two calls of a streak.
	paceGap = 50 * time.Microsecond
	// paceStreak is how many calls in a row within paceGap it takes
	// before each further one pauses.
	paceStreak = 16
	// pacePause is how long a paced call parks at least.
	pacePause = 200 * time.Microsecond
)

// pacer counts a streak of tight calls: the time of the last one, in
// microseconds since paceEpoch, shifted left by 8, ORed with how many
// calls in a row (at most 255) came within paceGap of the one before. Its
// zero value has seen no call; it is safe for concurrent use.
type pacer struct{ last atomic.Uint64 }

// paced notes a call at now (since paceEpoch) and reports whether the
// caller should pause: the call continues a streak of paceStreak or more.
// Callers race on the streak: one may overwrite another's update, which
// moves the first pause by a call or two.
func (p *pacer) paced(now time.Duration) bool {
	us := uint64(now / time.Microsecond)
	old := p.last.Load()
	streak := uint64(0)
	if old != 0 {
		// A later time stored meanwhile by another caller is as tight
		// as can be.
		us = max(us, old>>8)
		if us-old>>8 < uint64(paceGap/time.Microsecond) {
			streak = min(old&0xff+1, 0xff)
		}
	}
	p.last.Store(us<<8 | streak)
	return streak >= paceStreak
}

// resumed notes that a caller that paused woke at now: the streak goes on
// from then, so that the caller's next tight call pauses again.
func (p *pacer) resumed(now time.Duration) {
	us := uint64(now / time.Microsecond)
	if old := p.last.Load(); us > old>>8 {
		p.last.Store(us<<8 | old&0xff)
	}
}

// paceDue notes a call counted by p, of b, at now (since paceEpoch), and
// reports whether it should pause: it continues a streak (pacer.paced),
// and a pump of b's Manager read something within paceActive before (as
// pumped notes it: a millisecond late at most). Buffers of no Process
// are never paced.
func (b *HeadTailBuffer) paceDue(p *pacer, now time.Duration) bool {
	s := b.peers
	if s == nil {
		return false
	}
	last := s.pumped.Load()
	return p.paced(now) && last != 0 && int64(now/time.Microsecond)-last < int64(paceActive/time.Microsecond)
}

// paceActive is how long after a pump of a Manager last read something
// the callers of its buffers are paced.
const paceActive = 10 * time.Millisecond

// pumped notes that b's pump read something (pump.writeRead). It stores
// the time only when it moved by a millisecond or more, so that pumps
// seldom write the cache line every poller reads; 0 stands for never, so
// it stores at least 1.
func (b *HeadTailBuffer) pumped() {
	if s := b.peers; s != nil {
		us := max(int64(time.Since(paceEpoch)/time.Microsecond), 1)
		if us-s.pumped.Load() >= int64(time.Millisecond/time.Microsecond) {
			s.pumped.Store(us)
		}
	}
}

// pause parks a call that paceDue said should pause, for pacePause.
func (b *HeadTailBuffer) pause(p *pacer) {
	if nap := b.peers.nap; nap != nil {
		nap()
	} else {
		time.Sleep(pacePause)
	}
	p.resumed(time.Since(paceEpoch))
}

// paceRead reports whether the caller of a read in pieces, which
// continues a tight streak of them, paused: it then reads again, so as to
// return what is newest after the pause. p is its pacer
// (readPacedLocked), nil for any other read.
func (b *HeadTailBuffer) paceRead(p *pacer) bool {
	if p != nil && b.paceDue(p, time.Since(paceEpoch)) {
		b.pause(p)
		return true
	}
	return false
}

// pollSignal is what the buffers of one Manager share: set by Output
// when it returns an unchanged rendering of any of them, and cleared by a
// pump (takePeersPolled). Tight pollers of one record, final ones
// included, keep the Ps from the pumps of the other records of the same
// Manager as much as from their own record's; a Manager's pollers never
// change how another Manager's pumps read (design section 10).
type pollSignal struct {
	atomic.Bool
	// pumps counts the Manager's pumps that try their pipes between the
	// pollers' turns (pump.read; render.go reads it).
	pumps atomic.Int32
	// pumped is when a pump of the Manager last read something, in
	// microseconds since paceEpoch (pace.go).
	pumped atomic.Int64
	// nap, if not nil, is a paced call's pause instead of sleeping for
	// pacePause (pause): set by tests before the buffers are shared.
	nap func()
}

// polledLately reports whether Output returned an unchanged rendering of
// b, or of another buffer of its Manager, since a pump last took the
// signal.
func (b *HeadTailBuffer) polledLately() bool {
	return b.polled.Load() || b.peers != nil && b.peers.Load()
}

// takePolled reports whether Output returned an unchanged rendering of b
// since the last call, and clears the signal.
func (b *HeadTailBuffer) takePolled() bool {
	return b.polled.Load() && b.polled.Swap(false)
}

// takePeersPolled is takePolled for the signal b shares with the other
// buffers of its Manager; false for a buffer that shares none.
func (b *HeadTailBuffer) takePeersPolled() bool {
	return b.peers != nil && b.peers.Load() && b.peers.Swap(false)
}

// sharePolls makes b share the polling signal of the Manager that owns it
// (Process.begin, before any pump or reader sees b).
func (b *HeadTailBuffer) sharePolls(s *pollSignal) { b.peers = s }
