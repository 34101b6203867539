package proc

import (
	"cmp"
	"context"
	"io"
	"runtime"
	"sync"
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
	// keeps: the pump waits for the follower (it keeps up); blocking: the
	// pump's current wait is for it (addHeld).
	keeps, blocking bool
	// closed: Close ran; set under the buffer's mu, read without it by
	// a Read served from st.
	closed atomic.Bool
	// staged counts st's bytes not yet returned: cursor is past them.
	// Set by Read, read by Stats.
	staged atomic.Int32
	// st holds the bytes a Read of stageMax bytes or less read ahead;
	// nil when there are none. Only Read uses it.
	st *stage
}

// Once the stream is finished, a follower reading stageMax bytes or less
// a call reads up to stageSize bytes ahead into a stage under one lock of
// the buffer, and its next Reads copy from there without it: what is left
// in its window when the record ends (up to its Window) would otherwise
// cost a lock and a read of the buffer every few bytes. While the stream
// runs each small Read stays one paced read of the buffer (pace.go), so
// that a reader in small pieces cannot take the CPUs from the child: a
// stage would let it read a stage's worth per pause. A stage is taken
// from a pool by a Read and given back once its bytes are returned, so
// an open follower holds none while it waits.
const (
	stageSize = 4 << 10
	stageMax  = 512
)

// stage is a follower's read-ahead: buf[off:end] are the stream's bytes
// from offset from+off on.
type stage struct {
	buf      [stageSize]byte
	off, end int
	from     int64
}

var stages = sync.Pool{New: func() any { return new(stage) }}

// Follow registers a reader of the Output stream from cursor from (0: the
// start; negative: the current end; a cursor from ReadSince continues
// where it was) and returns it. It works on running and final records,
// also after Manager.Close. A from beyond the end, or bad opts, is an
// error wrapping ErrInvalid. A follower registered behind the end of the
// stream is waited for only once one of its reads reaches the end.
func (p *Process) Follow(from int64, opts FollowOptions) (*Follower, error) {
	f, err := p.out.follow(p, from, opts)
	if err != nil {
		return nil, xerrors.Errorf("follow output of %q: %w", p.info.ID, err)
	}
	return f, nil
}

// FollowStderr is [Process.Follow] for the stderr stream of a process
// started with SeparateStderr; without it the stream is empty and Read
// returns io.EOF once the record is final.
func (p *Process) FollowStderr(from int64, opts FollowOptions) (*Follower, error) {
	f, err := p.stderrStream().follow(p, from, opts)
	if err != nil {
		return nil, xerrors.Errorf("follow stderr of %q: %w", p.info.ID, err)
	}
	return f, nil
}

// follow registers a follower of b, a stream of p (nil in tests: the
// stream is final once b is finished).
func (b *HeadTailBuffer) follow(p *Process, from int64, opts FollowOptions) (*Follower, error) {
	window, hold := cmp.Or(opts.Window, DefaultFollowWindow), cmp.Or(opts.MaxHold, DefaultFollowHold)
	if window < 0 || window > MaxFollowWindow || hold > MaxFollowHold {
		return nil, xerrors.Errorf("window %d not in [0, %d], or hold %v above %v: %w",
			opts.Window, MaxFollowWindow, opts.MaxHold, MaxFollowHold, ErrInvalid)
	}
	s := &follower{b: b, p: p, window: max(window, minFollowWindow), maxHold: hold}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case from < 0:
		from = b.total
	case from > b.total:
		return nil, xerrors.Errorf("cursor %d beyond the end %d: %w", from, b.total, ErrInvalid)
	}
	s.cursor = from
	s.keeps = from == b.total && hold > 0
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
// ReadSinceInto is, so that it leaves the CPUs to the child. Once the
// stream is finished, a Read of stageMax (512) bytes or less reads up to
// stageSize (4 KiB) ahead, which the next Reads return.
func (f *Follower) Read(ctx context.Context, buf []byte) (Chunk, error) {
	s, b := f.s, f.s.b
	defer runtime.KeepAlive(f) // not closed as garbage while it reads
	if len(buf) == 0 {
		return Chunk{}, xerrors.Errorf("follow %q: empty buffer: %w", s.id(), ErrInvalid)
	}
	if s.st != nil {
		if s.closed.Load() {
			s.dropStage()
			return Chunk{}, xerrors.Errorf("follow %q: %w", s.id(), ErrClosed)
		}
		return s.fromStage(buf), nil
	}
	for {
		b.mu.Lock()
		if s.closed.Load() {
			b.mu.Unlock()
			return Chunk{}, xerrors.Errorf("follow %q: %w", s.id(), ErrClosed)
		}
		c, pieces := b.followReadStaged(s, buf)
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
			b.flow.reading++
		}
		b.mu.Unlock()
		select {
		case <-waitc:
		case <-done:
		case <-closec:
		case <-ctx.Done():
		}
		if waitc != nil {
			b.mu.Lock()
			b.flow.reading--
			b.mu.Unlock()
		}
		if err := ctx.Err(); err != nil {
			return Chunk{}, xerrors.Errorf("follow %q: %w", s.id(), err)
		}
	}
}

// followReadStaged is followReadLocked for a Read into buf: one of
// stageMax bytes or less of a finished stream reads ahead into a stage
// (s.st), and returns the first len(buf) bytes of it.
func (b *HeadTailBuffer) followReadStaged(s *follower, buf []byte) (Chunk, *pacer) {
	if len(buf) > stageMax || !b.finished {
		return b.followReadLocked(s, buf, len(buf))
	}
	st := stages.Get().(*stage)
	c, pieces := b.followReadLocked(s, st.buf[:], len(buf))
	n := copy(buf, c.Data)
	if left := len(c.Data) - n; left > 0 {
		st.off, st.end, st.from = n, len(c.Data), c.Next-int64(len(c.Data))
		s.st = st
		s.staged.Store(int32(left))
		c.Next -= int64(left)
		c.EOF = false
	} else {
		stages.Put(st)
	}
	c.Data = buf[:n]
	return c, pieces
}

// fromStage returns the next bytes of s.st in buf, and gives the stage
// back once they are all returned.
func (s *follower) fromStage(buf []byte) Chunk {
	st := s.st
	n := copy(buf, st.buf[st.off:st.end])
	st.off += n
	c := Chunk{Data: buf[:n], Next: st.from + int64(st.off), End: s.b.size.Load()}
	s.staged.Store(int32(st.end - st.off))
	if st.off == st.end {
		s.dropStage()
	}
	return c
}

// dropStage gives s.st back to the pool.
func (s *follower) dropStage() {
	s.staged.Store(0)
	stages.Put(s.st)
	s.st = nil
}

// followReadLocked reads for s into buf and moves its cursor: a read to
// the end makes s keep up again, one to where the stream ended at its
// wake ends its bound. limit is the caller's read size, which decides
// whether it reads in pieces (readPacedLocked, whose pacer it returns).
func (b *HeadTailBuffer) followReadLocked(s *follower, buf []byte, limit int) (Chunk, *pacer) {
	c, pieces := b.readPacedLocked(s.cursor, buf, limit, true)
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
	return FollowStats{Cursor: s.cursor - int64(s.staged.Load()), Lost: s.lost, Held: s.held}
}

// Close unregisters the follower: the pump never waits for it again, and
// a Read blocked in it returns ErrClosed at once, as do later Reads.
// Close is idempotent and always returns nil.
func (f *Follower) Close() error { f.s.close(); return nil }

func (s *follower) close() {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.closed.Load() {
		return
	}
	s.closed.Store(true)
	if b != noStderr {
		b.removeFollowerLocked(s)
		b.wakeLocked() // a Read blocked in the shared wait looks again
	}
	if s.closec != nil {
		close(s.closec)
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
