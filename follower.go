package proc

import (
	"cmp"
	"context"
	"io"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/xerrors"
)

// FollowOptions configures a [Follower] (design section 20).
type FollowOptions struct {
	// Window: bytes the follower may fall behind the newest byte before it
	// loses output (counted in Chunk.Lost). 0: DefaultFollowWindow (1 MiB);
	// negative or above MaxFollowWindow (16 MiB): ErrInvalid. A window
	// below 64 KiB is raised to 64 KiB; the follower may see more when
	// another follower of the stream asks for more.
	Window int `json:"window,omitempty"`
	// MaxHold: the longest the pump waits, from one wake, for this follower
	// to read before it writes over the follower's unread bytes. 0:
	// DefaultFollowHold (5 ms); negative: never holds the child; above
	// MaxFollowHold (20 ms): ErrInvalid. OutputTee is the unbounded one.
	MaxHold time.Duration `json:"max_hold,omitempty"`
}

// FollowStats is what [Follower.Stats] reports.
type FollowStats struct {
	// Cursor is where the next Read starts.
	Cursor int64 `json:"cursor"`
	// Lost counts the bytes the follower skipped, in all.
	Lost int64 `json:"lost"`
	// Held is the time the pump waited for this follower to read.
	Held time.Duration `json:"held"`
}

// Follower is a registered reader of one output stream of a [Process],
// made by [Process.Follow] or [Process.FollowStderr]: the one kind of
// reader the output pump may wait for, boundedly and only while it keeps
// up. Its Reads must not overlap; Stats and Close are safe to call
// concurrently with them. Call Close when done: a Follower that is never
// closed is closed once it is garbage.
type Follower struct {
	s *follower
}

// follower is a Follower's state; the stream's buffer lists it while it
// is open (followState.followers). It holds no reference to its
// Follower, so that the Follower can become garbage and be closed.
type follower struct {
	b *HeadTailBuffer
	p *Process // nil in tests
	// closec is made by a Read that waits for the record's final status
	// (or on a stream nobody writes), and closed by Close.
	closec chan struct{}
	// The buffer's mu guards the fields below.
	cursor  int64
	lost    int64
	held    time.Duration
	window  int
	maxHold time.Duration
	// woken is when the pump woke the follower with bytes to read, zero
	// until then (stampLocked); target is the end of the stream then: the
	// follower keeps up if it reads up to there within maxHold.
	woken  time.Time
	target int64
	// (*rest)[restAt:] is a finished stream's window from cursor+restAt
	// to the ring's end, which never changes again: Read copies it without
	// the lock. Only Read writes rest, restAt and cursor, but Close drops rest.
	rest   atomic.Pointer[[]byte]
	restAt atomic.Int64
	// keeps: the pump waits for the follower (it keeps up); blocking: the
	// pump's current wait is for it (addHeld); closed: Close ran.
	keeps, blocking, closed bool
}

// Follow registers a reader of the Output stream from cursor from (0: the
// start; negative: the current end; a cursor from ReadSince continues
// where it was) and returns it. It works on running and final records,
// also after Manager.Close. A from beyond the end, or bad opts, is an
// error wrapping ErrInvalid. A follower registered behind the end of the
// stream is waited for only once one of its reads reaches the end.
func (p *Process) Follow(from int64, opts FollowOptions) (*Follower, error) {
	return p.out.follow(p, from, opts)
}

// FollowStderr is [Process.Follow] for the stderr stream of a process
// started with SeparateStderr; without it the stream is empty and Read
// returns io.EOF once the record is final.
func (p *Process) FollowStderr(from int64, opts FollowOptions) (*Follower, error) {
	return p.stderrStream().follow(p, from, opts)
}

// follow registers a follower of b, a stream of p (nil in tests: the
// stream is final once b is finished).
func (b *HeadTailBuffer) follow(p *Process, from int64, opts FollowOptions) (*Follower, error) {
	window, hold := cmp.Or(opts.Window, DefaultFollowWindow), cmp.Or(opts.MaxHold, DefaultFollowHold)
	s := &follower{b: b, p: p, window: max(window, minFollowWindow), maxHold: hold}
	if window < 0 || window > MaxFollowWindow || hold > MaxFollowHold {
		return nil, xerrors.Errorf("follow %q: window %d not in [0, %d], or hold %v above %v: %w",
			s.id(), opts.Window, MaxFollowWindow, opts.MaxHold, MaxFollowHold, ErrInvalid)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case from < 0:
		from = b.total
	case from > b.total:
		return nil, xerrors.Errorf("follow %q: cursor %d beyond the end %d: %w", s.id(), from, b.total, ErrInvalid)
	}
	s.cursor, s.keeps = from, from == b.total && hold > 0
	if b != noStderr { // shared by records: nothing to hold or keep
		b.flowLocked().followers = append(b.flow.followers, s)
	}
	fl := &Follower{s: s}
	runtime.AddCleanup(fl, func(s *follower) { s.close() }, s)
	return fl, nil
}

// Read blocks until bytes past the follower's cursor exist, then copies at
// most len(buf) of them (Chunk.Data aliases buf) and moves the cursor.
// Chunk.Lost counts the bytes skipped because they left the window and
// were not retained. At the end of a final record: Chunk.EOF and io.EOF
// (Data may hold the last bytes then). When ctx ends: an error wrapping
// ctx.Err(); after Close: ErrClosed; an empty buf: ErrInvalid. A tight
// loop of reads of less than the tail's size behind the end is paced as
// ReadSinceInto is, so that it leaves the CPUs to the child.
func (f *Follower) Read(ctx context.Context, buf []byte) (Chunk, error) {
	s, b := f.s, f.s.b
	defer runtime.KeepAlive(f) // not closed as garbage while it reads
	if len(buf) == 0 {
		return Chunk{}, xerrors.Errorf("follow %q: empty buffer: %w", s.id(), ErrInvalid)
	}
	if r, at := s.rest.Load(), s.restAt.Load(); r != nil && at < int64(len(*r)) {
		n := int64(copy(buf, (*r)[at:]))
		s.restAt.Store(at + n)
		return Chunk{Data: buf[:n], Next: s.cursor + at + n, End: b.total}, nil
	}
	for {
		b.mu.Lock()
		if s.closed {
			b.mu.Unlock()
			return Chunk{}, xerrors.Errorf("follow %q: %w", s.id(), ErrClosed)
		}
		c, pieces := b.followReadLocked(s, buf)
		if len(c.Data) > 0 || c.Lost > 0 || b.finished && s.final() {
			b.mu.Unlock()
			b.paceRead(pieces) // a pause delays the return, not the bytes
			if c.EOF = c.EOF && s.final(); c.EOF {
				return c, io.EOF
			}
			return c, nil
		}
		// Wait for bytes (Close wakes the buffer's waiters), or for the
		// final status, which follows the buffer's end at once.
		var waitc, done, closec <-chan struct{}
		if b.finished {
			if s.closec == nil {
				s.closec = make(chan struct{})
			}
			done, closec = s.p.Done(), s.closec
		} else {
			if b.waitc == nil {
				b.waitc = make(chan struct{})
			}
			waitc = b.waitc
		}
		b.mu.Unlock()
		select {
		case <-waitc:
		case <-done:
		case <-closec:
		case <-ctx.Done():
		}
		if err := ctx.Err(); err != nil {
			return Chunk{}, xerrors.Errorf("follow %q: %w", s.id(), err)
		}
	}
}

// followReadLocked reads for s into buf and moves its cursor (a read to
// the end makes s keep up again, one to its target ends its bound), and
// keeps what is left of a finished stream's window in s.rest.
func (b *HeadTailBuffer) followReadLocked(s *follower, buf []byte) (Chunk, *pacer) {
	s.cursor += s.restAt.Swap(0)
	c, pieces := b.readPacedLocked(s.cursor, buf, len(buf), true)
	s.rest.Store(b.restLocked(c.Next))
	if c.Next == s.cursor {
		return c, pieces
	}
	s.cursor, s.lost = c.Next, s.lost+c.Lost
	switch {
	case c.Next >= c.End:
		s.keeps, s.woken = s.maxHold > 0, time.Time{}
	case !s.woken.IsZero() && c.Next >= s.target:
		s.woken = time.Time{}
	}
	b.signalRoomLocked()
	return c, pieces
}

// Stats returns the follower's cursor, what it lost in all, and how long
// the pump waited for it.
func (f *Follower) Stats() FollowStats {
	s := f.s
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return FollowStats{Cursor: s.cursor + s.restAt.Load(), Lost: s.lost, Held: s.held}
}

// Close unregisters the follower: the pump never waits for it again, and
// a Read blocked in it returns ErrClosed at once, as do later Reads.
// Close is idempotent and always returns nil.
func (f *Follower) Close() error { f.s.close(); return nil }

func (s *follower) close() {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	s.rest.Store(nil) // the window is freed when its last follower closes
	if s.closec != nil {
		close(s.closec)
	}
	if f := b.flow; b != noStderr { // noStderr lists no follower
		f.followers = slices.DeleteFunc(f.followers, func(o *follower) bool { return o == s })
		// A buffer nobody follows or waits for frees its window at once.
		if len(f.followers) == 0 && (b.finished || !b.waitedLocked(time.Since(paceEpoch))) {
			f.window, f.windowPos, f.windowLen = nil, 0, 0
		}
		b.signalRoomLocked()
		b.wakeLocked() // a Read blocked in the shared wait looks again
	}
}

// final reports whether the record of a finished stream is final too
// (the buffer is finished a moment before); without a record, it is.
func (s *follower) final() bool { return s.p == nil || s.p.isFinal() }

// id is the record's ID, for errors.
func (s *follower) id() string {
	if s.p == nil {
		return ""
	}
	return s.p.info.ID
}
