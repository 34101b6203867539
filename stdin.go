package proc

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/xerrors"
)

// The child's stdin: Write, WriteContext and CloseStdin, over a pipe or the
// PTY master.

// Process is an io.Writer to the child's stdin: io.Copy(p, r) feeds it.
var _ io.Writer = (*Process)(nil)

// Write writes b to the child's stdin; it is WriteContext without a
// deadline.
func (p *Process) Write(b []byte) (int, error) {
	return p.WriteContext(context.Background(), b)
}

// WriteContext writes b to the child's stdin (or types it into the
// terminal with TTY). Writes are serialised: one lands whole before the next
// starts. A write cut short returns the bytes written so far with an error:
// wrapping ctx.Err() when ctx ends, ErrNotRunning when the child exits (also
// at once for a write begun after the exit, even while output drains),
// ErrClosed when Close runs, and syscall.EPIPE when the child closed its
// stdin but lives on. Without StartRequest.Stdin, or after CloseStdin, it
// returns an error wrapping ErrInvalid. After Close, a process that Close
// stopped answers ErrClosed; one that had exited before, ErrNotRunning.
//
// On Windows stdin is an overlapped named pipe, which takes deadlines from
// Go 1.25 on; built with an older Go, a write blocked on a child that never
// reads ends only when the child exits or Close runs, not with ctx.
func (p *Process) WriteContext(ctx context.Context, b []byte) (int, error) {
	if p.in == nil || !p.in.writable {
		return 0, xerrors.Errorf("write to %q: started without Stdin: %w", p.info.ID, ErrInvalid)
	}
	return p.in.write(ctx, b, p)
}

// CloseStdin closes the child's stdin, so that a program reading it sees
// end-of-file. With TTY it sends end-of-file (^D) to the terminal instead.
// It returns an error wrapping ErrInvalid without Stdin, and ErrNotRunning
// once the child exited. Closing twice is not an error.
func (p *Process) CloseStdin() error {
	if p.in == nil || !p.in.writable {
		return xerrors.Errorf("close stdin of %q: started without Stdin: %w", p.info.ID, ErrInvalid)
	}
	return p.in.close(p)
}

// stdinPipe is the parent's end of the child's stdin: a pipe, or the PTY
// master with TTY.
type stdinPipe struct {
	w   *os.File
	tty bool
	// writable is StartRequest.Stdin. A terminal started without it keeps
	// its stdinPipe for Resize, but takes no Write or CloseStdin.
	writable bool

	// exited is closed once the child was reaped (exit), after writes
	// were refused: a write that met the child's exit waits for it.
	exited chan struct{}

	// turn serialises writes: a writer holds its one slot while writing,
	// so one write lands whole before the next starts. A channel, not a
	// mutex, so that a writer waiting for its turn still ends with its
	// context.
	turn chan struct{}

	// mu guards the fields below.
	mu    sync.Mutex
	state stdinState
	// gen numbers writes, so that a late context callback of an earlier
	// write cannot interrupt a later one.
	gen uint64
	// deadlineSet: a cancelled write left an expired write deadline that
	// the next write must clear.
	deadlineSet bool
}

type stdinState int

const (
	stdinOpen     stdinState = iota
	stdinClosed              // CloseStdin was called
	stdinExited              // the child was reaped
	stdinStopping            // Close is stopping the process
)

// errLocked is the error of op (write, close stdin, resize) on a stdin
// that no longer takes writes. The caller must hold s.mu.
func (s *stdinPipe) errLocked(op, id string) error {
	switch s.state {
	case stdinClosed:
		return xerrors.Errorf("%s %q: stdin was closed: %w", op, id, ErrInvalid)
	case stdinExited:
		return xerrors.Errorf("%s %q: %w", op, id, ErrNotRunning)
	case stdinStopping:
		return xerrors.Errorf("%s %q: %w", op, id, ErrClosed)
	}
	return nil
}

// check returns the error a call on stdin (or the terminal) would get now.
func (s *stdinPipe) check(p *Process) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == stdinClosed && s.tty {
		return nil // ^D was sent; the terminal still takes a resize.
	}
	return s.errLocked("resize", p.info.ID)
}

func newStdinPipe(w *os.File, tty, writable bool) *stdinPipe {
	return &stdinPipe{w: w, tty: tty, writable: writable, exited: make(chan struct{}), turn: make(chan struct{}, 1)}
}

func (s *stdinPipe) write(ctx context.Context, b []byte, p *Process) (int, error) {
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return 0, xerrors.Errorf("write to %q: waiting for an earlier write: %w", p.info.ID, ctx.Err())
	}
	defer func() { <-s.turn }()

	gen, err := s.begin(ctx, p.info.ID)
	if err != nil {
		return 0, err
	}
	// A context that can never end (Write's) needs no callback: the
	// per-write cost stays a lock and the write itself.
	stop := func() bool { return false }
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() {
			s.mu.Lock()
			if s.gen == gen {
				_ = s.w.SetWriteDeadline(pastDeadline)
				s.deadlineSet = true
			}
			s.mu.Unlock()
		})
	}
	n, err := s.w.Write(b)
	stop()
	if err == nil {
		return n, nil
	}
	return n, s.writeErr(ctx, err, p)
}

// begin readies the pipe for the write whose turn it is, unless stdin is
// closed or ctx ended, and returns its generation: a context that ends
// later sets the write deadline only while that write is the pipe's.
func (s *stdinPipe) begin(ctx context.Context, id string) (gen uint64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.errLocked("write to", id); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, xerrors.Errorf("write to %q: %w", id, err)
	}
	s.gen++
	// Clear what an earlier cancelled write left; exit and Close set the
	// deadline again under mu, so they cannot be missed. Only a write
	// whose context ended sets it, so most writes skip the call.
	if s.deadlineSet {
		_ = s.w.SetWriteDeadline(time.Time{})
		s.deadlineSet = false
	}
	return s.gen, nil
}

// writeErr is the error of a write that failed with err: the pipe's
// state (closed, the child gone), ctx's, or err.
func (s *stdinPipe) writeErr(ctx context.Context, err error, p *Process) error {
	s.mu.Lock()
	stateErr := s.errLocked("write to", p.info.ID)
	s.mu.Unlock()
	switch {
	case stateErr != nil:
		return stateErr
	case ctx.Err() != nil:
		// A deadline error that raced the context is the context's.
		return xerrors.Errorf("write to %q: %w", p.info.ID, ctx.Err())
	case errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.EIO):
		// A child on its way out closes its stdin before its exit can be
		// reaped: EPIPE in that moment is its exit, not a stdin it closed.
		if s.hasExited() || exitsSoon(p.info.PID, s.exited) {
			// The child is gone; its exit goroutine is about to say so.
			<-s.exited
			return xerrors.Errorf("write to %q: %w", p.info.ID, ErrNotRunning)
		}
	}
	return xerrors.Errorf("write to %q: %w", p.info.ID, err)
}

// exitSoonWait bounds exitsSoon's wait for a child whose stdin write met
// EPIPE to exit.
const exitSoonWait = 250 * time.Millisecond

// close implements CloseStdin. A write in progress is released and
// returns ErrInvalid.
func (s *stdinPipe) close(p *Process) error {
	s.mu.Lock()
	switch s.state {
	case stdinClosed:
		s.mu.Unlock()
		return nil
	case stdinOpen:
	default:
		err := s.errLocked("close stdin of", p.info.ID)
		s.mu.Unlock()
		return err
	}
	s.state = stdinClosed
	s.gen++
	if !s.tty {
		// Close releases a blocked write (it returns ErrInvalid) and gives
		// the child end-of-file.
		err := s.w.Close()
		s.mu.Unlock()
		if err != nil {
			return xerrors.Errorf("close stdin of %q: %w", p.info.ID, err)
		}
		return nil
	}
	// A terminal has no stdin of its own to close: end-of-file is ^D typed
	// into it. Release a blocked write first, then wait for its turn.
	_ = s.w.SetWriteDeadline(pastDeadline)
	s.mu.Unlock()
	s.turn <- struct{}{}
	defer func() { <-s.turn }()

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != stdinClosed {
		return s.errLocked("close stdin of", p.info.ID)
	}
	_ = s.w.SetWriteDeadline(time.Time{})
	// One non-blocking attempt: a terminal whose input queue is full (the
	// program never reads) must not hold the caller.
	if err := writeOnce(s.w, []byte{4}); err != nil {
		return xerrors.Errorf("close stdin of %q: send end-of-file: %w", p.info.ID, err)
	}
	return nil
}

// exit refuses further writes once the child was reaped, releasing a write
// blocked on a pipe that a grandchild may hold open without reading, and
// then publishes the exit (exited). Only the exit goroutine calls it, once.
func (s *stdinPipe) exit() {
	s.shut(stdinExited)
	close(s.exited)
}

// hasExited reports whether the child was reaped.
func (s *stdinPipe) hasExited() bool { return tryRecv(s.exited) }

// closeByManager releases blocked writers with ErrClosed.
func (s *stdinPipe) closeByManager() { s.shut(stdinStopping) }

func (s *stdinPipe) shut(state stdinState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == stdinExited || s.state == stdinStopping {
		return
	}
	prev := s.state
	s.state = state
	_ = s.w.SetWriteDeadline(pastDeadline)
	if !s.tty && prev == stdinOpen {
		// Our end of the pipe is of no more use; a grandchild reading it
		// sees end-of-file. (The PTY master is closed when final.)
		_ = s.w.Close()
	}
}

// pastDeadline stops a blocked read or write at once. It is a fixed point in
// the past, not a clock reading: the timers that decide when to stop run on
// Options.Clock.
var pastDeadline = time.Unix(1, 0)
