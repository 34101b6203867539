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
//   - a cursor read of a running stream that stops short of its end
//     without a follower's lease behind it: a reader that reads in
//     pieces what the pump has long written, and loses it as it goes
//     (followState.pieces).
//
// Either pauses once such calls come in a streak of paceStreak, each
// within paceGap of the one before (by any caller), and then on every
// further one, for pacePause. A caller that looks twice, or now and then,
// or once at each of many records, never pauses; neither does a follower
// the pump helps, nor a reader of a finished stream. A pause delays when
// a tight poller sees a change by pacePause (about a millisecond at most
// when the runtime's timers are coarse). It is taken in real time
// whatever Options.Clock is, as the pump's read deadline is: it decides
// only when a caller looks, never what it sees.
//
// Measured (BenchmarkPolled, interleaved in one run, idle), four tight
// pollers of the 512 MiB capture's own record slowed it 0.96x and 1.06x
// with pacing against 1.31x and 1.29x without; of another, final record
// 1.03x against 1.15x.

// paceEpoch is the origin of a pacer's times.
var paceEpoch = time.Now()

const (
	// paceGap is the longest time between two calls of a streak.
	paceGap = 50 * time.Microsecond
	// paceStreak is how many calls in a row within paceGap it takes
	// before each further one pauses.
	paceStreak = 16
	// pacePause is how long a paced call parks.
	pacePause = 200 * time.Microsecond
)

// pacer counts a streak of tight calls: the time of the last one, in
// microseconds since paceEpoch, shifted left by 8, ORed with how many
// calls in a row (at most 255) came within paceGap of the one before. Its
// zero value has seen no call; it is safe for concurrent use.
type pacer struct{ last atomic.Uint64 }

// paced notes a call at now (since paceEpoch) and reports whether the
// caller should pause: the call continues a streak of paceStreak or more.
// Callers race on the streak; a lost update only moves the first pause
// by a call or two.
func (p *pacer) paced(now time.Duration) bool {
	us := uint64(now / time.Microsecond)
	old := p.last.Load()
	streak := uint64(0)
	// A time before old's (another caller's, stored meanwhile) wraps to
	// a large gap: the streak starts anew.
	if old != 0 && us-old>>8 < uint64(paceGap/time.Microsecond) {
		streak = min(old&0xff+1, 0xff)
	}
	p.last.Store(us<<8 | streak)
	return streak >= paceStreak
}
