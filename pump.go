package proc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"

	"github.com/coder/quartz"
	"golang.org/x/xerrors"
)

// The output pump (design section 5): output goes through pipes the
// library owns, one pump goroutine per stream reading into the stream's
// HeadTailBuffer, its tee and its log file. exec.Cmd's own copying
// goroutines are not used: cmd.Wait would wait for them, and so for any
// grandchild that holds the pipe. The post-exit drain that stops the
// pumps is drain.go's.

const (
	// pumpBufSize is the read size of a pump: the capacity of a Linux pipe.
	pumpBufSize = 64 << 10
	// observedPipeSize is what a pump grows its pipe to once readers
	// (pollers, followers) share the Ps with it and it finds the pipe
	// holding a read's worth: four times the default, so that the child
	// writes on through four times as long a wait for the pump's turn.
	// The kernel takes the pages as the child fills them, but counts the
	// size against the user's pipe quota (/proc/sys/fs/pipe-user-pages-soft,
	// 64 MiB by default: 256 such pipes at once), past which an
	// unprivileged user's new pipes get two pages; so it is not larger.
	observedPipeSize = 256 << 10
	// finalReads bounds the last non-blocking pass of a stopped pump, so a
	// writer that never pauses cannot hold the drain.
	finalReads = 16
	// maxGrownPipes is how many pipes of one Manager may be grown to
	// observedPipeSize at once (pipeBudget): 64 of 256 KiB, 16 MiB, a
	// quarter of the default per-user quota, so that a Manager whose
	// records are all observed leaves the user's other programs their
	// full-size pipes. A pipe stays grown until its pump ends.
	maxGrownPipes = 64
)

// pipeBudget counts the grown pipes of one Manager's pumps (pump.run).
// A nil *pipeBudget (a pump made without a Manager, in tests) sets no
// limit.
type pipeBudget struct{ grown atomic.Int32 }

// take counts one more grown pipe, unless maxGrownPipes already are.
func (pb *pipeBudget) take() bool {
	if pb == nil {
		return true
	}
	for {
		n := pb.grown.Load()
		if n >= maxGrownPipes {
			return false
		}
		if pb.grown.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release gives back a pipe take counted.
func (pb *pipeBudget) release() {
	if pb != nil {
		pb.grown.Add(-1)
	}
}

var pumpBufs = sync.Pool{New: func() any {
	b := make([]byte, pumpBufSize)
	return &b
}}

// pump copies one read end into one buffer. It is started by
// Process.begin, ends on EOF (or any read error: a PTY master reports the
// end of the terminal as EIO) or when stopped by the drain, and sends once
// on done as it ends.
//
// A pump with a tee calls the tee's Write itself, so a tee that blocks
// holds the pump (and, once the pipe is full, the child). If it is still
// blocked DrainTimeout after the child's exit, the drain cuts it off and
// stops waiting for the pump; that pump goroutine then ends when the tee's
// Write returns, which only the tee's owner can make happen.
type pump struct {
	r        *os.File
	dst      *HeadTailBuffer
	log      *logFile        // nil without LogPath; shared by the pumps
	tee      *tee            // nil without a tee for this stream
	watch    *eventWatch     // nil unless this stream's lines are watched
	activity chan<- struct{} // capacity 1: "bytes arrived", never blocks
	done     chan<- struct{} // buffered to the number of pumps
	clock    quartz.Clock    // Options.Clock, for the followers' MaxHold
	bound    *quartz.Timer   // made by the first wait for a follower
	// holding is set while the pump waits for a follower to read; the
	// drain's quiet window does not end then.
	holding  atomic.Bool
	stopping atomic.Bool
	// stopc is closed by stop, so that a pump waiting for a follower's
	// read stops waiting; made once by stopped.
	stopOnce sync.Once
	stopc    chan struct{}
	// raw is r's SyscallConn, for read's non-blocking tries; nil where
	// there is none.
	raw syscall.RawConn
	// tryRead reads into tryBuf once, setting tryN and tryAgain; only the
	// pump's goroutine uses them.
	tryRead  func(fd uintptr) bool
	tryBuf   []byte
	tryN     int
	tryAgain bool
	// polledReads counts down the reads that try first (read).
	polledReads int
	// grown is set once the pump asked for a larger pipe (run); pipes
	// counts the Manager's grown pipes, and holdsPipe is set while this
	// pump's pipe is one of them, until the pump ends.
	grown     bool
	pipes     *pipeBudget
	holdsPipe bool
	// wakeDue is set while readers wait for a wake the pump owes them
	// (writeQuiet, wakeNow); deadline while a read deadline of
	// followLatency bounds when it comes (armWake). Only the pump's
	// goroutine uses them.
	wakeDue  bool
	deadline bool
	// ended is set just before the pump sends on done, so that the drain
	// knows which pump it is still waiting for.
	ended atomic.Bool
}

func (pu *pump) run() {
	defer func() {
		if pu.holdsPipe {
			pu.pipes.release()
		}
		pu.ended.Store(true)
		pu.done <- struct{}{}
	}()
	bp := pumpBufs.Get().(*[]byte)
	defer pumpBufs.Put(bp)
	buf := *bp
	for {
		p := pu.dst.readTarget(buf)
		n, err := pu.read(p)
		if n == len(buf) && &p[0] == &buf[0] && !pu.grown && pu.polledReads > 0 {
			// The pipe had at least a read's worth waiting while pollers
			// share the Ps with the pump: let the child write further
			// ahead instead of waiting on a full pipe for the pump's turn
			// (growPipe), within the Manager's budget of grown pipes.
			// Not for reads into the follow window (p is not buf): with
			// the pipe grown for a followed flood, the child's time
			// blocked on the pipe became time waiting for a CPU
			// instead, and no less in all.
			pu.grown = true
			if pu.pipes.take() {
				if pu.holdsPipe = growPipe(pu.r); !pu.holdsPipe {
					pu.pipes.release()
				}
			}
		}
		if n > 0 {
			pu.writeRead(p[:n])
		}
		if err != nil {
			if pu.wakeLate(err) {
				continue // followLatency passed: followers woken, read on
			}
			if errors.Is(err, os.ErrDeadlineExceeded) && pu.stopping.Load() {
				pu.wakeNow()
				pu.finalPass(buf)
				return
			}
			pu.settleFollowers()
			return
		}
	}
}

// writeRead stores what read returned (writeFollowed). A pump with a tee
// is not counted in its Manager's signal meanwhile, though polled: it
// tries no pipe while the tee's Write holds it, which may be for as
// long as the tee's owner likes, and pollers of a final record need not
// step aside for it (HeadTailBuffer.stepsAside). Only with a tee: the
// count is a cache line every poller reads.
func (pu *pump) writeRead(b []byte) {
	pu.dst.pumped()
	if pu.tee == nil || pu.polledReads == 0 {
		pu.writeFollowed(b)
		return
	}
	pu.dst.countPolledPump(false)
	defer pu.dst.countPolledPump(true)
	pu.writeFollowed(b)
}

// read reads into buf. Before a Read that would park the pump in the
// network poller, it may yield and try again: a parked pump is noticed
// only when a P finds nothing else to run or by sysmon every 10 ms, so
// goroutines that never block (tight Snapshot pollers) left it parked for
// milliseconds with the pipe already full again. A yielded pump
// waits in the global run queue, which busy Ps do visit. It tries only
// within polledReads reads of seeing Output return an unchanged rendering
// of any record of its Manager (HeadTailBuffer.polled, pollSignal:
// pollers of another, final record hold the Ps just the same), readSpins
// times and then for as long as that goes on: tight pollers hold the Ps
// anyway. Without them
// it parks at once: tries without pollers caught the pipe with a few KiB
// in it and tripled the CPU of a plain capture (more, smaller reads).
func (pu *pump) read(buf []byte) (n int, err error) {
	// A pump that tries its pipe between pollers' turns (polledReads > 0
	// between reads) is counted in its Manager's signal, so that pollers
	// of a final record step aside for it (HeadTailBuffer.output); not
	// while it may park in the blocking Read, nor once it ended.
	counted := pu.polledReads > 0
	defer func() {
		if err != nil {
			pu.polledReads = 0
		}
		if now := pu.polledReads > 0; now != counted {
			pu.dst.countPolledPump(now)
		}
	}()
	if pu.raw == nil {
		pu.raw, _ = pu.r.SyscallConn()
		// Made once: a closure passed to RawConn.Read escapes, and a new
		// one per read would allocate on every chunk.
		pu.tryRead = func(fd uintptr) bool {
			pu.tryN, pu.tryAgain, _ = tryRead(fd, pu.tryBuf)
			return true // never wait for readiness here
		}
	}
	pu.tryBuf = buf
	defer func() { pu.tryBuf = nil }()
	// Pollers seen lately keep the tries on for polledReads more reads:
	// right after a write they are busy rendering it, not calling.
	if pu.dst.polledLately() {
		pu.polledReads = polledReads
	}
	spin := pu.polledReads > 0
	if spin {
		pu.polledReads--
	}
	for i := 0; spin && pu.raw != nil; i++ {
		pu.tryN, pu.tryAgain = 0, false
		err := pu.raw.Read(pu.tryRead)
		if pu.tryN > 0 {
			return pu.tryN, nil
		}
		if err != nil || !pu.tryAgain {
			break // EOF, an error or a stopped pump: Read says which
		}
		if i >= readSpins {
			// Both taken: either says pollers hold the Ps.
			if mine, other := pu.dst.takePolled(), pu.dst.takePeersPolled(); !mine && !other {
				break // the pollers have stopped
			}
			pu.polledReads = polledReads
		}
		runtime.Gosched()
	}
	if counted {
		// Not while it may park.
		pu.dst.countPolledPump(false)
		counted = false
	}
	return pu.r.Read(buf)
}

// writeFollowed stores b as write does, but does not drop bytes a
// registered follower that keeps up has not read (design section 20),
// and wakes waiting followers lazily (pump.writeQuiet, follow.go): the
// pump writes what the window and the tail keep of their unread bytes
// (HeadTailBuffer.room) and waits for the rest, as a pipe's writer waits
// for its reader; meanwhile the child fills the pipe and then waits too.
// The wait ends when a follower reads or closes, when the drain stops the
// pump, or once a follower's MaxHold has passed since its wake without it
// reaching where the stream ended then (HeadTailBuffer.hold): it then
// loses the hold until one of its reads reaches the end, and learns what
// it missed from Chunk.Lost. So one wake holds the child at most
// MaxFollowHold, on Options.Clock.
func (pu *pump) writeFollowed(b []byte) {
	for len(b) > 0 {
		k := len(b)
		if !pu.stopping.Load() {
			k = pu.dst.room(k)
		}
		if k == 0 {
			// A follower left waiting (writeQuiet) reads first.
			pu.wakeNow()
			var wait time.Duration
			var roomc <-chan struct{}
			k, wait, roomc = pu.dst.hold(len(b), pu.clock.Now("pump", "follower"))
			if k == 0 {
				pu.waitRoom(wait, roomc)
				continue
			}
		}
		pu.writeQuiet(b[:k])
		b = b[k:]
		select {
		case pu.activity <- struct{}{}:
		default:
		}
	}
}

// waitRoom waits until a follower reads or goes (roomc), the pump is
// stopped, or wait has passed, and counts the wait to the followers it
// was for (HeadTailBuffer.addHeld).
func (pu *pump) waitRoom(wait time.Duration, roomc <-chan struct{}) {
	pu.holding.Store(true)
	defer pu.holding.Store(false)
	start := pu.clock.Now("pump", "follower")
	defer func() { pu.dst.addHeld(pu.clock.Since(start, "pump", "follower")) }()
	// One timer per pump, made at its first wait: waits come every
	// tail's worth of bytes while a follower keeps up.
	if pu.bound == nil {
		pu.bound = pu.clock.NewTimer(wait, "pump", "follower")
	} else {
		pu.bound.Reset(wait, "pump", "follower")
	}
	select {
	case <-roomc:
		pu.bound.Stop("pump", "follower")
	case <-pu.stopped():
		pu.bound.Stop("pump", "follower")
		pu.dst.dropHolds()
	case <-pu.bound.C:
		// hold ends the holds whose bound has passed.
	}
}

// readSpins is how many times read tries before it looks whether Output
// is still being called: tries that stop as soon as no Output came during
// one yield leave the pump parked several times as long.
const readSpins = 4

// polledReads is how many reads the pump keeps trying after it last saw
// an Output call.
const polledReads = 64

// write stores b: in the log first, so that what a reader of the buffer
// has seen is already in the file.
func (pu *pump) write(b []byte) {
	pu.log.write(b)
	pu.tee.write(b)
	_, _ = pu.dst.Write(b)
	pu.watch.scan(b)
}

// stopped returns a channel that stop closes.
func (pu *pump) stopped() <-chan struct{} {
	pu.stopOnce.Do(func() { pu.stopc = make(chan struct{}) })
	return pu.stopc
}

// stop makes a blocked Read return; run then makes its final pass.
func (pu *pump) stop() {
	if !pu.stopping.Swap(true) {
		pu.stopped()
		close(pu.stopc)
	}
	stopReading(pu.r)
}

// finalPass takes the bytes already sitting in the pipe without waiting
// for more, in at most finalReads reads.
func (pu *pump) finalPass(buf []byte) {
	if err := pu.r.SetReadDeadline(time.Time{}); err != nil {
		return
	}
	rc, err := pu.r.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Read(func(fd uintptr) bool {
		for range finalReads {
			n, err := readNonblock(fd, buf)
			if n <= 0 || err != nil {
				break
			}
			pu.write(buf[:n])
		}
		return true // never wait for readiness
	})
}

// tees is what the tees of one process share: writes to them never overlap
// (even when one writer is given as both tees), and the first failure is
// kept for Info.TeeError.
type tees struct {
	// mu serialises the tees' Writes.
	mu      sync.Mutex
	failure atomic.Pointer[string]
}

// tee is StartRequest.OutputTee or StderrTee as its pump sees it. Its
// methods are no-ops on a nil *tee.
type tee struct {
	w      io.Writer
	name   string // "output tee", "stderr tee"
	shared *tees
	// stopped is set at the tee's first error, or when the drain cut it
	// off; no Write is made after it.
	stopped atomic.Bool
	// writing is set while write runs (waiting for the other tee included).
	writing atomic.Bool
}

// newTee returns nil for a nil writer.
func newTee(w io.Writer, name string, shared *tees) *tee {
	if w == nil {
		return nil
	}
	return &tee{w: w, name: name, shared: shared}
}

// write hands b to the tee's Writer, blocking as long as it does. A
// failed or short write stops the tee and is recorded.
func (t *tee) write(b []byte) {
	if t == nil || t.stopped.Load() {
		return
	}
	// writing is set before stopped is checked (and before waiting for the
	// other tee's Write), and cutOff sets stopped before the drain looks at
	// writing: the drain either sees this call or this call sees the cut.
	t.writing.Store(true)
	defer t.writing.Store(false)
	t.shared.mu.Lock()
	defer t.shared.mu.Unlock()
	if t.stopped.Load() {
		return
	}
	n, err := t.w.Write(b)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		t.fail(err.Error())
	}
}

// cutOff stops a tee whose Write is still blocked after the drain's limit.
func (t *tee) cutOff(limit time.Duration) {
	if t == nil {
		return
	}
	t.fail(fmt.Sprintf("cut off: Write still blocked %v after the process exited", limit))
}

// fail stops the tee and records msg if no tee of the process failed
// before.
func (t *tee) fail(msg string) {
	if t.stopped.Swap(true) {
		return
	}
	full := t.name + ": " + msg
	t.shared.failure.CompareAndSwap(nil, &full)
}

// errString is Info.TeeError.
func (s *tees) errString() string {
	if msg := s.failure.Load(); msg != nil {
		return *msg
	}
	return ""
}

// logFile is the optional unbounded copy of the output (StartRequest.LogPath).
// Its methods are no-ops on a nil *logFile.
type logFile struct {
	path    string
	created bool // removed again if the start fails

	// failure is the first write error, readable without waiting for a
	// write in progress (Info reads it).
	failure atomic.Pointer[string]

	// mu guards the fields below; the pumps of one process share the file.
	mu     sync.Mutex
	f      *os.File
	failed bool // logging stopped at the first error
}

// openLog opens path for appending, creating it with mode 0600. Failures are ErrInvalid: opening the log is part of validation.
func openLog(path string) (*logFile, error) {
	_, statErr := os.Lstat(path)
	created := errors.Is(statErr, os.ErrNotExist)
	// logOpenFlags holds O_NONBLOCK on Unix: opening a FIFO with no reader
	// then fails at once instead of blocking the start.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|logOpenFlags, 0o600)
	if err != nil {
		if exhausted(err) {
			// Out of a resource, not a bad path (design section 8): the
			// OS error and no sentinel, like every other exhaustion.
			return nil, xerrors.Errorf("start: log file %s: %w", quotePath(path), err)
		}
		return nil, xerrors.Errorf("start: log file %s: %v: %w", quotePath(path), err, ErrInvalid)
	}
	// A regular file, or a device that never blocks a write (/dev/null,
	// /dev/full). Not a directory, FIFO, socket or terminal: a write there
	// can block for ever, and the log is written before the buffer.
	fi, err := f.Stat()
	if err != nil || !(fi.Mode().IsRegular() || isNullDevice(fi)) {
		_ = f.Close()
		return nil, xerrors.Errorf("start: log file %s is not a regular file: %w", quotePath(path), ErrInvalid)
	}
	return &logFile{path: path, created: created, f: f}, nil
}

// exhausted reports whether err says the system ran out of descriptors,
// memory or space, rather than that the request was wrong.
func exhausted(err error) bool {
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.ENOSPC} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

func (l *logFile) write(b []byte) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil || l.failed {
		return
	}
	if _, err := l.f.Write(b); err != nil {
		l.failLocked(err)
	}
}

// failLocked records the first error and stops logging. The caller holds
// l.mu.
func (l *logFile) failLocked(err error) {
	l.failed = true
	msg := err.Error()
	l.failure.Store(&msg)
}

// isNullDevice reports whether fi is /dev/null or /dev/full.
func isNullDevice(fi os.FileInfo) bool {
	for _, name := range []string{"/dev/null", "/dev/full"} {
		if dev, err := os.Stat(name); err == nil && os.SameFile(fi, dev) {
			return true
		}
	}
	return false
}

// close closes the file; the exit goroutine calls it before the record is
// final.
func (l *logFile) close() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return
	}
	if err := l.f.Close(); err != nil && !l.failed {
		l.failLocked(err)
	}
	l.f = nil
}

// discard closes the file of a start that failed and removes it if the
// start created it and it is still empty.
func (l *logFile) discard() {
	if l == nil {
		return
	}
	l.close()
	// Remove only a file this start created and nobody wrote to since.
	if fi, err := os.Stat(l.path); err == nil && l.created && fi.Size() == 0 {
		_ = os.Remove(l.path)
	}
}

func (l *logFile) errString() string {
	if l == nil {
		return ""
	}
	if msg := l.failure.Load(); msg != nil {
		return *msg
	}
	return ""
}

// writeOnce makes one non-blocking write of b to f and fails if it does not
// all fit now.
func writeOnce(f *os.File, b []byte) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return xerrors.Errorf("descriptor: %w", err)
	}
	var n int
	var werr error
	err = rc.Write(func(fd uintptr) bool {
		n, werr = writeNonblock(fd, b)
		return true // never wait for room
	})
	switch {
	case err != nil:
		return xerrors.Errorf("write: %w", err)
	case werr != nil:
		return werr
	case n < len(b):
		return xerrors.Errorf("write: %d of %d bytes fit", n, len(b))
	}
	return nil
}

// quotePath quotes a path for an error message so that it reads as
// written: %q would double every backslash of a Windows path. A path
// holding a quote or an unprintable character is quoted by strconv.
func quotePath(path string) string {
	for _, r := range path {
		if r == '"' || !unicode.IsPrint(r) {
			return strconv.Quote(path)
		}
	}
	return `"` + path + `"`
}
