package proc

import "sync/atomic"

// Follower help (design section 10). A follower is a reader that reaches
// the end of the stream and waits there (WaitOutput, then ReadSince or
// ReadSinceInto from the cursor it waited at). The pump of a Process may
// help it keep up: it reads no more than the tail holds at once while the
// stream is followed (readSize), and it does not overwrite bytes a woken
// follower has not read yet (room), for a bounded time. Write itself
// never waits; only the pump obeys these hooks (pump.writeFollowed).

// followState is a buffer's flow control for followers (design section
// 10), which only the pump obeys (Write never waits). caughtUp is the Next
// of the last cursor read that reached the end: a WaitOutput at that
// cursor is a follower's. waiting holds the cursors of followers blocked
// in WaitOutput; the Write that wakes them turns them into leases (room
// counts them as leases already: that Write must not drop their bytes
// either, however much the pump read before they came). A lease
// is held from that wake until the follower waits again: each cursor read
// from a lease's cursor moves it to the read's Next. The pump does not
// drop a byte at or after a lease's cursor (room) until the lease moves,
// the pump is stopped, or it has waited followerGrace, after which the
// leases are dropped (dropLeases). roomc gets a token whenever a lease
// moves or goes. A buffer's mu guards it.
type followState struct {
	caughtUp int64
	waiting  []int64
	leases   []int64
	roomc    chan struct{}
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
	for i, l := range b.flow.leases {
		// A follower reads: its lease moves on with it. A read from before
		// the lease that reached past it (a reader that reads everything
		// from the start each time) has seen the leased bytes as well.
		if l == cursor || cursor < l && l < c.Next {
			b.flow.leases[i] = c.Next
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
// cursor read or wait happened within the last followHold writes), in
// which case no more than the tail holds. A follower woken by one such
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
// dropping a byte at or after a lease's cursor, and, when that is none,
// a channel that receives when a lease moves or goes.
func (b *HeadTailBuffer) room(n int) (int, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.flow
	if f == nil {
		return n, nil
	}
	k := int64(n)
	// A waiting follower counts too: this write wakes it, with a lease.
	for _, cursors := range [2][]int64{f.leases, f.waiting} {
		for _, c := range cursors {
			// Once the head is full, a write of k bytes drops what is
			// left of [headMax, total+k-tailMax).
			k = min(k, max(c, int64(b.headMax))+int64(b.tailMax)-b.total)
		}
	}
	if k > 0 || b.finished {
		return int(max(k, 0)), nil
	}
	if f.roomc == nil {
		f.roomc = make(chan struct{}, 1)
	}
	return 0, f.roomc
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
	for i, c := range b.flow.leases {
		if c == cursor {
			b.flow.leases = append(b.flow.leases[:i], b.flow.leases[i+1:]...)
			b.signalRoomLocked()
			return true
		}
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
	for i, c := range f.leases {
		if c == cursor {
			return i
		}
	}
	return -1
}

// anyPolled is set by Output when it returns a rendering again, of any
// buffer, and cleared by a pump (takePolled): tight pollers of one record
// keep the Ps from the pumps of every other record as well.
var anyPolled atomic.Bool

// polledLately reports whether Output returned an unchanged rendering of
// b or of any other buffer since a pump last took the signal.
func (b *HeadTailBuffer) polledLately() bool {
	return b.polled.Load() || anyPolled.Load()
}

// takePolled reports whether Output returned an unchanged rendering of b
// since the last call, and clears the signal.
func (b *HeadTailBuffer) takePolled() bool {
	return b.polled.Load() && b.polled.Swap(false)
}

// takeAnyPolled is takePolled for the signal of every buffer.
func takeAnyPolled() bool {
	return anyPolled.Load() && anyPolled.Swap(false)
}
