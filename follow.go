package proc

import (
	"sync/atomic"
	"time"
)

// Follower help (design section 10). A follower is a reader that reaches
// the end of the stream and waits there (WaitOutput, then ReadSince or
// ReadSinceInto from the cursor it waited at). The pump of a Process may
// help it keep up: it reads no more than the tail holds at once while the
// stream is followed (readSize), and it does not overwrite bytes a woken
// follower has not read yet (room), for as long as it keeps up: a
// follower that does not reach the end within followBound of its wake
// loses the help until it catches up (hold). Write itself never waits;
// only the pump obeys these hooks (pump.writeFollowed).

// followBound is how long a follower has, from the write that woke it,
// to reach the end of the stream (a cursor read whose Next is End) before
// it loses the pump's help until it catches up (design section 10). It is
// long next to a woken goroutine's scheduling delay on a loaded machine
// and short next to anything a person notices; it is also the most one
// wake of a follower can hold the pump, and so the child. A follower that
// reads each wake's bytes at once meets it; one that stops reading does
// not, and one that reads them in pieces loses the help at once.
const followBound = 5 * time.Millisecond

// followState is a buffer's flow control for followers (design section
// 10), which only the pump obeys (Write never waits). caughtUp is the Next
// of the last cursor read that reached the end: a WaitOutput at that
// cursor is a follower's. waiting holds the cursors of followers blocked
// in WaitOutput; the Write that wakes them turns them into leases (room
// counts them as leases already: that Write must not drop their bytes
// either, however much the pump read before they came). A lease is held
// from that wake until the follower waits again: each cursor read from a
// lease's cursor that reaches the end moves it to the read's Next; one
// that does not (the follower reads the wake's bytes in pieces) ends it.
// The pump does not drop a byte at or after a lease's cursor (room) until
// the lease moves or ends, the pump is stopped, or followBound has passed
// since the lease's follower was woken without it reaching the end
// (hold): the lease is then dropped. A follower without a lease is helped
// again only once a read of it reaches the end. roomc gets a token
// whenever a lease moves or goes. A buffer's mu guards it.
type followState struct {
	caughtUp int64
	waiting  []int64
	leases   []lease
	roomc    chan struct{}
}

// lease is a woken follower's claim on the bytes from cursor on. woken is
// when the pump woke it, zero until the pump stamps it (stampWoken, hold);
// a read that reaches the end clears it, so that the next wake starts a
// new bound.
type lease struct {
	cursor int64
	woken  time.Time
}

// followHold is how many writes in a row without a cursor read or wait
// it takes before a buffer counts as no longer followed. A follower woken
// by one write may not have read yet when the next comes.
const followHold = 8

// followReadLocked moves a follower's lease along with its read from
// cursor, which returned c, and notes where a read reached the end.
func (b *HeadTailBuffer) followReadLocked(cursor int64, c Chunk) {
	if b.flow == nil {
		if c.Next < c.End {
			return
		}
		b.flow = new(followState)
	}
	for i := range b.flow.leases {
		// A follower reads: its lease moves on with it. A read from before
		// the lease that reached past it (a reader that reads everything
		// from the start each time) has seen the leased bytes as well.
		l := &b.flow.leases[i]
		if l.cursor == cursor || cursor < l.cursor && l.cursor < c.Next {
			switch {
			case c.Next >= c.End:
				// Caught up: the bound starts anew at the next wake.
				l.cursor, l.woken = c.Next, time.Time{}
			default:
				// It reads the wake's bytes in pieces: helping it would
				// run the child at its pace. It is helped again once a
				// read of it reaches the end.
				b.flow.leases = append(b.flow.leases[:i], b.flow.leases[i+1:]...)
			}
			b.signalRoomLocked()
			break
		}
	}
	if c.Next >= c.End {
		b.flow.caughtUp = c.Next
	}
}

// readSize returns how many bytes the pump should read at once, given a
// read buffer of size bytes: all of them, unless the stream is followed (a
// cursor read reached the end, or a reader waited, within the last
// followHold writes), in which case no more than the tail holds. A follower woken by one such
// write can then read all of it before the next one overwrites it, where
// a 64 KiB read into a 16 KiB tail would drop three quarters of it before
// any reader could look.
func (b *HeadTailBuffer) readSize(size int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.followed == 0 && !b.read && b.waitc == nil {
		return size
	}
	return min(size, b.tailMax)
}

// room returns how many of the next n bytes the pump can write without
// dropping a byte at or after a lease's cursor, and whether writing them
// wakes waiting followers (the pump then stamps their leases: stampWoken).
func (b *HeadTailBuffer) room(n int) (k int, wakes bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.flow == nil {
		return n, false
	}
	return b.roomLocked(n), len(b.flow.waiting) > 0
}

// roomLocked is room's count.
func (b *HeadTailBuffer) roomLocked(n int) int {
	f := b.flow
	if f == nil || b.finished {
		return n
	}
	k := int64(n)
	// Once the head is full, a write of k bytes drops what is left of
	// [headMax, total+k-tailMax).
	limit := func(c int64) { k = min(k, max(c, int64(b.headMax))+int64(b.tailMax)-b.total) }
	for _, l := range f.leases {
		limit(l.cursor)
	}
	// A waiting follower counts too: this write wakes it, with a lease.
	for _, c := range f.waiting {
		limit(c)
	}
	return int(max(k, 0))
}

// stampWoken gives every lease the pump has not stamped yet the time now,
// just after the write that woke its follower.
func (b *HeadTailBuffer) stampWoken(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.flow != nil {
		b.flow.stampLocked(now)
	}
}

func (f *followState) stampLocked(now time.Time) {
	for i := range f.leases {
		if f.leases[i].woken.IsZero() {
			f.leases[i].woken = now
		}
	}
}

// hold is called by a pump that found no room for n bytes, with the time
// now. It drops the leases whose followers were woken followBound or more
// ago and have not reached the end since (they lose the pump's help until
// they catch up), and returns how many bytes the pump can write now; when
// none, how long the pump may wait at most before it calls hold again,
// and a channel that gets a token when a lease moves or goes. A lease not
// stamped yet (its follower's WaitOutput found bytes already there) counts
// as woken now.
func (b *HeadTailBuffer) hold(n int, now time.Time) (int, time.Duration, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.flow
	if f == nil {
		return n, 0, nil
	}
	f.stampLocked(now)
	kept := f.leases[:0]
	for _, l := range f.leases {
		if now.Sub(l.woken) < followBound {
			kept = append(kept, l)
		}
	}
	clear(f.leases[len(kept):])
	f.leases = kept
	if k := b.roomLocked(n); k > 0 {
		return k, 0, nil
	}
	wait := followBound
	for _, l := range f.leases {
		wait = min(wait, followBound-now.Sub(l.woken))
	}
	if f.roomc == nil {
		f.roomc = make(chan struct{}, 1)
	}
	return 0, wait, f.roomc
}

// signalRoomLocked wakes a pump waiting for room.
func (b *HeadTailBuffer) signalRoomLocked() {
	if f := b.flow; f != nil && f.roomc != nil {
		// One token at most: a pump that finds one left over looks at
		// the room again and waits anew. One channel for all waits: a
		// follower makes the pump wait once per tail's worth of bytes.
		select {
		case f.roomc <- struct{}{}:
		default:
		}
	}
}

// dropLeases ends every lease: their followers did not read in time, or
// the pump is stopped. A follower that comes back reads what is left, and
// counts Lost, as without flow control.
func (b *HeadTailBuffer) dropLeases() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.flow != nil {
		b.flow.leases = b.flow.leases[:0]
		b.signalRoomLocked()
	}
}

// unfollow ends the lease of a follower that read up to next and stops
// following (Process.WaitFor once it matched), so that the pump does not
// wait for it.
func (b *HeadTailBuffer) unfollow(next int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.takeLeaseLocked(next)
}

// takeLeaseLocked removes one lease at cursor and reports whether there
// was one.
func (b *HeadTailBuffer) takeLeaseLocked(cursor int64) bool {
	if b.flow == nil {
		return false
	}
	if i := b.flow.indexLease(cursor); i >= 0 {
		b.flow.leases = append(b.flow.leases[:i], b.flow.leases[i+1:]...)
		b.signalRoomLocked()
		return true
	}
	return false
}

// takeWaitingLocked removes one waiting follower at cursor.
func (b *HeadTailBuffer) takeWaitingLocked(cursor int64) {
	if b.flow == nil {
		return
	}
	for i, c := range b.flow.waiting {
		if c == cursor {
			b.flow.waiting = append(b.flow.waiting[:i], b.flow.waiting[i+1:]...)
			return
		}
	}
}

// indexLease returns the index of a lease at cursor, or -1.
func (f *followState) indexLease(cursor int64) int {
	for i, l := range f.leases {
		if l.cursor == cursor {
			return i
		}
	}
	return -1
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
