package proc

import (
	"context"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/xerrors"
)

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
	total   int64 // bytes ever written
	// waitc is created by the first waiter and closed (then cleared) by the
	// next Write or Finish, so writes without waiters allocate nothing.
	waitc chan struct{}
	// flow is the window and the followers (follow.go), made by the
	// first WaitOutput, Follow or paced read.
	flow     *followState
	finished bool
	// dropped is the stream byte just before the tail when that byte was
	// dropped (not in the head): it tells a line-based reader whether the
	// tail starts a line.
	dropped byte

	// polled is set by Output when it returns a rendering again, and
	// cleared by the pump (takePolled). It packs with the bytes above: the
	// struct fits the 160-byte size class.
	polled atomic.Bool
	// peers is the polling signal of the Manager that owns the buffer
	// (pollSignal), nil for a buffer of NewHeadTailBuffer; set once before
	// the buffer is shared.
	peers *pollSignal
	// size is total, stored after every Write, so that Len and a hit of
	// rendered need no lock: a tight poller then never holds up the pump.
	size atomic.Int64
	// rendered is the newest rendering Output made or is making (its done
	// tells), replaced under mu. While nothing is written (its at equals
	// size), Output returns it again without the lock, a copy or an
	// allocation; once finished, for good. An Output that needs no newer
	// one waits for one under way instead of rendering the same bytes.
	rendered atomic.Pointer[rendering]
	// waiters counts the goroutines blocked in WaitOutput, guarded by mu:
	// the window is kept for them (follow.go).
	waiters int32
}

// Chunk is the result of a cursor read ([Process.ReadSince]).
type Chunk struct {
	// Data holds stored bytes starting at Next-len(Data); the caller owns it.
	Data []byte `json:"data"`
	// Next is the cursor to pass to the next read.
	Next int64 `json:"next"`
	// Lost counts bytes between the requested cursor and the first byte of
	// Data that were not retained.
	Lost int64 `json:"lost"`
	// End is the length of the stream at the time of the read.
	End int64 `json:"end"`
	// EOF is true when the stream is final and Next has reached its end.
	EOF bool `json:"eof"`
}

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
	b.writeLocked(p)
	b.wakeLocked()
	return len(p), nil
}

// writeQuiet is Write for the pump (follow.go), which wakes the readers
// waiting itself (wakeFollowers): it reports whether any wait (waiting),
// and whether they must be woken now (now) rather than within
// followLatency (lazyWakeLocked). After Finish it stores nothing.
func (b *HeadTailBuffer) writeQuiet(p []byte) (waiting, now bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished || len(p) == 0 {
		return false, false
	}
	b.writeLocked(p)
	if b.waitc == nil {
		return false, false
	}
	return true, !b.lazyWakeLocked()
}

// writeLocked stores p; it wakes no reader.
func (b *HeadTailBuffer) writeLocked(p []byte) {
	if len(p) == 0 {
		return
	}
	p0 := p
	b.total += int64(len(p))
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
	if b.flow != nil {
		b.keepLocked(p0)
	}
}

// Len returns the number of bytes ever written, retained or not.
func (b *HeadTailBuffer) Len() int64 {
	return b.size.Load()
}

// Finish marks the buffer final: later Writes fail with [ErrClosed], the
// storage shrinks to exactly the bytes held, and every
// [HeadTailBuffer.WaitOutput] returns. Finish is idempotent. The window
// (follow.go) outlives it only for open followers, until they close.
func (b *HeadTailBuffer) Finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finished {
		return
	}
	b.finished = true
	b.signalRoomLocked()
	if f := b.flow; f != nil && len(f.followers) == 0 {
		b.flow = nil
	}
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
// first. It starts no goroutine. While WaitOutput waits, and for a moment
// after, the buffer keeps the newest bytes beyond head and tail for every
// cursor read (follow.go); it never holds back a writer. Write wakes it at
// once; the pump of a Process, which keeps the bytes in that window, may
// wake it up to a millisecond later, so as to wake it less often.
func (b *HeadTailBuffer) WaitOutput(ctx context.Context, cursor int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.peers != nil && !b.finished {
		b.flowLocked().lastWait = time.Since(paceEpoch)
	}
	for {
		if b.total > cursor || b.finished {
			return nil
		}
		// The channel is taken under the same lock as the check above,
		// and any Write after it closes this channel: no lost wake-up.
		if b.waitc == nil {
			b.waitc = make(chan struct{})
		}
		waitc := b.waitc
		b.waiters++
		b.mu.Unlock()
		select {
		case <-waitc:
		case <-ctx.Done():
		}
		b.mu.Lock()
		b.waiters--
		if b.flow != nil && b.peers != nil {
			b.flow.lastWait = time.Since(paceEpoch)
		}
		if err := ctx.Err(); err != nil {
			return xerrors.Errorf("wait output: %w", err)
		}
	}
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
//
// A tight loop of reads of an unfinished buffer of a Process, each either
// finding nothing new at the end, or able to return less than the tail
// holds (max) and stopping short of the end, is paced: once such reads
// come in a streak, each parks for a fraction of a millisecond before it
// returns, so that the reader leaves the CPUs to the writer
// (readPacedLocked, pace.go).
func (b *HeadTailBuffer) ReadSince(cursor int64, max int) Chunk {
	return b.readSince(cursor, max, true)
}

// readSince is ReadSince; a read with paced false never pauses (a read
// again after a pause).
func (b *HeadTailBuffer) readSince(cursor int64, max int, paced bool) Chunk {
	b.mu.Lock()
	n := b.readSizeLocked(cursor, max)
	b.mu.Unlock()
	var data []byte
	if n > 0 {
		data = make([]byte, n)
	}
	b.mu.Lock()
	c, pieces := b.readPacedLocked(cursor, data, readLimit(max), false)
	b.mu.Unlock()
	if paced && b.paceRead(pieces) {
		return b.readSince(cursor, max, false)
	}
	return c
}

// readLimit is the most bytes a read with ReadSince's max can return.
func readLimit(max int) int {
	if max <= 0 {
		return math.MaxInt
	}
	return max
}

// ReadSinceInto is ReadSince that copies into buf instead of allocating:
// it reads at most len(buf) bytes, and Chunk.Data is buf[:n], valid until
// buf is reused. A follower that passes the same buffer every time reads
// without allocating. An empty buf reads no bytes but still skips and
// counts lost ones: Next is then cursor + Lost. It paces reads in pieces
// as ReadSince does.
func (b *HeadTailBuffer) ReadSinceInto(cursor int64, buf []byte) Chunk {
	b.mu.Lock()
	c, pieces := b.readPacedLocked(cursor, buf, len(buf), false)
	b.mu.Unlock()
	if b.paceRead(pieces) {
		// Read again: what is newest after the pause.
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.readIntoLocked(cursor, buf, false)
	}
	return c
}

// readPacedLocked is readIntoLocked for a caller's cursor read, which a
// tight loop of such reads pauses (pace.go): it also returns the pacer of
// such reads when this one is one, and otherwise nil. Such a read is one
// of a running stream of a Process that could return something (a read
// into an empty buffer only skips lost bytes) and either found nothing
// new (a poller spinning at the end; a Follower blocks there instead) or
// could return less than a tail's worth (limit) and stops short of the
// end (it reads in pieces). own says a follower reads (readRangeLocked).
func (b *HeadTailBuffer) readPacedLocked(cursor int64, buf []byte, limit int, own bool) (Chunk, *pacer) {
	c := b.readIntoLocked(cursor, buf, own)
	empty := len(c.Data) == 0 && c.Lost == 0
	if b.peers == nil || b.finished || limit == 0 || !empty && (limit >= b.tailMax || c.Next >= c.End) {
		return c, nil
	}
	return c, &b.flowLocked().pieces
}

// readSinceLine is ReadSince that also tells whether the first byte of
// Data begins a line (for Process.WaitFor, after bytes were lost).
func (b *HeadTailBuffer) readSinceLine(cursor int64, max int) (Chunk, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.readSinceLocked(cursor, max)
	return c, b.lineStartLocked(c.Next - int64(len(c.Data)))
}

// readSizeLocked returns how many bytes ReadSince(cursor, max) would
// return now.
func (b *HeadTailBuffer) readSizeLocked(cursor int64, max int) int {
	cursor = nonNegative(cursor)
	if cursor >= b.total {
		return 0
	}
	from, end, _ := b.readRangeLocked(cursor, false)
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
	return b.readIntoLocked(cursor, data, false)
}

func nonNegative(cursor int64) int64 {
	if cursor < 0 {
		return 0
	}
	return cursor
}

// readIntoLocked does the work of ReadSinceInto; own says a follower
// reads (readRangeLocked).
func (b *HeadTailBuffer) readIntoLocked(cursor int64, buf []byte, own bool) Chunk {
	cursor = nonNegative(cursor)
	c := Chunk{Next: cursor, End: b.total}
	if cursor < b.total {
		from, end, window := b.readRangeLocked(cursor, own)
		n := int(min(end-from, int64(len(buf))))
		c.Lost = from - cursor
		c.Data = buf[:n]
		if window {
			b.copyWindowLocked(c.Data, from)
		} else {
			b.copyLocked(c.Data, from)
		}
		c.Next = from + int64(n)
	}
	c.EOF = b.finished && c.Next >= c.End
	return c
}

// readRangeLocked returns the stored bytes a read from cursor < total can
// return, as [from, end): from skips the omitted middle, and end stops at
// the end of the head if bytes were dropped after it (the next read
// reports them as Lost). window reports that they come from the window
// instead (follow.go): [from, total). Once the buffer is finished only a
// follower's read (own) sees the window.
func (b *HeadTailBuffer) readRangeLocked(cursor int64, own bool) (from, end int64, window bool) {
	headLen := int64(len(b.head))
	if start, ok := b.windowStartLocked(own); ok && cursor >= headLen {
		return max(start, cursor), b.total, true
	}
	tailStart := b.total - int64(b.tailLen)
	if cursor >= headLen && cursor < tailStart {
		cursor = tailStart
	}
	end = b.total
	if cursor < headLen && tailStart > headLen {
		end = headLen
	}
	return cursor, end, false
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
	if c, ok := b.windowByteLocked(off - 1); ok && off-1 >= headLen {
		return c == '\n'
	}
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
