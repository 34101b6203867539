package proc

import (
	"slices"
	"time"
)

// The window and the pump's holds (design section 20).
//
// A buffer keeps, beyond head and tail, a ring of the newest bytes (the
// window) while WaitOutput waits or returned less than waiterKeep ago (a
// loop reads after its wait), and while a Follower is open: waiterWindow
// bytes for waiters, and as many as the largest open follower asked for.
// Every read from a cursor it holds reads from it; it keeps no state per
// reader, and without waiters nothing before the oldest follower's cursor.
//
// Only the pump obeys followers (Write never waits): before it would
// write over the unread bytes of a follower that keeps up (follower.keeps)
// it wakes the follower and waits, at most that follower's MaxHold from
// its wake (follower.woken); the bounds of several followers run at the
// same time. A follower that has not read up to where the stream ended at
// its wake (follower.target) by then is not waited for until one of its
// own reads reaches the end again. No read size or timing decides who is
// waited for: the owner is known.

const (
	// DefaultFollowWindow is FollowOptions.Window's default.
	DefaultFollowWindow = 1 << 20
	// MaxFollowWindow is the largest FollowOptions.Window.
	MaxFollowWindow = 16 << 20
	// DefaultFollowHold is FollowOptions.MaxHold's default.
	DefaultFollowHold = 5 * time.Millisecond
	// MaxFollowHold is the largest FollowOptions.MaxHold.
	MaxFollowHold = 20 * time.Millisecond

	// minFollowWindow is the least window a follower gets: less would
	// cost a hand-off every few pump reads.
	minFollowWindow = 64 << 10
	// waiterWindow is the window kept for WaitOutput's callers: a loop
	// that reads each wake within a few milliseconds loses nothing at
	// 50 MB/s.
	waiterWindow = 1 << 20
	// waiterKeep: the window is kept this long after the last WaitOutput.
	waiterKeep = 100 * time.Millisecond
	// windowSlack is the free storage the window's ring keeps beyond its
	// size (or the size, if less): the pump reads straight into the ring
	// (readTarget) while the window is full too.
	windowSlack = 64 << 10
)

// followState is a buffer's window and followers, made by the first
// WaitOutput, Follow or paced read. The buffer's mu guards it, but for
// pieces.
type followState struct {
	followers []*follower
	lastWait  time.Duration // a WaitOutput's last start or end since paceEpoch
	roomc     chan struct{} // a token when a follower reads or goes
	// window is a ring holding the newest windowLen bytes of the stream
	// from window[windowPos]; the pump reads into the rest of it.
	window    []byte
	windowPos int
	windowLen int
	testMax   int   // if not zero, the window's size (tests)
	pieces    pacer // paces tight reads in pieces (readPacedLocked); no lock
}

// flowLocked returns b's followState, made if need be.
func (b *HeadTailBuffer) flowLocked() *followState {
	if b.flow == nil {
		b.flow = &followState{}
	}
	return b.flow
}

// waitedLocked reports whether WaitOutput waits or did within waiterKeep
// of now (since paceEpoch).
func (b *HeadTailBuffer) waitedLocked(now time.Duration) bool {
	return b.waiters > 0 || b.flow.lastWait != 0 && now-b.flow.lastWait < waiterKeep
}

// windowMaxLocked is the window's size now: the largest window an open
// follower asked for, waiterWindow while WaitOutput is in use, and 0 when
// nobody waits or follows.
func (b *HeadTailBuffer) windowMaxLocked(now time.Duration) int {
	size := 0
	if b.waitedLocked(now) {
		size = waiterWindow
	}
	for _, s := range b.flow.followers {
		size = max(size, s.window)
	}
	if size > 0 && b.flow.testMax > 0 {
		size = b.flow.testMax
	}
	return size
}

// trimLocked drops the window's bytes before the oldest follower's
// cursor, unless waiters use them; end is the stream's length before the
// bytes about to be added.
func (b *HeadTailBuffer) trimLocked(end int64, now time.Duration) {
	f := b.flow
	if b.waitedLocked(now) {
		return
	}
	oldest := end
	for _, s := range f.followers {
		oldest = min(oldest, s.cursor)
	}
	f.dropLocked(f.windowLen - int(min(int64(f.windowLen), max(end-oldest, 0))))
	if f.windowLen == 0 {
		f.windowPos = 0 // all of it in one piece
	}
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
	b.trimLocked(b.total-int64(len(p)), now)
	f.dropLocked(f.windowLen - size)
	slack := min(size, windowSlack)
	if need := min(f.windowLen+len(p), size) + slack; need > len(f.window) || len(f.window) > size+slack {
		f.resizeLocked(min(max(2*len(f.window), need), size+slack))
	}
	w := (f.windowPos + f.windowLen) % len(f.window)
	switch {
	case f.windowLen+len(p) <= len(f.window) && &p[0] == &f.window[w]:
		f.windowLen += len(p) // the pump read p into place (readTarget)
	case len(p) >= len(f.window):
		copy(f.window, p[len(p)-len(f.window):])
		f.windowPos, f.windowLen = 0, len(f.window)
	default:
		k := copy(f.window[w:], p)
		copy(f.window, p[k:])
		f.windowLen += len(p)
		f.dropLocked(f.windowLen - len(f.window))
	}
	f.dropLocked(f.windowLen - size)
}

// dropLocked drops the window's n oldest bytes, if n > 0.
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

// windowStartLocked returns the first stream byte the window holds, if it
// holds more than the tail: reads from a cursor past the head read it
// rather than the tail. Once the buffer is finished only followers' reads
// (own) see it.
func (b *HeadTailBuffer) windowStartLocked(own bool) (int64, bool) {
	f := b.flow
	if f == nil || !own && b.finished || f.windowLen <= b.tailLen {
		return 0, false
	}
	return b.total - int64(f.windowLen), true
}

// copyWindowLocked fills dst with the window's bytes from offset from.
func (b *HeadTailBuffer) copyWindowLocked(dst []byte, from int64) {
	k := copy(dst, b.flow.window[b.windowIndexLocked(from):])
	copy(dst[k:], b.flow.window)
}

// windowIndexLocked is where the window's ring holds stream byte off.
func (b *HeadTailBuffer) windowIndexLocked(off int64) int {
	f := b.flow
	return (f.windowPos + int(off-(b.total-int64(f.windowLen)))) % len(f.window)
}

// restLocked returns the window's bytes from off on, up to the end of its
// ring's storage, if the stream is finished and a follower's read from
// off reads the window; else nil.
func (b *HeadTailBuffer) restLocked(off int64) *[]byte {
	start, ok := b.windowStartLocked(true)
	if !b.finished || !ok || off < max(start, int64(len(b.head))) || off >= b.total {
		return nil
	}
	i := b.windowIndexLocked(off)
	rest := b.flow.window[i:min(i+int(b.total-off), len(b.flow.window))]
	return &rest
}

// windowByteLocked returns the stream byte at off and whether the window
// holds it.
func (b *HeadTailBuffer) windowByteLocked(off int64) (byte, bool) {
	if start, ok := b.windowStartLocked(false); !ok || off < start || off >= b.total {
		return 0, false
	}
	return b.flow.window[b.windowIndexLocked(off)], true
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
		// A write of k bytes drops [headMax, total+k-tailMax) from the
		// tail, and [0, total+k-size) from a window holding s.cursor.
		kept := max(s.cursor, int64(b.headMax)) + int64(b.tailMax)
		if s.cursor >= windowStart {
			kept = max(kept, s.cursor+size)
		}
		s.blocking = s.blocking || mark && kept <= b.total
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

// hold is called by a pump that found no room for n > 0 bytes, or with
// n 0 at the end of its pipe, at now. It ends the holds whose bound
// passed and returns how many bytes the pump can write (at the end: 1
// once every keeping-up follower read to the end); if none, how long it
// may wait at most, and a channel with a token when a follower reads.
func (b *HeadTailBuffer) hold(n int, now time.Time) (int, time.Duration, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.flow
	if f == nil || b.finished {
		return max(n, 1), 0, nil
	}
	b.stampLocked(now)
	if n > 0 {
		if k := b.roomLocked(n, true); k > 0 {
			return k, 0, nil
		}
	} else if !slices.ContainsFunc(f.followers, func(s *follower) bool { return s.keeps && s.cursor < b.total }) {
		return 1, 0, nil
	}
	wait := MaxFollowHold
	for _, s := range f.followers {
		if s.keeps && !s.woken.IsZero() {
			wait = min(wait, s.maxHold-now.Sub(s.woken))
		}
	}
	if f.roomc == nil {
		f.roomc = make(chan struct{}, 1)
	}
	return 0, max(wait, 0), f.roomc
}

// addHeld adds d, a wait of the pump, to the followers it waited for.
func (b *HeadTailBuffer) addHeld(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.flow != nil {
		for _, s := range b.flow.followers {
			if s.blocking {
				s.held, s.blocking = s.held+d, false
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
// now for the pump to wake (writeQuiet, within followLatency): the window
// keeps what they have not read, followers' and waiters' alike.
func (b *HeadTailBuffer) lazyWakeLocked() bool {
	return b.flow != nil && len(b.flow.window) > 0
}
