// Package screen shows what a program run under a terminal would leave on
// the screen: the text of the visible rows, the rows that scrolled off,
// the cursor and whether a full-screen program (vim, less, top) is on the
// alternate screen. It is what an agent shows a model for a TUI, a REPL or
// an installer's progress, where the byte stream is mostly escape
// sequences and redraws.
//
// [Start] runs a [proc.StartRequest] under a terminal (StartRequest.TTY)
// with the screen as its OutputTee, so the screen sees every byte, in
// order, from the record's pump. The screen also answers the questions a
// program asks its terminal (where is the cursor, what are you), by
// writing the replies to the record's terminal: under a bare proc TTY
// nobody answers, and a program that asks waits forever.
//
// The emulator is a focused one of this package: it keeps text, not
// colours or attributes, follows xterm where terminals differ, and keeps
// pace with the terminal (see BenchmarkScreen for its cost against a bare
// TTY and BenchmarkEmulator against github.com/charmbracelet/x/vt). It
// does not reflow rows when the width changes.
//
// A Screen is bounded by construction, whatever the program writes: a
// size above 1,000,000 cells (rows × columns) is refused at Start and
// Resize; a cell keeps at most 16 combining marks (more are dropped, as
// terminals do); an OSC, DCS, SOS, PM or APC string is kept up to 64
// bytes (the rest is swallowed up to its terminator, and a cut string is
// not acted on) and a control sequence up to 16 parameters; replies to
// queries wait in a queue of 64 KiB, and queries beyond it go unanswered
// rather than block anyone; the scrollback keeps at most [ScrollbackRows]
// rows and 2,000,000 cells. The work per byte is bounded too: clearing the
// screen, switching to the alternate screen, scrolling a region and
// moving the cursor cost the same on any size, erasing rows costs the rows
// that hold something, and the emulator reads at most 16 KiB at a time
// under the screen's lock, so no reader waits longer than that takes.
// Only a few sequences cost up to a row's width in memory moves (inserting
// and deleting characters, a row scrolling off) or up to the screen's
// height in row moves (scrolling one region after another); see
// BenchmarkFlood.
//
// It is a module of its own (github.com/procvisor/proc/screen) so that
// users of proc who do not need it never download its dependencies.
// Terminals are a Unix feature of proc: on Windows, Start returns an error
// wrapping proc.ErrUnsupported.
package screen

import (
	"context"
	"io"
	"regexp"
	"sync"

	"github.com/procvisor/proc"
	"golang.org/x/xerrors"
)

// defaultSize is the terminal size Start uses when the request has none.
var defaultSize = proc.TermSize{Rows: 24, Cols: 80}

// ScrollbackRows is how many rows that scrolled off the top a Screen
// keeps; older ones are dropped.
const ScrollbackRows = 1000

// maxCells bounds a screen's size, rows × columns, as proc bounds a
// terminal's: each screen, the main and the alternate one, holds a cell
// per character of that size.
const maxCells = 1_000_000

// Screen is the terminal screen of a process started by [Start]. Its
// methods are safe for concurrent use; each reads the screen after every
// byte the pump has handed over so far. It needs no closing: it holds no
// goroutine but, while the pump hands over bytes faster than the emulator
// reads them, the one that feeds them to it (which ends when it caught
// up), and while a reply to a query is on its way to the process, the one
// that writes it (which ends when the write does: the process read it,
// exited, or its Manager was closed).
type Screen struct {
	// started is closed once Start's call of s.Start returned; p is set
	// before (nil if that start failed).
	started chan struct{}

	// mu guards the fields below, down to inMu. It is held while the
	// emulator runs and while the terminal is resized, never while
	// writing to the process or to the request's own tee, nor while
	// closing changed. Lock order: mu before inMu.
	mu   sync.Mutex
	p    *proc.Process
	term *term
	// write feeds the emulator (term.write; tests watch it), at most
	// feedChunk bytes at a time.
	write func([]byte)
	// changed, if not nil, is closed (and set to nil) when the screen
	// changes: Wait's wake-up.
	changed chan struct{}
	// replies not yet written to the process, and whether the goroutine
	// that writes them runs; repliesDead once a write failed (the process
	// is gone): replies are dropped from then on.
	replies     []byte
	answering   bool
	repliesDead bool
	// teeErr is why the request's own OutputTee stopped.
	teeErr error

	// taken is the backlog the emulator is reading, taken[took:] not
	// read yet; fed counts the bytes of the backlog it read.
	taken []byte
	took  int
	fed   int64

	// inMu guards the fields below; it is a leaf (taken alone or under
	// mu), so that the pump never waits for the emulator to hand over
	// bytes, only to append them.
	inMu sync.Mutex
	// backlog holds bytes from the pump that the emulator has not taken
	// yet, at most maxBacklog; spare is the buffer it swaps with. handed
	// counts the bytes ever appended to it. feeding is set while the
	// goroutine that feeds the backlog to the emulator runs.
	backlog, spare []byte
	handed         int64
	feeding        bool
}

// maxBacklog bounds the bytes the pump hands over faster than the
// emulator reads them; beyond it the pump feeds the emulator itself,
// which holds it, and the program, as a slow terminal would.
const maxBacklog = 256 << 10

// feedChunk bounds the bytes the emulator reads while it holds the lock:
// as the work per byte is bounded, so is the time a reader, a resize or
// the pump waits for the lock.
const feedChunk = 16 << 10

// Start starts req on s (a *proc.Manager or *proc.Scope) under a terminal,
// with a Screen as its OutputTee, and returns the Screen; the process is
// [Screen.Process].
//
// It sets req.TTY, and req.Stdin (the replies to the program's queries are
// typed into the terminal through Process.Write); a zero req.Size becomes
// 24 rows by 80 columns. The request's own OutputTee, if any, still gets
// every byte, in order, from the pump, as proc feeds a tee; if its Write
// fails (or writes short) it is fed no more, [Screen.TeeError] says why,
// and the screen goes on. Start's errors are those of s.Start, and an error
// wrapping proc.ErrInvalid for a Size with one zero dimension or above
// 1,000,000 cells (rows × columns); on Windows (no terminals in proc) it
// wraps proc.ErrUnsupported.
func Start(s interface {
	Start(proc.StartRequest) (*proc.Process, error)
}, req proc.StartRequest) (*Screen, error) {
	if s == nil {
		return nil, xerrors.Errorf("screen: start: no Manager or Scope: %w", proc.ErrInvalid)
	}
	if req.Size == (proc.TermSize{}) {
		req.Size = defaultSize
	}
	if req.Size.Rows == 0 || req.Size.Cols == 0 {
		return nil, xerrors.Errorf("screen: start: Size %dx%d has a zero dimension: %w", req.Size.Rows, req.Size.Cols, proc.ErrInvalid)
	}
	if err := checkCells(req.Size); err != nil {
		return nil, xerrors.Errorf("screen: start: %w", err)
	}
	scr := newScreen(int(req.Size.Rows), int(req.Size.Cols))
	req.TTY, req.Stdin = true, true
	req.OutputTee = &tee{scr: scr, own: req.OutputTee}
	p, err := s.Start(req)
	scr.mu.Lock()
	scr.p = p
	scr.mu.Unlock()
	close(scr.started)
	if err != nil {
		return nil, xerrors.Errorf("screen: %w", err)
	}
	return scr, nil
}

func newScreen(rows, cols int) *Screen {
	s := &Screen{
		started: make(chan struct{}),
		term:    newTerm(rows, cols, ScrollbackRows),
	}
	s.write = s.term.write
	return s
}

// Process returns the process the screen shows.
func (s *Screen) Process() *proc.Process { return s.p }

// Text returns the visible screen: its rows joined by "\n", each without
// trailing spaces, without the blank rows at the bottom (blank rows above
// text are kept, so line i is row i). Wide characters appear once,
// combining marks after their base.
func (s *Screen) Text() string {
	var text string
	s.look(func() { text = s.term.text() })
	return text
}

// Scrollback returns the last n rows that scrolled off the top of the main
// screen, oldest first, without trailing spaces; fewer if fewer did
// (at most [ScrollbackRows] are kept), none for n <= 0. Rows a full-screen
// program draws on the alternate screen never scroll into it; rows that
// shrinking the screen pushed off the top do.
func (s *Screen) Scrollback(n int) []string {
	var rows []string
	s.look(func() { rows = s.term.sb.last(n) })
	return rows
}

// Cursor returns the cursor's row and column, 0-based. After a character
// was written in the last column the cursor stays in that column until the
// next character wraps.
func (s *Screen) Cursor() (row, col int) {
	s.look(func() { row, col = s.term.y, s.term.x })
	return row, col
}

// AltScreen reports whether the program switched to the alternate screen,
// as full-screen programs (vim, less, top) do.
func (s *Screen) AltScreen() bool {
	var alt bool
	s.look(func() { alt = s.term.g == &s.term.alt })
	return alt
}

// checkCells returns an error wrapping proc.ErrInvalid, naming the cap,
// for a size above maxCells.
func checkCells(size proc.TermSize) error {
	if cells := int(size.Rows) * int(size.Cols); cells > maxCells {
		return xerrors.Errorf("size %dx%d is %d cells, above the cap of %d: %w", size.Rows, size.Cols, cells, maxCells, proc.ErrInvalid)
	}
	return nil
}

// Resize resizes the process's terminal (the program gets SIGWINCH) and
// the screen together, so that what the program draws for the new size is
// read at that size. Fewer rows push the top rows into the scrollback and
// keep the cursor's row, as a terminal does; rows are cut or padded on the
// right, not reflowed. Its errors are those of Process.Resize: a zero
// dimension or a size above 1,000,000 cells (rows × columns) is
// proc.ErrInvalid, a process that exited proc.ErrNotRunning.
func (s *Screen) Resize(size proc.TermSize) error {
	if err := checkCells(size); err != nil {
		return xerrors.Errorf("screen: resize: %w", err)
	}
	var err error
	s.look(func() {
		// The bytes before the resize were read at the old size (look
		// fed the backlog), and the lock is held across the resize of the
		// terminal so that the next ones, which may be the program's
		// answer to SIGWINCH, are read at the new size.
		if err = s.p.Resize(size); err == nil {
			s.term.resize(int(size.Rows), int(size.Cols))
		}
	})
	if err != nil {
		return xerrors.Errorf("screen: %w", err)
	}
	return nil
}

// Wait waits until a row of the visible screen matches re and returns
// that row (as Text shows it). It returns an error wrapping ctx.Err() when
// ctx ends first, and one wrapping proc.ErrNotRunning when the process
// ended without a match on its final screen.
func (s *Screen) Wait(ctx context.Context, re *regexp.Regexp) (string, error) {
	if re == nil {
		return "", xerrors.Errorf("screen: wait: nil regexp: %w", proc.ErrInvalid)
	}
	for {
		var row string
		var ok bool
		var changed chan struct{}
		s.look(func() {
			row, ok = s.matchLocked(re)
			if !ok && s.changed == nil {
				s.changed = make(chan struct{})
			}
			changed = s.changed
		})
		if ok {
			return row, nil
		}
		select {
		case <-changed:
		case <-s.p.Done():
			// Done closes after the last byte reached the tee: this
			// look is at the final screen.
			var row string
			var ok bool
			s.look(func() { row, ok = s.matchLocked(re) })
			if ok {
				return row, nil
			}
			return "", xerrors.Errorf("screen: wait for %q: the process ended: %w", re, proc.ErrNotRunning)
		case <-ctx.Done():
			return "", xerrors.Errorf("screen: wait for %q: %w", re, ctx.Err())
		}
	}
}

func (s *Screen) matchLocked(re *regexp.Regexp) (string, bool) {
	for y := range s.term.rows {
		if row := s.term.rowText(y); re.MatchString(row) {
			return row, true
		}
	}
	return "", false
}

// TeeError returns why the request's own OutputTee stopped receiving
// bytes, or nil.
func (s *Screen) TeeError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.teeErr
}

// tee is the request's OutputTee: the pump calls Write with every byte of
// the terminal, one call at a time.
type tee struct {
	scr *Screen
	own io.Writer // the request's own OutputTee, nil when none or stopped
}

func (t *tee) Write(b []byte) (int, error) {
	s := t.scr
	s.inMu.Lock()
	if len(s.backlog)+len(b) <= maxBacklog {
		s.backlog = append(s.backlog, b...)
		s.handed += int64(len(b))
		start := !s.feeding
		s.feeding = true
		s.inMu.Unlock()
		if start {
			// Stopped once the emulator read every byte handed over; a
			// Write after that starts another.
			go s.feed()
		}
	} else {
		s.inMu.Unlock()
		for p := b; len(p) > 0; {
			chunk := p[:min(len(p), feedChunk)]
			s.look(func() { s.write(chunk) })
			p = p[len(chunk):]
		}
	}
	if t.own != nil {
		n, err := t.own.Write(b)
		if err == nil && n < len(b) {
			err = io.ErrShortWrite
		}
		if err != nil {
			t.own = nil
			s.mu.Lock()
			s.teeErr = xerrors.Errorf("output tee: %w", err)
			s.mu.Unlock()
		}
	}
	return len(b), nil
}

// feed feeds the backlog to the emulator until it read every byte
// handed over.
func (s *Screen) feed() {
	for {
		s.mu.Lock()
		s.inMu.Lock()
		if s.fed == s.handed {
			s.feeding = false
			s.inMu.Unlock()
			s.mu.Unlock()
			return
		}
		s.inMu.Unlock()
		s.mu.Unlock()
		s.look(func() {})
	}
}

// look runs f on the emulator under mu once the emulator has read every
// byte handed over before the call, then sends what the emulator produced
// (replies, Wait's wake-up) after releasing the lock. The emulator reads
// at most feedChunk bytes at a time under the lock, which is released
// between chunks.
func (s *Screen) look(f func()) {
	s.mu.Lock()
	s.inMu.Lock()
	target := s.handed
	s.inMu.Unlock()
	for s.fed < target {
		s.feedLocked()
		if s.fed < target {
			ch, answer := s.publishLocked()
			s.mu.Unlock()
			s.after(ch, answer)
			s.mu.Lock()
		}
	}
	f()
	ch, answer := s.publishLocked()
	s.mu.Unlock()
	s.after(ch, answer)
}

// feedLocked feeds the emulator up to feedChunk bytes of the backlog,
// taking the backlog when what it took before was read.
func (s *Screen) feedLocked() {
	if s.took == len(s.taken) {
		s.inMu.Lock()
		if s.taken != nil {
			s.spare = s.taken[:0]
		}
		s.taken, s.took = s.backlog, 0
		s.backlog, s.spare = s.spare[:0], nil
		s.inMu.Unlock()
	}
	n := min(len(s.taken)-s.took, feedChunk)
	s.write(s.taken[s.took : s.took+n])
	s.took += n
	s.fed += int64(n)
}

// publishLocked takes the emulator's replies into the queue and the Wait
// wake-up channel out of the Screen; after acts on them once the lock is
// released.
func (s *Screen) publishLocked() (changed chan struct{}, answer bool) {
	changed, s.changed = s.changed, nil
	if r := s.term.reply; len(r) > 0 {
		if !s.repliesDead && len(s.replies)+len(r) <= maxReply {
			s.replies = append(s.replies, r...)
		}
		s.term.reply = r[:0]
	}
	if len(s.replies) > 0 && !s.answering {
		s.answering = true
		answer = true
	}
	return changed, answer
}

func (s *Screen) after(changed chan struct{}, answer bool) {
	if changed != nil {
		close(changed)
	}
	if answer {
		// Stopped by an empty queue, or by a failed write (the process
		// exited or its Manager closed, which also ends a write blocked
		// on a child that does not read its terminal).
		go s.answer()
	}
}

// answer writes the queued replies to the process until the queue is
// empty.
func (s *Screen) answer() {
	<-s.started
	for {
		s.mu.Lock()
		b, p := s.replies, s.p
		s.replies = nil
		if len(b) == 0 || p == nil || s.repliesDead {
			s.answering = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		if _, err := p.Write(b); err != nil {
			s.mu.Lock()
			s.repliesDead, s.answering, s.replies = true, false, nil
			s.mu.Unlock()
			return
		}
	}
}
