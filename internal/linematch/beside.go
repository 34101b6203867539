package linematch

import (
	"bytes"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/quartz"
)

// Backlog is the most bytes of lines a Beside holds for its matcher
// before it skips them.
const Backlog = 1 << 20

// Beside runs a Matcher beside the goroutine that feeds it: it is a Sink
// that copies the lines it is given into a backlog and never waits, and a
// goroutine of its own matches them. That goroutine is started when lines
// arrive and nobody matches, and ends when the backlog is empty (or Close
// gave up on it); Close waits for it. When the backlog would exceed
// Backlog bytes, the lines in it are dropped and the matcher skips to the
// newest line given; until it has matched all it holds, it skips so at
// every chunk given (the lines before a chunk's last are only counted,
// never copied). Before it matches the next line the goroutine calls skip
// with how many it never matched. Match and skip are called on that
// goroutine, one call at a time.
//
// The goroutine yields to the Go scheduler between slices of a few KiB
// of lines, so that the feeder, woken by its next read, does not wait
// for a P behind it. It keeps the priority of its process: a thread of
// lower priority would hold its P (and the garbage collector's
// stop-the-world) while the system ran others. Instead it keeps to a
// Budget: a goroutine that matched for its Busy time within a Window
// sleeps out the rest of the Window, and its thread leaves the CPU to the
// feeder and to whatever the feeder waits for (a child writing the
// stream). Yielding alone would give the CPU only to a thread already
// waiting for it.
type Beside struct {
	m      *Matcher
	skip   func(lines int64)
	budget Budget
	// closing is closed by Close: a goroutine sleeping out its Window
	// wakes, and matches what is left without a Budget.
	closing chan struct{}
	// window and spent are the Window the goroutine keeps to, and how long
	// it matched in it; used on the goroutine only.
	window time.Time
	spent  time.Duration
	// live is m.Live() as of the last line matched, for the feeder.
	live atomic.Int64
	// cut is set when lines are dropped while the goroutine matches an
	// entry: it skips the rest of that entry too, older than what was
	// dropped.
	cut atomic.Bool

	// mu guards the fields below. Nothing is called under it.
	mu     sync.Mutex
	queue  []backlogEntry // the lines not yet taken, oldest first
	queued int            // bytes in queue
	lost   int64          // lines dropped since the goroutine last said so
	// ended is made when the goroutine starts and closed as it ends; nil
	// when it does not run.
	ended   chan struct{}
	closed  bool // Close was called: no more lines are taken
	giveUp  bool // Close gave up: the goroutine drops what is queued
	dropped bool // lines were dropped once: the matcher cannot keep pace
	// behind: lines were dropped since the goroutine last found the
	// backlog empty; each chunk given then keeps only its newest line.
	behind bool
	spare  [][]byte // buffers of entries matched, for reuse
}

// backlogEntry is lines of the backlog: complete lines, each ending in
// '\n', or (line) one line without it, over as Sink.Line has it.
type backlogEntry struct {
	b          []byte
	line, over bool
}

// maxSpare bounds the buffers a Beside keeps for reuse, and spareSize
// their size: as many as a backlog's worth, so that a feeder whose lines
// are dropped allocates nothing. sliceSize is about the bytes of lines
// matched between two yields or looks at the Budget: with many patterns
// without a literal, a millisecond or two.
const (
	spareSize = 64 << 10
	maxSpare  = Backlog/spareSize + 2
	sliceSize = 1 << 10
)

// Budget bounds the time a Beside's goroutine matches: at most Busy in
// each Window of Clock's time, as long as Close has not been called. A
// Budget without a Clock, or whose Busy or Window is not positive,
// matches without a bound.
//
// Time is measured on the wall, between reads of Clock around each slice
// of lines matched: a goroutine that waits for a CPU while it matches
// counts that wait as spent, so that on a busy machine it takes less
// than Busy of CPU, never more. A mock Clock that does not move spends
// nothing.
type Budget struct {
	Clock  quartz.Clock
	Busy   time.Duration
	Window time.Duration
}

// NewBeside returns a Beside that runs m within budget, and calls skip
// (on its goroutine) with the lines it skipped. It starts no goroutine.
func NewBeside(m *Matcher, skip func(lines int64), budget Budget) *Beside {
	b := &Beside{m: m, skip: skip, budget: budget, closing: make(chan struct{})}
	b.live.Store(int64(m.Live()))
	return b
}

// Live returns the number of patterns not yet done, as of the last line
// matched: once it is 0, lines are no longer taken.
func (b *Beside) Live() int { return int(b.live.Load()) }

// Lines takes a copy of region (complete lines) into the backlog.
func (b *Beside) Lines(region []byte) { b.push(region, false, false) }

// Line takes a copy of one line into the backlog.
func (b *Beside) Line(line []byte, over bool) { b.push(line, true, over) }

func (b *Beside) push(p []byte, line, over bool) {
	if b.live.Load() == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	if b.behind || b.queued+len(p) > Backlog && len(b.queue) > 0 {
		b.dropLocked()
		if !line {
			p = b.newestLocked(p)
		}
	}
	var buf []byte
	if n := len(b.spare); n > 0 && len(p) <= spareSize {
		buf, b.spare = b.spare[n-1], b.spare[:n-1]
	}
	b.queue = append(b.queue, backlogEntry{b: append(buf, p...), line: line, over: over})
	b.queued += len(p)
	if b.ended == nil {
		b.ended = make(chan struct{})
		// Ends when the backlog is empty; Close waits for it.
		go b.run(b.ended)
	}
}

// newestLocked returns the last line of region (complete lines), and
// counts those before it lost.
func (b *Beside) newestLocked(region []byte) []byte {
	i := bytes.LastIndexByte(region[:len(region)-1], '\n') + 1
	b.lost += int64(bytes.Count(region[:i], []byte{'\n'}))
	b.behind = b.behind || i > 0
	return region[i:]
}

// dropLocked drops the queued lines, counting them lost.
func (b *Beside) dropLocked() {
	b.dropped = b.dropped || len(b.queue) > 0
	b.behind = b.behind || len(b.queue) > 0
	if len(b.queue) > 0 {
		b.cut.Store(true)
	}
	for i, e := range b.queue {
		if e.line {
			b.lost++
		} else {
			b.lost += int64(bytes.Count(e.b, []byte{'\n'}))
		}
		b.recycleLocked(e.b)
		b.queue[i] = backlogEntry{}
	}
	b.queue, b.queued = b.queue[:0], 0
}

// recycleLocked keeps buf for reuse if it is small and few are kept.
func (b *Beside) recycleLocked(buf []byte) {
	if cap(buf) <= spareSize && len(b.spare) < maxSpare {
		b.spare = append(b.spare, buf[:0])
	}
}

// run matches the backlog, oldest first, until it is empty, and then
// closes ended.
func (b *Beside) run(ended chan struct{}) {
	var done []byte
	for {
		b.mu.Lock()
		if done != nil {
			b.recycleLocked(done)
		}
		if b.giveUp {
			b.dropLocked()
		}
		if len(b.queue) == 0 {
			lost := b.lost
			b.lost, b.ended, b.behind = 0, nil, false
			b.mu.Unlock()
			if lost > 0 {
				b.skip(lost)
			}
			close(ended)
			return
		}
		e := b.queue[0]
		b.queue[0] = backlogEntry{}
		b.queue = b.queue[1:]
		b.cut.Store(false)
		b.queued -= len(e.b)
		lost := b.lost
		b.lost = 0
		b.mu.Unlock()
		if lost > 0 {
			b.skip(lost)
		}
		if e.line {
			began := b.now()
			b.m.Line(e.b, e.over)
			b.spend(began)
		} else {
			b.matchSliced(e.b)
		}
		b.live.Store(int64(b.m.Live()))
		done = e.b
	}
}

// matchSliced matches region, complete lines, a slice of about sliceSize
// bytes at a time, and yields (or keeps to its Budget) between them. Once
// lines were dropped meanwhile (cut), it counts the rest lost instead.
func (b *Beside) matchSliced(region []byte) {
	for len(region) > 0 {
		n := len(region)
		if n > sliceSize {
			n = sliceSize + bytes.IndexByte(region[sliceSize:], '\n') + 1 // the region ends with '\n'
		}
		began := b.now()
		b.m.Lines(region[:n])
		if !b.spend(began) && len(region) > n {
			runtime.Gosched()
		}
		region = region[n:]
		if len(region) > 0 && b.cut.Load() {
			b.mu.Lock()
			b.lost += int64(bytes.Count(region, []byte{'\n'}))
			b.mu.Unlock()
			return
		}
	}
}

// now reads the Budget's clock; the zero time without one.
func (b *Beside) now() time.Time {
	if b.budget.Clock == nil {
		return time.Time{}
	}
	return b.budget.Clock.Now("linematch", "budget")
}

// spend counts the time since began as matched in the current Window
// (which begins anew once one has passed), and once it reaches Busy,
// sleeps until the share matched is Busy of Window again (the rest of the
// Window; longer for a slice that ran over), or until Close. It reports
// whether it slept.
func (b *Beside) spend(began time.Time) bool {
	if b.budget.Clock == nil || b.budget.Busy <= 0 || b.budget.Window <= 0 {
		return false
	}
	now := b.now()
	if now.Sub(b.window) >= b.budget.Window {
		b.window, b.spent = began, 0
	}
	b.spent += now.Sub(began)
	if b.spent < b.budget.Busy {
		return false
	}
	rest := time.Duration(float64(b.spent)*float64(b.budget.Window)/float64(b.budget.Busy)) - now.Sub(b.window)
	select {
	case <-b.closing:
		return false
	default:
		if rest <= 0 {
			b.window, b.spent = now, 0
			return false
		}
	}
	t := b.budget.Clock.NewTimer(rest, "linematch", "budget")
	defer t.Stop("linematch", "budget")
	select {
	case <-t.C:
	case <-b.closing:
	}
	b.window, b.spent = b.now(), 0
	return true
}

// Close takes no more lines, and waits until the lines taken before are
// matched, without a Budget, and the goroutine has ended. A matcher that
// could not keep pace (it dropped lines before) skips at once to the
// newest entry of its backlog, so that the end of the stream is matched
// without waiting for a backlog it would not match in time. If giveUp fires first (nil:
// never), the lines still queued are dropped and reported to skip, and
// Close waits only for the lines being matched.
func (b *Beside) Close(giveUp <-chan time.Time) {
	b.mu.Lock()
	select {
	case <-b.closing:
	default:
		close(b.closing)
	}
	b.closed = true
	if n := len(b.queue); b.dropped && n > 1 {
		newest := b.queue[n-1]
		b.queue = b.queue[:n-1]
		b.dropLocked()
		b.queue, b.queued = append(b.queue, newest), len(newest.b)
	}
	ended := b.ended
	b.mu.Unlock()
	if ended == nil {
		return
	}
	select {
	case <-ended:
		return
	case <-giveUp:
	}
	b.mu.Lock()
	b.giveUp = true
	b.mu.Unlock()
	<-ended
}

// GaveUp reports whether Close gave up waiting for the backlog.
func (b *Beside) GaveUp() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.giveUp
}

// Running reports whether the goroutine runs: whether Close may wait.
func (b *Beside) Running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ended != nil
}
