package proc

import (
	"errors"
	"os"
	"slices"
	"sync/atomic"
	"time"
)

// The follow window and the pump's holds (design section 20).
//
// A buffer keeps, beyond head and tail, a ring of the newest bytes of
// its stream (the window) while someone may read them soon: while a
// WaitOutput waits or returned less than waiterKeep ago (a poller's loop
// reads after its wait, not during it), and while a Follower is open. It
// holds waiterWindow bytes for waiters and as many as the largest open
// follower asked for, and every cursor read from a cursor it holds reads
// from it, so the window keeps no state per reader. Without waiters it
// keeps nothing from before the oldest follower's cursor, so its storage
// grows only as far as followers fall behind.
//
// Only the pump obeys the followers (Write never waits): before it would
// write over the unread bytes of a follower that keeps up
// (follower.keeps), it wakes the follower and waits, at most that
// follower's MaxHold from its wake (follower.woken). The bounds of
// several followers run at the same time. A follower that has not read up
// to where the stream ended at its wake (follower.target) by then stops
// being waited for until one of its own reads reaches the end again.
//
// Every hand-off between the pump and a follower costs more than the
// bytes it moves (a goroutine made runnable takes a CPU from the child),
// so the two take turns: the pump leaves a waiting follower asleep while
// the window keeps its bytes (writeQuiet), and wakes it when it must wait
// for room anyway, before a tee's Write, at the end of its pipe, or
// followLatency after the first byte it left unannounced (a read
// deadline: pump.armWake), whichever comes first.

const (
	// DefaultFollowWindow is the window of a follower whose
	// FollowOptions.Window is 0.
	DefaultFollowWindow = 1 << 20
	// MaxFollowWindow is the largest FollowOptions.Window.
	MaxFollowWindow = 16 << 20
	// DefaultFollowHold is the hold of a follower whose
	// FollowOptions.MaxHold is 0.
	DefaultFollowHold = 5 * time.Millisecond
	// MaxFollowHold is the largest FollowOptions.MaxHold.
	MaxFollowHold = 20 * time.Millisecond
)

const (
	// minFollowWindow is the least window a follower gets: less would
	// cost a hand-off every few pump reads.
	minFollowWindow = 64 << 10
	// waiterWindow is the window kept for WaitOutput callers: an old-API
	// loop that reads each wake within a few milliseconds loses nothing
	// at 50 MB/s.
	waiterWindow = 1 << 20
	// waiterKeep is how long after the last WaitOutput returned the
	// window is kept for waiters.
	waiterKeep = 100 * time.Millisecond
	// followLatency is the longest the pump leaves a waiting follower
	// unwoken after writing bytes past its cursor (pump.armWake): short
	// next to anything a person notices, long next to the pause of a pump
	// that read a full pipe empty.
	followLatency = time.Millisecond
	// minWindowRead is the least contiguous free storage of the window
	// the pump reads into (readTarget), or a quarter of the window if
	// that is less; with less it reads into its own buffer.
	minWindowRead = 16 << 10
)

// followState is a buffer's window and followers, made by the first
// WaitOutput, Follow or paced read. The buffer's mu guards it, but for
// pieces.
type followState struct {
	followers []*follower
	// reading counts the followers blocked in Read; waiters (the
	// buffer's) those blocked in WaitOutput.
	reading int32
	// lastWait is when a WaitOutput last returned or began, since
	// paceEpoch; zero for never.
	lastWait time.Duration
	roomc    chan struct{}
	// window is a ring holding the newest windowLen bytes of the stream
	// from window[windowPos].
	window    []byte
	windowPos int
	windowLen int
	// testMax, if not zero, replaces the window's size (tests).
	testMax int
	// pieces paces tight loops of reads in pieces (readPacedLocked); it
	// is safe for concurrent use.
	pieces pacer
}

// flowLocked returns b's followState, made if need be.
func (b *HeadTailBuffer) flowLocked() *followState {
	if b.flow == nil {
		b.flow = &followState{}
	}
	return b.flow
}

// windowMaxLocked is the window's size now: the largest window an open
// follower asked for, waiterWindow while WaitOutput is in use, and 0
// when nobody waits or follows. now is since paceEpoch.
func (b *HeadTailBuffer) windowMaxLocked(now time.Duration) int {
	f := b.flow
	size := 0
	if b.waiters > 0 || f.lastWait != 0 && now-f.lastWait < waiterKeep {
		size = waiterWindow
	}
	for _, s := range f.followers {
		size = max(size, s.window)
	}
	if size > 0 && f.testMax > 0 {
		size = f.testMax
	}
	return size
}

// oldestLocked returns the cursor before which the window need keep
// nothing: the oldest follower's, or end when waiters use the window or
// none is before it.
func (b *HeadTailBuffer) oldestLocked(end int64, now time.Duration) int64 {
	f := b.flow
	if b.waiters > 0 || f.lastWait != 0 && now-f.lastWait < waiterKeep {
		return 0
	}
	for _, s := range f.followers {
		end = min(end, s.cursor)
	}
	return end
}

// keepLocked adds p, just written (total counts it), to the window, and
// frees the window once nobody waits or follows.
func (b *HeadTailBuffer) keepLocked(p []byte) {
	f := b.flow
	now := time.Since(paceEpoch)
	size := b.windowMaxLocked(now)
	if size == 0 {
		f.window, f.windowPos, f.windowLen = nil, 0, 0
		return
	}
	before := b.total - int64(len(p))
	f.dropLocked(f.windowLen - int(min(int64(f.windowLen), max(before-b.oldestLocked(before, now), 0))))
	if f.windowLen > size {
		f.dropLocked(f.windowLen - size)
	}
	if need := min(f.windowLen+len(p), size); need > len(f.window) || len(f.window) > size {
		f.resizeLocked(min(max(2*len(f.window), need), size))
	}
	w := (f.windowPos + f.windowLen) % len(f.window)
	if f.windowLen+len(p) <= len(f.window) && &p[0] == &f.window[w] {
		f.windowLen += len(p) // the pump read p into place (readTarget)
		return
	}
	if len(p) >= len(f.window) {
		copy(f.window, p[len(p)-len(f.window):])
		f.windowPos, f.windowLen = 0, len(f.window)
		return
	}
	k := copy(f.window[w:], p)
	copy(f.window, p[k:])
	f.windowLen += len(p)
	if over := f.windowLen - len(f.window); over > 0 {
		f.dropLocked(over)
	}
}

// dropLocked drops the window's n oldest bytes.
func (f *followState) dropLocked(n int) {
	if n > 0 {
		f.windowPos = (f.windowPos + n) % len(f.window)
		f.windowLen -= n
	}
}

// resizeLocked moves the window into new storage of size bytes, keeping
// its newest bytes.
func (f *followState) resizeLocked(size int) {
	w := make([]byte, size)
	f.dropLocked(f.windowLen - size)
	if f.windowLen > 0 {
		k := copy(w, f.window[f.windowPos:min(f.windowPos+f.windowLen, len(f.window))])
		copy(w[k:], f.window[:f.windowLen-k])
	}
	f.window, f.windowPos = w, 0
}

// windowHoldsLocked reports whether a read from cursor, past the head,
// is served from the window: it holds the bytes from cursor to the end.
// Once the buffer is finished only followers' reads (own) use it.
func (b *HeadTailBuffer) windowHoldsLocked(cursor int64, own bool) bool {
	f := b.flow
	return f != nil && (own || !b.finished) && f.windowLen > b.tailLen &&
		cursor < b.total && cursor >= b.total-int64(f.windowLen)
}

// windowStartLocked is the first stream byte the window holds, when it
// holds more than the tail: reads skip to it rather than to the tail.
func (b *HeadTailBuffer) windowStartLocked(own bool) (int64, bool) {
	f := b.flow
	if f == nil || !own && b.finished || f.windowLen <= b.tailLen {
		return 0, false
	}
	return b.total - int64(f.windowLen), true
}

// copyWindowLocked fills dst with the window's bytes from offset from.
func (b *HeadTailBuffer) copyWindowLocked(dst []byte, from int64) {
	f := b.flow
	k := copy(dst, f.window[b.windowIndexLocked(from):])
	copy(dst[k:], f.window)
}

// windowIndexLocked returns where in the window's ring the stream byte
// at off is, which the window must hold.
func (b *HeadTailBuffer) windowIndexLocked(off int64) int {
	f := b.flow
	return (f.windowPos + int(off-(b.total-int64(f.windowLen)))) % len(f.window)
}

// windowByteLocked returns the stream byte at off and whether the window
// holds it.
func (b *HeadTailBuffer) windowByteLocked(off int64) (byte, bool) {
	if !b.windowHoldsLocked(off, false) {
		return 0, false
	}
	return b.flow.window[b.windowIndexLocked(off)], true
}

// readTarget returns where the pump reads its next bytes, given its read
// buffer buf, and how many at most (size, len(buf)). While the window is
// kept and has minWindowRead bytes of contiguous free storage, p is that
// storage: the pump reads the pipe straight into the window, and
// keepLocked, finding the bytes in place, copies only what head and tail
// keep. Only the pump writes the window and no reader sees its free part,
// so the pump fills it without the lock; a window freed or moved
// meanwhile leaves the bytes in p, which keepLocked copies as any others.
func (b *HeadTailBuffer) readTarget(buf []byte) (p []byte, size int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.flow
	if f == nil || b.finished || len(f.window) == 0 {
		return buf, len(buf)
	}
	f.dropLocked(f.windowLen - int(min(int64(f.windowLen), max(b.total-b.oldestLocked(b.total, time.Since(paceEpoch)), 0))))
	if f.windowLen == 0 {
		f.windowPos = 0
	}
	if f.windowLen == len(f.window) {
		return buf, len(buf)
	}
	w := (f.windowPos + f.windowLen) % len(f.window)
	free := f.window[w:]
	if w < f.windowPos {
		free = f.window[w:f.windowPos]
	}
	if len(free) < min(minWindowRead, len(f.window)/4) {
		return buf, len(buf)
	}
	return free[:min(len(free), len(buf))], len(buf)
}

// room returns how many of the next n bytes the pump can write without
// dropping a byte a keeping-up follower has not read.
func (b *HeadTailBuffer) room(n int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.roomLocked(n, false)
}

// roomLocked is room's count; mark marks the followers that leave no
// room as those the pump waits for (follower.blocking).
func (b *HeadTailBuffer) roomLocked(n int, mark bool) int {
	f := b.flow
	if f == nil || b.finished {
		return n
	}
	k := int64(n)
	windowStart := b.total - int64(f.windowLen)
	size := int64(b.windowMaxLocked(time.Since(paceEpoch)))
	for _, s := range f.followers {
		if !s.keeps {
			continue
		}
		// A write of k bytes drops what is left of [headMax,
		// total+k-tailMax) from the tail, and of [0, total+k-size) from
		// the window, which holds the bytes from s.cursor on if it holds
		// s.cursor.
		kept := max(s.cursor, int64(b.headMax)) + int64(b.tailMax)
		if s.cursor >= windowStart {
			kept = max(kept, s.cursor+size)
		}
		if kept-b.total <= 0 && mark {
			s.blocking = true
		}
		k = min(k, kept-b.total)
	}
	return int(max(k, 0))
}

// wakeFollowers wakes the readers that writeQuiet left waiting, and
// starts the bound of each keeping-up follower with bytes to read.
func (b *HeadTailBuffer) wakeFollowers(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.wakeLocked()
	if b.flow != nil {
		b.stampLocked(now)
	}
}

// stampLocked starts the bound of the keeping-up followers with bytes to
// read that have none, and ends the hold of those whose bound passed.
func (b *HeadTailBuffer) stampLocked(now time.Time) {
	for _, s := range b.flow.followers {
		switch {
		case !s.keeps || s.cursor >= b.total:
		case s.woken.IsZero():
			s.woken, s.target = now, b.total
		case now.Sub(s.woken) >= s.maxHold:
			s.keeps, s.woken = false, time.Time{}
		}
	}
}

// hold is called by a pump that found no room for n bytes, with the time
// now: it ends the holds whose bound passed and returns how many bytes
// the pump can write now; when none, how long it may wait at most before
// it calls hold again, and a channel that gets a token when a follower
// reads or goes.
func (b *HeadTailBuffer) hold(n int, now time.Time) (int, time.Duration, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.flow == nil {
		return n, 0, nil
	}
	b.stampLocked(now)
	if k := b.roomLocked(n, true); k > 0 {
		return k, 0, nil
	}
	wait, roomc := b.waitLocked(now)
	return 0, wait, roomc
}

// settle is hold for a pump at the end of its pipe: it reports whether
// every keeping-up follower has read to the end; if not, how long the
// pump may wait at most, and the channel hold returns.
func (b *HeadTailBuffer) settle(now time.Time) (bool, time.Duration, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.flow == nil {
		return true, 0, nil
	}
	b.stampLocked(now)
	for _, s := range b.flow.followers {
		if s.keeps && s.cursor < b.total {
			wait, roomc := b.waitLocked(now)
			return false, wait, roomc
		}
	}
	return true, 0, nil
}

// waitLocked returns how long a pump may wait for the followers it holds
// for, at most, and the channel that gets a token when one reads or goes.
func (b *HeadTailBuffer) waitLocked(now time.Time) (time.Duration, <-chan struct{}) {
	f := b.flow
	wait := MaxFollowHold
	for _, s := range f.followers {
		if s.keeps && !s.woken.IsZero() {
			wait = min(wait, s.maxHold-now.Sub(s.woken))
		}
	}
	if f.roomc == nil {
		f.roomc = make(chan struct{}, 1)
	}
	return max(wait, 0), f.roomc
}

// addHeld adds d, a wait of the pump, to the followers it waited for.
func (b *HeadTailBuffer) addHeld(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.flow != nil {
		for _, s := range b.flow.followers {
			if s.blocking {
				s.held += d
				s.blocking = false
			}
		}
	}
}

// signalRoomLocked wakes a pump waiting for room. One token at most: a
// pump that finds one left over looks at the room again and waits anew.
func (b *HeadTailBuffer) signalRoomLocked() {
	if f := b.flow; f != nil && f.roomc != nil {
		select {
		case f.roomc <- struct{}{}:
		default:
		}
	}
}

// dropHolds ends every hold: the pump is stopped (Manager.Close). A
// follower is held for again once one of its reads reaches the end.
func (b *HeadTailBuffer) dropHolds() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.flow != nil {
		for _, s := range b.flow.followers {
			s.keeps, s.woken, s.blocking = false, time.Time{}, false
		}
		b.signalRoomLocked()
	}
}

// lazyWakeLocked reports whether a Write may leave the readers waiting
// now for the pump to wake (writeQuiet): only followers wait, and the
// window keeps what they have not read.
func (b *HeadTailBuffer) lazyWakeLocked() bool {
	f := b.flow
	return f != nil && b.waiters == 0 && f.reading > 0 && len(f.window) > 0
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

// writeQuiet stores b as pump.write does, but leaves waking the readers
// waiting to the pump: at once when others than followers wait or there
// is no window (lazyWakeLocked), and otherwise once the pump waits for
// room, writes to a tee, ends, or followLatency has passed (armWake).
func (pu *pump) writeQuiet(b []byte) {
	pu.log.write(b)
	if pu.tee != nil {
		// A tee's Write may block: nobody waits for a wake meanwhile.
		pu.wakeNow()
		pu.tee.write(b)
	}
	waiting, now := pu.dst.writeQuiet(b)
	pu.watch.scan(b)
	if !waiting {
		return
	}
	if !pu.wakeDue {
		pu.wakeDue = true
		if !now {
			now = !pu.armWake()
		}
	}
	if now {
		pu.wakeNow()
	}
}

// wakeNow wakes the readers waiting for a wake the pump owes them, and
// starts the bounds of the followers among them.
func (pu *pump) wakeNow() {
	if !pu.wakeDue {
		return
	}
	pu.wakeDue = false
	pu.dst.wakeFollowers(pu.clock.Now("pump", "follower"))
	if pu.deadline {
		pu.deadline = false
		pu.setDeadline(time.Time{})
	}
}

// armWake sets a read deadline followLatency from now, so that a read
// that waits longer for the child returns and the pump wakes the readers
// waiting (wakeLate); it reports false where reads take no deadline
// (Windows pipes): the pump then wakes them at once. The deadline is the
// poller's, so it is taken in real time rather than on Options.Clock: it
// decides only how late within followLatency a wake comes, never whether.
func (pu *pump) armWake() bool {
	if !pu.setDeadline(time.Now().Add(followLatency)) {
		return false
	}
	pu.deadline = true
	return true
}

// setDeadline sets r's read deadline to t without undoing a stop: stop
// sets stopping before its own deadline, so a stop that came before the
// check below has its deadline set again here, and one after it sets it
// after this one. Where r takes no deadline it reports false.
func (pu *pump) setDeadline(t time.Time) bool {
	if err := pu.r.SetReadDeadline(t); err != nil {
		return false
	}
	if pu.stopping.Load() {
		stopReading(pu.r)
	}
	return true
}

// wakeLate reports whether err, from a read, is the deadline armWake set
// (and not a stop), after waking the readers waiting: the pump then reads
// on.
func (pu *pump) wakeLate(err error) bool {
	if !pu.deadline || pu.stopping.Load() || !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	pu.wakeNow()
	return true
}

// settleFollowers is called by a pump at the end of its pipe: it lets
// the keeping-up followers read to the end, each within its bound, or
// until the pump is stopped. It waits MaxFollowHold at most in all, in
// real time whatever Options.Clock is: a follower that stopped reading
// must not hold the record's end until a test's mock clock moves. The
// window outlives Finish for open followers, so this decides only how
// soon they read, never what.
func (pu *pump) settleFollowers() {
	pu.wakeNow()
	limit := time.Now().Add(MaxFollowHold)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	pu.holding.Store(true)
	defer pu.holding.Store(false)
	for {
		done, wait, roomc := pu.dst.settle(pu.clock.Now("pump", "follower"))
		if done {
			return
		}
		wait = min(wait, time.Until(limit))
		if wait <= 0 {
			return
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-roomc:
		case <-pu.stopped():
			pu.dst.dropHolds()
			return
		case <-timer.C:
		}
	}
}

// removeFollowerLocked unregisters s, and frees the window of a finished
// buffer nobody follows any more.
func (b *HeadTailBuffer) removeFollowerLocked(s *follower) {
	f := b.flow
	if i := slices.Index(f.followers, s); i >= 0 {
		f.followers = slices.Delete(f.followers, i, i+1)
	}
	if b.finished && len(f.followers) == 0 {
		f.window, f.windowPos, f.windowLen = nil, 0, 0
	}
	b.signalRoomLocked()
}
