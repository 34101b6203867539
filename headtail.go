package proc

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"golang.org/x/xerrors"
)

// lineCutSuffix ends every line that rendering cut short.
const lineCutSuffix = " ... [truncated]"

var _ io.Writer = (*HeadTailBuffer)(nil)

// HeadTailBuffer is a bounded copy of an output stream: it keeps the first
// headBytes bytes ever written (the head) and the last tailBytes of the
// bytes after the head (the tail), and counts every byte written. Offsets
// are absolute positions in everything ever written: the head covers
// [0, len(head)) and the tail covers [Len()-len(tail), Len()).
//
// Storage grows with what was written: a buffer that got 10 bytes holds
// about 10 bytes. Once the tail is full it is reused as a ring, so Write
// does not allocate in steady state.
//
// The zero value is not usable; create buffers with [NewHeadTailBuffer]. A
// HeadTailBuffer is safe for concurrent use. Write never fails until
// [HeadTailBuffer.Finish] marks the buffer final; after that the contents
// never change.
type HeadTailBuffer struct {
	headMax int // capacity limit of head
	tailMax int // capacity limit of tail
	lineMax int // longest line Output renders uncut

	mu sync.Mutex // guards the fields below
	// head holds the first bytes written; len(head) <= headMax.
	head []byte
	// tail is a ring: tailLen bytes starting at tail[tailPos], wrapping at
	// len(tail). It grows (tailPos == 0) until len(tail) == tailMax and is
	// reused from then on. tailPos only moves when bytes are dropped, so
	// the ring never wraps while nothing was omitted.
	tail    []byte
	tailPos int
	tailLen int
	// dropped is the stream byte just before the tail when that byte was
	// dropped (not in the head): it tells a line-based reader whether the
	// tail starts a line.
	dropped  byte
	total    int64 // bytes ever written
	finished bool
	// waitc is created by the first waiter and closed (then cleared) by the
	// next Write or Finish, so writes without waiters allocate nothing.
	waitc chan struct{}
	// read is set by every cursor read and wait, and cleared by every
	// Write; followed counts down the writes left before the stream is
	// taken as no longer followed (see readSize).
	read     bool
	followed int
	// flow is the followers' flow control (see followState), made by the
	// first cursor read that reaches the end and dropped by Finish.
	flow *followState

	// size is total, stored after every Write, so that Len and a hit of
	// rendered need no lock: a tight poller then never holds up the pump.
	size atomic.Int64
	// rendered is the last rendering Output made, replaced under mu. While
	// nothing is written (its at equals size), Output returns it again
	// without the lock, a copy or an allocation. Finish drops it, so that
	// a retained final record keeps only its bytes.
	rendered atomic.Pointer[rendering]
	// polled is set by Output when it returns a rendering again, and
	// cleared by the pump (takePolled).
	polled atomic.Bool
}

// takePolled reports whether Output returned an unchanged rendering since
// the last call.
func (b *HeadTailBuffer) takePolled() bool {
	return b.polled.Load() && b.polled.Swap(false)
}

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

// rendering is a rendering of the stream when it was at bytes long, with
// its Truncation in the same allocation.
type rendering struct {
	at    int64
	out   Output
	trunc Truncation
}

// followHold is how many writes in a row without a cursor read or wait
// it takes before a buffer counts as no longer followed. A follower woken
// by one write may not have read yet when the next comes.
const followHold = 8

// NewHeadTailBuffer returns an empty buffer that keeps up to headBytes
// bytes from the start of the stream and tailBytes from its end, and whose
// [HeadTailBuffer.Output] cuts lines longer than maxLineLength bytes. An
// argument that is zero or negative selects its default: 16384, 16384 and
// 2048 respectively. No storage is allocated until bytes are written.
func NewHeadTailBuffer(headBytes, tailBytes, maxLineLength int) *HeadTailBuffer {
	if headBytes <= 0 {
		headBytes = DefaultHeadBytes
	}
	if tailBytes <= 0 {
		tailBytes = DefaultTailBytes
	}
	if maxLineLength <= 0 {
		maxLineLength = DefaultMaxLineLength
	}
	return &HeadTailBuffer{headMax: headBytes, tailMax: tailBytes, lineMax: maxLineLength}
}

// Write appends p to the stream, keeping what fits in the head and the
// tail. It does not retain p. Until [HeadTailBuffer.Finish] it always
// returns len(p), nil; afterwards it stores nothing and returns 0 and an
// error wrapping [ErrClosed].
func (b *HeadTailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return 0, xerrors.Errorf("write output: buffer finished: %w", ErrClosed)
	}
	if len(p) == 0 {
		return 0, nil
	}
	n := len(p)
	b.total += int64(n)
	defer b.size.Store(b.total)
	if room := b.headMax - len(b.head); room > 0 {
		k := min(room, len(p))
		b.head = growCapped(b.head, k, b.headMax)
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if len(p) > 0 {
		b.writeTailLocked(p)
	}
	if b.read {
		b.followed = followHold
	} else if b.followed > 0 {
		b.followed--
	}
	b.read = false
	b.wakeLocked()
	return n, nil
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

// writeTailLocked appends p to the tail ring, dropping its oldest bytes
// when it overflows.
func (b *HeadTailBuffer) writeTailLocked(p []byte) {
	b.noteDroppedLocked(p)
	if len(p) >= b.tailMax {
		// Only the last tailMax bytes can survive this write, so copy
		// just those, over whatever the tail held.
		if len(b.tail) < b.tailMax {
			b.tail = make([]byte, b.tailMax)
		}
		copy(b.tail, p[len(p)-b.tailMax:])
		b.tailPos, b.tailLen = 0, b.tailMax
		return
	}
	if need := b.tailLen + len(p); need > len(b.tail) && len(b.tail) < b.tailMax {
		b.resizeTailLocked(min(max(2*len(b.tail), need), b.tailMax))
	}
	size := len(b.tail)
	w := (b.tailPos + b.tailLen) % size
	k := copy(b.tail[w:], p)
	copy(b.tail, p[k:])
	b.tailLen += len(p)
	if over := b.tailLen - size; over > 0 {
		b.tailPos = (b.tailPos + over) % size
		b.tailLen = size
	}
}

// noteDroppedLocked records in b.dropped the byte that will sit just before
// the tail once p is appended, if p makes the tail drop bytes. It runs
// before p overwrites anything; b.total already counts p.
func (b *HeadTailBuffer) noteDroppedLocked(p []byte) {
	newLen := min(b.tailLen+len(p), b.tailMax)
	if newLen < b.tailLen+len(p) {
		before := b.total - int64(newLen) - 1 // the offset of the byte wanted
		pStart := b.total - int64(len(p))
		oldStart := pStart - int64(b.tailLen)
		switch {
		case before >= pStart:
			b.dropped = p[before-pStart]
		case before >= oldStart:
			first, second := b.tailSegmentsLocked()
			i := int(before - oldStart)
			if i < len(first) {
				b.dropped = first[i]
			} else {
				b.dropped = second[i-len(first)]
			}
		}
	}
}

// lineStartLocked reports whether offset off is known to begin a line:
// it is 0, or the byte before it is a retained or recorded newline.
func (b *HeadTailBuffer) lineStartLocked(off int64) bool {
	if off == 0 {
		return true
	}
	headLen := int64(len(b.head))
	tailStart := b.total - int64(b.tailLen)
	switch before := off - 1; {
	case before < headLen:
		return b.head[before] == '\n'
	case before >= tailStart && before < b.total:
		first, second := b.tailSegmentsLocked()
		i := int(before - tailStart)
		if i < len(first) {
			return first[i] == '\n'
		}
		return second[i-len(first)] == '\n'
	case off == tailStart:
		return b.dropped == '\n'
	}
	return false
}

// readSinceLine is ReadSince that also tells whether the first byte of
// Data begins a line (for Process.WaitFor, after bytes were lost).
func (b *HeadTailBuffer) readSinceLine(cursor int64, max int) (Chunk, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.readSinceLocked(cursor, max)
	return c, b.lineStartLocked(c.Next - int64(len(c.Data)))
}

// resizeTailLocked moves the tail into a new linear slice of length size,
// which must be at least tailLen.
func (b *HeadTailBuffer) resizeTailLocked(size int) {
	t := make([]byte, size)
	first, second := b.tailSegmentsLocked()
	k := copy(t, first)
	copy(t[k:], second)
	b.tail, b.tailPos = t, 0
}

// tailSegmentsLocked returns the tail's bytes in stream order as two
// slices of the ring (second is empty unless the ring wraps).
func (b *HeadTailBuffer) tailSegmentsLocked() (first, second []byte) {
	end := b.tailPos + b.tailLen
	if end <= len(b.tail) {
		return b.tail[b.tailPos:end], nil
	}
	return b.tail[b.tailPos:], b.tail[:end-len(b.tail)]
}

// wakeLocked releases everyone blocked in WaitOutput. Closing a channel
// never blocks, so it is fine under the mutex.
func (b *HeadTailBuffer) wakeLocked() {
	if b.waitc != nil {
		close(b.waitc)
		b.waitc = nil
	}
	// The followers woken hold leases until they read (followState).
	if f := b.flow; f != nil {
		f.leases = append(f.leases, f.waiting...)
		f.waiting = f.waiting[:0]
	}
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

// unfollow ends the lease of a follower that read up to next and stops
// following (Process.WaitFor once it matched), so that the pump does not
// wait for it.
func (b *HeadTailBuffer) unfollow(next int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.takeLeaseLocked(next)
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

// growCapped returns buf with room for n more bytes, doubling its capacity
// but never beyond limit (append's own growth would overshoot it).
func growCapped(buf []byte, n, limit int) []byte {
	need := len(buf) + n
	if need <= cap(buf) {
		return buf
	}
	grown := make([]byte, len(buf), min(max(2*cap(buf), need), limit))
	copy(grown, buf)
	return grown
}

// Len returns the number of bytes ever written, retained or not.
func (b *HeadTailBuffer) Len() int64 {
	return b.size.Load()
}

// Finish marks the buffer final: later Writes fail with [ErrClosed], the
// storage shrinks to exactly the bytes held, and every
// [HeadTailBuffer.WaitOutput] returns. Finish is idempotent.
func (b *HeadTailBuffer) Finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return
	}
	b.finished = true
	b.rendered.Store(nil)
	b.signalRoomLocked()
	b.flow = nil
	if cap(b.head) > len(b.head) {
		// Not append or bytes.Clone: they round the capacity up.
		head := make([]byte, len(b.head))
		copy(head, b.head)
		b.head = head
	}
	if b.tailPos != 0 || len(b.tail) > b.tailLen {
		if b.tailLen == 0 {
			b.tail = nil
		} else {
			b.resizeTailLocked(b.tailLen)
		}
	}
	b.wakeLocked()
}

// Finished reports whether [HeadTailBuffer.Finish] has been called.
func (b *HeadTailBuffer) Finished() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.finished
}

// WaitOutput blocks until the stream is longer than cursor, the buffer is
// finished, or ctx ends. It returns nil at once if either of the first two
// already holds, and otherwise an error wrapping ctx.Err() when ctx ends
// first. It starts no goroutine.
//
// A WaitOutput at the cursor a read just reached the end with (a
// follower's loop) also holds back the pump of a Process: from the Write
// that wakes it until it waits again, the pump does not overwrite bytes
// the follower has not read, for at most a bounded time (design section
// 10). Write itself never waits.
func (b *HeadTailBuffer) WaitOutput(ctx context.Context, cursor int64) error {
	b.mu.Lock()
	// A follower read to the end here, or holds a lease here. Turning its
	// lease into a waiting entry and back changes no room (room counts
	// both), so neither wakes the pump.
	f := b.flow
	leased := f != nil && f.indexLease(cursor) >= 0
	follower := leased || (f != nil && cursor == f.caughtUp)
	for {
		b.read = true
		if b.total > cursor || b.finished {
			if follower && !leased && !b.finished {
				// It reads next: hold the bytes from cursor on.
				f.leases = append(f.leases, cursor)
			}
			b.mu.Unlock()
			return nil
		}
		// The channel is taken under the same lock as the check above,
		// and any Write after it closes this channel: no lost wake-up.
		if b.waitc == nil {
			b.waitc = make(chan struct{})
		}
		waitc := b.waitc
		if follower {
			if leased {
				i := f.indexLease(cursor)
				f.leases = append(f.leases[:i], f.leases[i+1:]...)
				leased = false
			}
			f.waiting = append(f.waiting, cursor)
		}
		b.mu.Unlock()

		select {
		case <-waitc:
			b.mu.Lock()
			// A Write's wake made the waiting entry a lease (Finish
			// dropped it; the check above returns then).
			leased = follower
		case <-ctx.Done():
			b.mu.Lock()
			if follower {
				// A wake at the same moment made it a lease: give it up.
				if tryRecv(waitc) {
					b.takeLeaseLocked(cursor)
				} else {
					b.takeWaitingLocked(cursor)
				}
			}
			b.mu.Unlock()
			return xerrors.Errorf("wait output: %w", ctx.Err())
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

// ReadSince returns a copy of the stored bytes at and after the absolute
// offset cursor (negative means 0), at most max of them (max <= 0: no
// limit). When cursor falls in the omitted middle, Chunk.Lost counts the
// dropped bytes skipped and Data starts at the first retained byte after
// them. A read continues from the head into the tail only when nothing
// between them was dropped. Chunk.Next is cursor + Lost + len(Data) (or
// cursor, if cursor is past the end); Chunk.End is Len() at the time of
// the read; Chunk.EOF is true once the buffer is finished and Next has
// reached End. Reading from 0 until EOF yields Lost and Data summing to
// Len(), and Data concatenating to the head followed by the tail.
//
// Data is allocated outside the buffer's lock, sized by a first look at
// the buffer; bytes written between that look and the copy are left for
// the next read (Next < End tells).
func (b *HeadTailBuffer) ReadSince(cursor int64, max int) Chunk {
	b.mu.Lock()
	n := b.readSizeLocked(cursor, max)
	b.mu.Unlock()
	var data []byte
	if n > 0 {
		data = make([]byte, n)
	}
	return b.ReadSinceInto(cursor, data)
}

// ReadSinceInto is ReadSince that copies into buf instead of allocating:
// it reads at most len(buf) bytes, and Chunk.Data is buf[:n], valid until
// buf is reused. A follower that passes the same buffer every time reads
// without allocating. An empty buf reads no bytes but still skips and
// counts lost ones: Next is then cursor + Lost.
func (b *HeadTailBuffer) ReadSinceInto(cursor int64, buf []byte) Chunk {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.readIntoLocked(cursor, buf)
}

// readSizeLocked returns how many bytes ReadSince(cursor, max) would
// return now.
func (b *HeadTailBuffer) readSizeLocked(cursor int64, max int) int {
	cursor = nonNegative(cursor)
	if cursor >= b.total {
		return 0
	}
	from, end := b.readRangeLocked(cursor)
	n := end - from
	if max > 0 && int64(max) < n {
		n = int64(max)
	}
	return int(n)
}

// readSinceLocked is ReadSince for a caller that holds b.mu and does not
// mind allocating under it (Process.WaitFor, once per line it needs).
func (b *HeadTailBuffer) readSinceLocked(cursor int64, max int) Chunk {
	n := b.readSizeLocked(cursor, max)
	var data []byte
	if n > 0 {
		data = make([]byte, n)
	}
	return b.readIntoLocked(cursor, data)
}

func nonNegative(cursor int64) int64 {
	if cursor < 0 {
		return 0
	}
	return cursor
}

// readIntoLocked does the work of ReadSinceInto.
func (b *HeadTailBuffer) readIntoLocked(cursor int64, buf []byte) Chunk {
	b.read = true
	cursor = nonNegative(cursor)
	c := Chunk{Next: cursor, End: b.total}
	if cursor < b.total {
		from, end := b.readRangeLocked(cursor)
		n := int(min(end-from, int64(len(buf))))
		c.Lost = from - cursor
		c.Data = buf[:n]
		b.copyLocked(c.Data, from)
		c.Next = from + int64(n)
	}
	c.EOF = b.finished && c.Next >= c.End
	if b.finished {
		return c
	}
	if b.flow == nil {
		if c.Next < c.End {
			return c
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
	return c
}

// readRangeLocked returns the stored bytes a read from cursor < total can
// return, as [from, end): from skips the omitted middle, and end stops at
// the end of the head if bytes were dropped after it (the next read
// reports them as Lost).
func (b *HeadTailBuffer) readRangeLocked(cursor int64) (from, end int64) {
	headLen := int64(len(b.head))
	tailStart := b.total - int64(b.tailLen)
	if cursor >= headLen && cursor < tailStart {
		cursor = tailStart
	}
	end = b.total
	if cursor < headLen && tailStart > headLen {
		end = headLen
	}
	return cursor, end
}

// copyLocked fills dst with the stored bytes starting at offset from,
// which must lie in the head or the tail with len(dst) bytes after it.
func (b *HeadTailBuffer) copyLocked(dst []byte, from int64) {
	k := 0
	if from < int64(len(b.head)) {
		k = copy(dst, b.head[from:])
		from += int64(k)
	}
	if k < len(dst) {
		first, second := b.tailSegmentsLocked()
		i := int(from - (b.total - int64(b.tailLen)))
		if i < len(first) {
			k += copy(dst[k:], first[i:])
			i = 0
		} else {
			i -= len(first)
		}
		copy(dst[k:], second[i:])
	}
}

// Output renders the buffer as text: the head, then, only if bytes were
// omitted, the marker "\n... [omitted N bytes] ...\n", then the tail. With
// nothing omitted head and tail join seamlessly.
//
// At the omission marker, a partial UTF-8 character ending the head and up
// to three continuation bytes starting the tail are left out of the text.
// Every line longer than maxLineLength bytes is cut, backing off to the
// start of a valid UTF-8 character the cut would split, and ends in
// " ... [truncated]"; the cut line, that suffix included, renders in at
// most maxLineLength bytes (with a limit shorter than the suffix, the
// suffix alone). Its newline is kept. The marker ends the line before it
// and is never cut itself.
//
// Truncation is nil unless bytes were omitted or lines were cut. Its byte
// counts describe the stored bytes; what rendering leaves out at the
// marker or by cutting lines does not change them. An empty buffer renders
// as the zero Output.
//
// Output holds the buffer's lock only to copy the stored bytes into a
// pooled scratch buffer (a finished buffer, which never changes, not even
// that): the rendering and its allocations happen outside it, so a reader
// never holds up a Write for longer than a copy. Until the buffer is
// finished, the last rendering is kept and returned again, without a copy
// or an allocation, as long as nothing was written since: callers share
// its Truncation, which they must not modify.
func (b *HeadTailBuffer) Output() Output {
	if r := b.rendered.Load(); r != nil && r.at == b.size.Load() {
		// polled tells the pump that someone polls faster than the
		// stream changes (pump.read); it is only written when it
		// changes, so pollers and pump do not fight over its cache line.
		if !b.polled.Load() {
			b.polled.Store(true)
		}
		// Nothing was written since: the caller polls faster than the
		// stream changes. Yield, so that a tight poller lets the writer
		// run: a pump whose read returned after the runtime handed its
		// P to a poller waits in the global run queue, which a poller
		// that never yields leaves unvisited for a whole time slice
		// (measured: 20 ms median per read; issue 16).
		runtime.Gosched()
		return r.out
	}
	b.mu.Lock()
	if b.total == 0 {
		b.mu.Unlock()
		return Output{}
	}
	total := b.total
	retained := int64(len(b.head) + b.tailLen)
	head := b.head
	first, second := b.tailSegmentsLocked()
	var scratch *[]byte
	finished := b.finished
	if !finished {
		// The storage changes with the next Write: copy it out. A
		// finished buffer's slices never change again (Finish replaced
		// them once, under the lock we hold), so they are read in place.
		scratch = renderScratch.Get().(*[]byte)
		buf := append((*scratch)[:0], head...)
		buf = append(buf, first...)
		buf = append(buf, second...)
		*scratch = buf
		head, first, second = buf[:len(head)], buf[len(head):], nil
	}
	b.mu.Unlock()
	if scratch != nil {
		defer renderScratch.Put(scratch)
	}
	r := b.render(head, first, second, total, retained)
	if !finished {
		b.mu.Lock()
		// Keep the newest rendering, unless the buffer was finished
		// meanwhile (Finish dropped it for good).
		if old := b.rendered.Load(); !b.finished && (old == nil || old.at < total) {
			b.rendered.Store(r)
		}
		b.mu.Unlock()
	}
	return r.out
}

// render renders the stored bytes head, first and second (the tail's two
// segments) of a stream of total bytes of which retained are stored: two
// allocations, the text and the rendering.
func (b *HeadTailBuffer) render(head, first, second []byte, total, retained int64) *rendering {
	omitted := total - retained

	// Measure first so the text is a single exact allocation.
	measure := renderState{lineMax: b.lineMax}
	measure.render(head, first, second, omitted)
	var sb strings.Builder
	sb.Grow(measure.size)
	out := renderState{lineMax: b.lineMax, out: &sb}
	out.render(head, first, second, omitted)

	r := &rendering{at: total, out: Output{Text: sb.String(), marker: out.markerAt}}
	if omitted > 0 || out.cuts > 0 {
		r.trunc = Truncation{
			OriginalBytes: total,
			RetainedBytes: retained,
			OmittedBytes:  omitted,
			LinesCut:      out.cuts,
			Strategy:      "head_tail",
		}
		r.out.Truncation = &r.trunc
	}
	return r
}

// renderScratch holds the buffers Output copies a running buffer's bytes
// into, so that a steady poller allocates only the text it returns.
var renderScratch = sync.Pool{New: func() any { return new([]byte) }}

// renderState renders a buffer's text. With out == nil it only measures:
// size and cuts come out the same as when writing.
type renderState struct {
	lineMax int
	out     *strings.Builder
	size    int // bytes rendered
	cuts    int // lines cut
	// markerAt is where the omission marker was rendered (Output.marker).
	markerAt [2]int
}

// render renders head, then the marker if omitted > 0, then the tail given
// as two segments.
func (r *renderState) render(head, tail1, tail2 []byte, omitted int64) {
	if omitted == 0 {
		r.lines(byteSpans{head, tail1, tail2})
		return
	}
	r.lines(byteSpans{trimPartialRune(head)})
	r.marker(omitted)
	tail := byteSpans{tail1, tail2}
	tail.trimContinuation(utf8.UTFMax - 1)
	r.lines(tail)
}

func (r *renderState) marker(omitted int64) {
	var digits [20]byte
	r.markerAt[0] = r.size
	r.writeString("\n... [omitted ")
	r.write(strconv.AppendInt(digits[:0], omitted, 10))
	r.writeString(" bytes] ...\n")
	r.markerAt[1] = r.size
}

// lines renders s, cutting every line longer than lineMax. Text between
// cuts is written in one piece.
func (r *renderState) lines(s byteSpans) {
	n := s.len()
	flushed := 0 // s[:flushed] has been rendered
	for start := 0; n-start > r.lineMax; {
		end := s.indexNewline(start)
		if end < 0 {
			end = n
		}
		window := start + r.lineMax + 1
		if end < window {
			start = s.skipShortLines(end+1, window)
			continue
		}
		// The suffix counts against the limit: the cut line renders in
		// at most lineMax bytes.
		keep := s.runeStartBefore(start+max(r.lineMax-len(lineCutSuffix), 0), start)
		s.writeTo(r, flushed, keep)
		r.writeString(lineCutSuffix)
		r.cuts++
		flushed = end // the newline, if any, goes out with the next run
		start = end + 1
	}
	s.writeTo(r, flushed, n)
}

// skipShortLines returns where to look for the next long line. A short
// line ended just before start, and window is one past the last byte it
// could have reached: every line that starts before window and ends inside
// it is short too. Lines are usually much shorter than the limit, so
// jumping past the last newline in the window skips many of them for the
// price of one call. That backward scan goes byte by byte
// (bytes.LastIndexByte is not vectorised), so it only looks at the
// window's last few bytes.
func (s *byteSpans) skipShortLines(start, window int) int {
	const maxBack = 64
	if nl := s.lastNewline(max(start, window-maxBack), window); nl >= 0 {
		return nl + 1
	}
	return start
}

func (r *renderState) write(p []byte) {
	r.size += len(p)
	if r.out != nil {
		r.out.Write(p)
	}
}

func (r *renderState) writeString(s string) {
	r.size += len(s)
	if r.out != nil {
		r.out.WriteString(s)
	}
}

// trimPartialRune drops the bytes of an incomplete UTF-8 character ending
// p: a valid start of a multi-byte character whose remaining bytes were
// never stored.
func trimPartialRune(p []byte) []byte {
	for i := len(p) - 1; i >= 0 && i >= len(p)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(p[i]) {
			// FullRune is false exactly for a valid prefix that is too
			// short; it is true for ASCII, complete and invalid bytes.
			if !utf8.FullRune(p[i:]) {
				return p[:i]
			}
			return p
		}
	}
	return p
}

// byteSpans is the concatenation of up to three byte slices, so rendering
// can run over head and ring tail without first copying them together.
// Positions are offsets into the concatenation.
type byteSpans [3][]byte

func (s *byteSpans) len() int {
	return len(s[0]) + len(s[1]) + len(s[2])
}

// at returns the byte at position i < s.len().
func (s *byteSpans) at(i int) byte {
	for _, p := range s {
		if i < len(p) {
			return p[i]
		}
		i -= len(p)
	}
	panic("byteSpans: index out of range")
}

// indexNewline returns the position of the first '\n' at or after from,
// or -1.
func (s *byteSpans) indexNewline(from int) int {
	off := 0
	for _, p := range s {
		if from < off+len(p) {
			if j := bytes.IndexByte(p[max(from-off, 0):], '\n'); j >= 0 {
				return max(from, off) + j
			}
		}
		off += len(p)
	}
	return -1
}

// lastNewline returns the position of the last '\n' in [from, to), or -1.
func (s *byteSpans) lastNewline(from, to int) int {
	off := s.len()
	for i := len(s) - 1; i >= 0; i-- {
		p := s[i]
		off -= len(p)
		lo, hi := max(from-off, 0), min(to-off, len(p))
		if lo >= hi {
			continue
		}
		if j := bytes.LastIndexByte(p[lo:hi], '\n'); j >= 0 {
			return off + lo + j
		}
	}
	return -1
}

// trimContinuation drops up to limit UTF-8 continuation bytes from the
// start of s.
func (s *byteSpans) trimContinuation(limit int) {
	for i := range s {
		for limit > 0 && len(s[i]) > 0 && !utf8.RuneStart(s[i][0]) {
			s[i] = s[i][1:]
			limit--
		}
		if len(s[i]) > 0 {
			return
		}
	}
}

// runeStartBefore returns where to cut s so that the kept text ends before
// position cut without splitting a valid UTF-8 character: cut itself, or
// the start (not before lo) of the valid character that cut falls inside.
func (s *byteSpans) runeStartBefore(cut, lo int) int {
	for i := cut; i >= lo && i > cut-utf8.UTFMax; i-- {
		if !utf8.RuneStart(s.at(i)) {
			continue
		}
		if i == cut {
			return cut
		}
		var buf [utf8.UTFMax]byte
		n := s.copyAt(buf[:], i)
		r, size := utf8.DecodeRune(buf[:n])
		valid := r != utf8.RuneError || size > 1
		if valid && i+size > cut {
			return i
		}
		return cut
	}
	return cut
}

// copyAt copies the bytes of s from position i into dst and returns how
// many it copied.
func (s *byteSpans) copyAt(dst []byte, i int) int {
	n := 0
	for _, p := range s {
		if i < len(p) {
			n += copy(dst[n:], p[i:])
			i = 0
		} else {
			i -= len(p)
		}
		if n == len(dst) {
			break
		}
	}
	return n
}

// writeTo renders the bytes of s between positions from and to.
func (s *byteSpans) writeTo(r *renderState, from, to int) {
	off := 0
	for _, p := range s {
		lo, hi := max(from-off, 0), min(to-off, len(p))
		if lo < hi {
			r.write(p[lo:hi])
		}
		off += len(p)
	}
}
