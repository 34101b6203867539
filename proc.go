// Package proc supervises child processes for Go programs: AI-agent tools
// that run shell commands for a model, services that expose process control
// over their own transport, and tests that need a real subprocess.
//
// A [Manager] owns process records. Each record keeps a bounded head/tail
// copy of its output (see [HeadTailBuffer]), has exactly one goroutine that
// collects the child's exit, and answers [Process.Snapshot] by reading its
// status before its output, so that a caller never pairs stale output with a
// final status.
//
// # Lifecycle
//
// A process moves through three states, in order, once:
//
//  1. running: the child is alive.
//  2. exited: the child was reaped, but its output may still be draining
//     (a grandchild can hold the pipes). From here Write, CloseStdin and
//     Resize fail at once with ErrNotRunning; Signal still reaches what is
//     left of the tree.
//  3. final: the drain ended. Only now do Info.Running become false,
//     ExitCode and ExitedAt appear, Done close, Wait return and ReadSince
//     report EOF — as one step. TimedOut and Signal are set in that step
//     and never change.
//
// The invariants the tests pin:
//
//   - I1 (final output): once Info().Running is false, every later Output
//     returns exactly the final rendering.
//   - I2 (snapshot order): Snapshot reads Info first, then the output, so a
//     snapshot with Running == false always carries final output.
//   - I3 (one owner of the end): exactly one goroutine per process calls
//     cmd.Wait and publishes the exit; everyone else waits on Done.
//   - I4 (no leaks): after Close returns, no goroutine, file descriptor,
//     process tree or cgroup started by the manager remains, with one
//     exception that only the caller can end: a pump blocked in the Write
//     of an OutputTee or StderrTee that the drain cut off (still blocked
//     DrainTimeout after the exit) outlives Close. That goroutine holds no
//     descriptor (the read end is closed when the record becomes final),
//     stores nothing more, and ends as soon as the Write returns.
//   - I5 (bounded memory): a process's memory is bounded by its head and
//     tail sizes plus constant overhead, whatever it writes.
//
// # Process trees
//
// A record's tree is its child and everything the child starts. On Linux
// each child starts inside a cgroup v2 of its own where cgroups can be used
// (see [Options.Containment]), so no member can leave it; elsewhere each
// child leads a new session and process group (a Job Object on Windows).
// Signal, the timeout and Close reach the whole tree, and unless
// [Options.KeepOnHostExit] is set the trees die with the host process even
// when it dies without Close. A [Sandbox] (Linux, macOS) restricts what a
// tree may do: which files it may change, and whether it may use the
// network.
//
// # Where to start
//
// [Manager.Start] runs a command and returns its [*Process]; [Process.Wait]
// and [Process.Snapshot] read its end. [Process.Follow] streams every byte
// of its output, [Process.WaitFor] and [Process.WaitListening] wait until
// it is ready, and [Process.WaitInput] until it waits for input. [Plain]
// turns terminal output into text a model can read. The repository's
// docs/ hold the guide, the sandbox, the measurements, and the
// architecture for contributors.
//
// # What proc does not do
//
// proc has no transport (no HTTP, no RPC), does not restart processes, does
// not parse shell syntax itself (commands go to [Options.Shell] or run as an
// exact argv), and restricts what it runs only when asked ([Sandbox]).
package proc

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/quartz"
	"golang.org/x/xerrors"
)

// Sentinel errors. Every error returned for a refused request or call wraps
// exactly one of these; match them with errors.Is. Errors from the operating
// system refusing to start a program wrap the OS error instead (for example
// exec.ErrNotFound or fs.ErrPermission), and errors from a blocking call
// whose context ended wrap ctx.Err().
var (
	// ErrNotFound: no record with that ID is visible to the caller.
	ErrNotFound = xerrors.New("proc: process not found")
	// ErrNotRunning: the call needs a live process (or process group).
	ErrNotRunning = xerrors.New("proc: process not running")
	// ErrRunning: the call needs a final record.
	ErrRunning = xerrors.New("proc: process still running")
	// ErrClosed: the Manager (or Scope) was closed.
	ErrClosed = xerrors.New("proc: manager closed")
	// ErrDuplicateID: a retained or running record already holds the ID.
	ErrDuplicateID = xerrors.New("proc: duplicate process id")
	// ErrLimit: Options.MaxRunning processes are already running.
	ErrLimit = xerrors.New("proc: too many running processes")
	// ErrInvalid: the request or argument is malformed.
	ErrInvalid = xerrors.New("proc: invalid request")
	// ErrUnsupported: the feature is not available on this platform.
	ErrUnsupported = xerrors.New("proc: unsupported")
)

// ExitTimedOut is the exit code of a record whose StartRequest.Timeout
// ended it (Info.TimedOut is true), as timeout(1) reports it. The child's
// own status is not reported; Info.Signal names the signal that ended it.
const ExitTimedOut = 124

// Info is the status of a process record at one moment. Slice and pointer
// fields may be shared between snapshots and must be treated as read-only.
type Info struct {
	ID         string   `json:"id"`
	Command    string   `json:"command,omitempty"`
	Args       []string `json:"args,omitempty"`
	WorkDir    string   `json:"work_dir"`
	Owner      string   `json:"owner,omitempty"`
	Background bool     `json:"background"`
	PID        int      `json:"pid"`
	// Running is true until the record is final: the child was reaped and
	// its output drained. Once false, Output never changes again (I1).
	Running bool `json:"running"`
	// ExitCode is nil until final; ExitTimedOut (124) on timeout; 128+N when signal N
	// ended the child; -1 only when waiting for the child failed.
	ExitCode *int `json:"exit_code,omitempty"`
	// Signal names the signal that ended the child ("SIGKILL"), if any.
	Signal    string    `json:"signal,omitempty"`
	TimedOut  bool      `json:"timed_out"`
	StartedAt time.Time `json:"started_at"`
	// ExitedAt is zero until final.
	ExitedAt time.Time `json:"exited_at"`
	// OutputBytes counts every byte the child wrote so far, on both
	// streams, whether or not it was retained.
	OutputBytes int64 `json:"output_bytes"`
	// Usage is nil until final.
	Usage *Usage `json:"usage,omitempty"`
	// LogPath is StartRequest.LogPath.
	LogPath string `json:"log_path,omitempty"`
	// LogError is the first write error of the log file, if any; logging
	// stopped there, the process and its Output were unaffected.
	LogError string `json:"log_error,omitempty"`
	// Containment is how the record's process tree is held: "cgroup",
	// "group" (a session and process group) or "job" (Windows). See
	// Options.Containment.
	Containment string `json:"containment"`
	// Limits is what the OS enforces on the tree: the request's limits,
	// each zero field taken from Options.Limits.
	Limits Limits `json:"limits"`
	// Sandbox says what restricts the tree (StartRequest.Sandbox, or
	// Options.Sandbox): "landlock abi 7, seccomp, no connect, no
	// capabilities" (Linux, network off), "landlock abi 7, network, no
	// capabilities" (network on; below Landlock ABI 6 both end ",
	// signals": the tree can signal the host), "seatbelt" (macOS); ""
	// unrestricted.
	Sandbox string `json:"sandbox,omitempty"`
	// TeeError is the first error of StartRequest.OutputTee or StderrTee,
	// prefixed with which tee it was, or why a tee was cut off; that tee
	// received nothing more. The process and its Output were unaffected.
	TeeError string `json:"tee_error,omitempty"`
	// DroppedEnv names the inherited variables StartRequest.DropEnv (or
	// Options.DropEnv) removed from the child's environment, sorted and
	// spelled as the environment spelled them. It never holds their
	// values, nor a name the request's own Env set (that one was
	// replaced, not dropped).
	DroppedEnv []string `json:"dropped_env,omitempty"`
}

// Usage is the resource usage of a final process: User, System and MaxRSS
// of the direct child (MaxRSS in bytes on every OS), and Tree for the
// whole tree where the OS accounts for it.
type Usage struct {
	User   time.Duration `json:"user"`
	System time.Duration `json:"system"`
	MaxRSS int64         `json:"max_rss"`
	// Tree is the whole tree's usage, with cgroup and job containment;
	// nil in group mode, and where the OS could not report it (a record
	// cgroup removed from outside before the record's end).
	Tree *TreeUsage `json:"tree,omitempty"`
}

// Snapshot pairs a status with output read after it: if Info.Running is
// false, Output and Stderr are final (I2).
type Snapshot struct {
	Info   Info   `json:"info"`
	Output Output `json:"output"`
	Stderr Output `json:"stderr"`
}

// TermSize is a terminal size in character cells.
type TermSize struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// maxTermCells bounds a terminal's size, rows × columns: the size is a
// number a request chooses, and whoever keeps the screen of that terminal
// (the screen module) holds memory in proportion to it (section 8).
const maxTermCells = 1_000_000

// checkCells returns an error wrapping ErrInvalid, naming the cap, when s
// has more than maxTermCells cells.
func (s TermSize) checkCells() error {
	if cells := int(s.Rows) * int(s.Cols); cells > maxTermCells {
		return xerrors.Errorf("size %dx%d is %d cells, above the cap of %d: %w", s.Rows, s.Cols, cells, maxTermCells, ErrInvalid)
	}
	return nil
}

// Process is one supervised process record, returned by [Manager.Start]
// (and Get, StartOrGet, Scope.Start); the zero value is not usable.
// All methods are safe for concurrent use. Nobody has to call Wait: one
// goroutine per process collects the child's exit and drains its output
// (I3); [Manager.Close] stops whatever is still running. A Process stays
// readable after its record was dropped from the Manager.
type Process struct {
	m *Manager
	// info holds the static fields (Running true), set before the record
	// is published and never changed afterwards: the started event
	// shares it.
	info *Info
	seq  uint64

	timeout      time.Duration
	drainQuiet   time.Duration
	drainTimeout time.Duration

	asked *asked // for StartOrGet; nil when the request asked none of it

	out    *HeadTailBuffer // combined output, or stdout with SeparateStderr
	errOut *HeadTailBuffer // nil unless SeparateStderr
	in     *stdinPipe      // nil unless Stdin or TTY
	tty    *os.File        // the PTY master, nil unless TTY
	input  *inputID        // the stdin pipe or terminal, as Activity finds it; nil without Stdin or TTY
	log    *logFile        // nil without LogPath
	tees   tees            // the state StartRequest.OutputTee and StderrTee share
	watch  *eventWatch     // nil without StartRequest.Watch and WatchActivity
	// looks is what looks at the tree keep (activity.go); nil when final.
	looks atomic.Pointer[activityLooks]
	// treeP is the one owner of the tree's end (tree.go), read with tree().
	// Once the record is final and the tree was seen empty it is
	// goneTree: a retained record keeps nothing of its tree (a cgroup's
	// open files and paths, 450 bytes).
	treeP atomic.Pointer[tree]

	cmd      *exec.Cmd // owned by the exit goroutine
	pumps    []*pump
	activity chan struct{} // a pump read bytes; capacity 1
	pumpDone chan struct{} // one send per pump; buffered to len(pumps)
	end      endHandoff    // who ends a record with one pipe (lifecycle.go)

	// done is closed once the record is final. (The child's reaping is
	// published by p.in, the only one that waits for it.)
	done chan struct{}

	// fin is what the final status adds to info, made once by finish
	// before done closes and never changed: every Info of the final record
	// (List's and the final and removed events' too) is composed from info
	// and fin (finalInfo). Read it only once done is closed (isFinal),
	// under Manager.mu once the record is in Manager.finals, or from an
	// event appended after it was made.
	fin *finalStatus

	// ended is set when the exit goroutine returns (endedNow): Close and
	// Scope.Close wait for it (Manager.waitEnded). It is not guarded by
	// mu; next to it, it takes what would be padding.
	ended atomic.Bool

	// mu guards the fields below.
	mu    sync.Mutex
	final bool
	// exitSeen is set by the exit goroutine once it reaped the child, and
	// timeoutFired by the timeout if it found the child alive before
	// that: the exit goroutine reads it once to decide "timed out".
	exitSeen     bool
	timeoutFired bool
	// stopped: Close or Scope.Close is stopping the tree; the timeout
	// stands down.
	stopped bool
	// timeoutTimer is stopped when the record is final or stopped.
	timeoutTimer *quartz.Timer
}

// ID returns the record's ID.
func (p *Process) ID() string { return p.info.ID }

// Info returns the record's status. Running stays true until the record is
// final; then ExitCode, ExitedAt and Usage are set and never change.
func (p *Process) Info() Info {
	// Running is derived from Done, so that it turns false exactly when
	// Done closes (section 2). Neither kind of record takes a lock: tight
	// pollers do not queue on p.mu, and List reads thousands of them.
	if p.isFinal() {
		var info Info
		p.finalInfo(&info)
		return info
	}
	return p.runningInfo()
}

// runningInfo is the Info of p while it runs (Running true), also when it
// became final since it was seen running: the output counts are read
// after that status, so they may be larger, never smaller.
func (p *Process) runningInfo() Info {
	info := *p.info
	info.OutputBytes = p.outputBytes()
	info.LogError = p.log.errString()
	info.TeeError = p.tees.errString()
	return info
}

// outputBytes is Info.OutputBytes: the bytes written to both streams.
func (p *Process) outputBytes() int64 {
	n := p.out.Len()
	if p.errOut != nil {
		n += p.errOut.Len()
	}
	return n
}

// finalStatus is what a final record adds to its static Info, in one
// allocation: the Info fields that change when the record becomes final.
// It never changes once made; every final Info (Info, List, the final and
// removed events) is composed from the static Info and it (finalInfo),
// and points into it (ExitCode, Usage), so that reads return equal values.
type finalStatus struct {
	code        int
	exitedAt    time.Time
	outputBytes int64
	signal      string
	logError    string
	teeError    string
	usage       Usage // Usage.Tree is its own allocation, made only with a tree's usage
	timedOut    bool
	hasUsage    bool
}

// setFinal makes p.fin, the final status: the exit status, and the output
// and error counts, which no longer change (the buffers are finished, the
// log closed, the tees stopped). Only finish calls it, before Done closes.
func (p *Process) setFinal(exitedAt time.Time, code int, sigName string, timedOut bool, usage *Usage) {
	f := &finalStatus{
		code:        code,
		exitedAt:    exitedAt,
		outputBytes: p.outputBytes(),
		signal:      sigName,
		logError:    p.log.errString(),
		teeError:    p.tees.errString(),
		timedOut:    timedOut,
	}
	if usage != nil {
		f.usage, f.hasUsage = *usage, true
		if usage.Tree != nil {
			tree := *usage.Tree
			f.usage.Tree = &tree
		}
	}
	p.fin = f
}

// finalInfo writes the final Info of p to dst: the static Info with what
// p.fin adds. p must be final (isFinal), or known final under Manager.mu.
func (p *Process) finalInfo(dst *Info) { p.fin.compose(dst, p.info) }

// compose writes to dst the final Info of the record whose static Info is
// static and whose final status is f.
func (f *finalStatus) compose(dst, static *Info) {
	*dst = *static
	dst.Running = false
	dst.ExitCode = &f.code
	dst.Signal = f.signal
	dst.TimedOut = f.timedOut
	dst.ExitedAt = f.exitedAt
	dst.OutputBytes = f.outputBytes
	if f.hasUsage {
		dst.Usage = &f.usage
	}
	dst.LogError = f.logError
	dst.TeeError = f.teeError
}

// asked holds the fields of a request that StartOrGet compares and Info
// does not carry as requested: the work dir ("" if none was asked for,
// else the resolved one, which Info carries too), and the environment (copied, so that a caller changing its map later changes
// nothing here).
type asked struct {
	workDir  string
	env      map[string]string
	unsetEnv []string
	clearEnv bool
	quiet    bool     // NonInteractive
	dropEnv  []string // as requested: nil (the default) is not empty
	sandbox  *Sandbox
}

// startedWith reports whether req asks for what p was started with, as
// StartOrGet compares: Command, Args, WorkDir (req's as askedWorkDir
// makes it), Owner, Env,
// UnsetEnv, ClearEnv, Background, NonInteractive, DropEnv, Sandbox (as
// requested: nil, the default, equals only nil), Watch and WatchActivity.
// A nil Env, UnsetEnv or Watch equals an empty one.
func (p *Process) startedWith(req StartRequest) bool {
	a := p.asked
	if a == nil {
		a = &askedNone
	}
	return req.Command == p.info.Command && slices.Equal(req.Args, p.info.Args) &&
		req.WorkDir == a.workDir && req.Owner == p.info.Owner &&
		maps.Equal(req.Env, a.env) && slices.Equal(req.UnsetEnv, a.unsetEnv) &&
		req.ClearEnv == a.clearEnv && req.Background == p.info.Background &&
		p.watch.sameAs(req) &&
		req.NonInteractive == a.quiet && sameDropEnv(req.DropEnv, a.dropEnv) &&
		sameSandbox(req.Sandbox, a.sandbox)
}

// sameDropEnv compares DropEnv lists, where nil (the Manager's default)
// differs from empty (drop nothing).
func sameDropEnv(a, b []string) bool {
	return (a == nil) == (b == nil) && slices.Equal(a, b)
}

// askedNone is what a request that asked none of asked's fields asked.
var askedNone asked

// orNil returns a copy of a, or nil when a asks nothing (the common case):
// a retained record then keeps a pointer instead of the whole struct.
func (a asked) orNil() *asked {
	if a.workDir == "" && len(a.env) == 0 && len(a.unsetEnv) == 0 && !a.clearEnv &&
		!a.quiet && a.dropEnv == nil && a.sandbox == nil {
		return nil
	}
	return &a
}

// Output renders the output buffer: the combined stream, or stdout alone
// with SeparateStderr. Once Info().Running is false it never changes (I1).
func (p *Process) Output() Output { return p.out.Output() }

// Stderr renders the stderr buffer of a process started with
// SeparateStderr; otherwise it is empty.
func (p *Process) Stderr() Output {
	if p.errOut == nil {
		return Output{}
	}
	return p.errOut.Output()
}

// Snapshot reads Info first, then the outputs, so that a snapshot with
// Running == false always carries the final output (I2). It is safe to
// call from any goroutine at any time. Tight pollers are paced (see
// HeadTailBuffer.Output): while a child of the Manager writes, a call
// that returns an output unchanged after many such calls in a row, by
// this caller or others, parks for a fraction of a millisecond (about a
// millisecond on an idle host) first, so that pollers leave the CPUs to
// the children they watch (design section 10).
func (p *Process) Snapshot() Snapshot { return p.snapshot(true) }

// snapshot is Snapshot; with paced false its calls never pause
// (Manager.Run's one snapshot).
func (p *Process) snapshot(paced bool) Snapshot {
	info := p.Info()
	out, paused := p.out.outputPaced(paced)
	s := Snapshot{Info: info, Output: out}
	if p.errOut != nil {
		// One pause per snapshot at most.
		s.Stderr, _ = p.errOut.outputPaced(paced && !paused)
	}
	return s
}

// Done returns a channel that is closed once the record is final.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait blocks until the record is final (nil) or ctx ends (an error
// wrapping ctx.Err()). The process's own exit status is in Info, not in the
// error.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return xerrors.Errorf("wait for %q: %w", p.info.ID, ctx.Err())
	}
}

// Signal sends sig to every live member of the child's process tree: its
// cgroup or its session's process group (Unix), or its job (Windows).
// Terminate and Interrupt are followed by SIGCONT, so that a stopped
// member runs its handler. After the child exited it still reaches what
// is left of the tree, such as a background child the command left
// behind, and returns an error wrapping ErrNotRunning only once no member
// is alive (never signalling a process group whose ID may have been
// reused). An unknown sig is ErrInvalid; after Close, ErrClosed.
func (p *Process) Signal(sig Signal) error {
	if !sig.valid() {
		return xerrors.Errorf("signal %q: unknown signal %q: %w", p.info.ID, sig, ErrInvalid)
	}
	if p.m.isClosed() {
		return xerrors.Errorf("signal %q: %w", p.info.ID, ErrClosed)
	}
	if err := p.tree().signal(sig); err != nil {
		return xerrors.Errorf("signal %q: %w", p.info.ID, err)
	}
	return nil
}

// Resize sets the terminal size of a TTY process; the child gets SIGWINCH.
// Without TTY, with a zero dimension or above 1,000,000 cells (rows ×
// columns), it returns an error wrapping ErrInvalid; once the child
// exited, ErrNotRunning.
func (p *Process) Resize(size TermSize) error {
	if p.tty == nil {
		return xerrors.Errorf("resize %q: started without TTY: %w", p.info.ID, ErrInvalid)
	}
	if size.Rows == 0 || size.Cols == 0 {
		return xerrors.Errorf("resize %q: size %dx%d has a zero dimension: %w", p.info.ID, size.Rows, size.Cols, ErrInvalid)
	}
	if err := size.checkCells(); err != nil {
		return xerrors.Errorf("resize %q: %w", p.info.ID, err)
	}
	if err := p.in.check(p); err != nil {
		return err
	}
	if err := resizeTTY(p.tty, size); err != nil {
		if p.in.hasExited() {
			return xerrors.Errorf("resize %q: %w", p.info.ID, ErrNotRunning)
		}
		return xerrors.Errorf("resize %q: %w", p.info.ID, err)
	}
	return nil
}

// ReadSince returns the stored bytes of the Output stream at and after
// cursor, at most max of them (max <= 0: no limit); see [Chunk]. Summed over
// reads from 0 until EOF, len(Data) + Lost equals the stream's length.
func (p *Process) ReadSince(cursor int64, max int) Chunk {
	return p.finalEOF(p.out.ReadSince(cursor, max))
}

// ReadSinceInto is ReadSince that reads into buf instead of allocating: at
// most len(buf) bytes, with Chunk.Data aliasing buf. A reader that passes
// the same buffer each time reads without allocating. An empty buf reads no
// bytes but still skips the lost ones.
//
// A loop that reads a running stream in pieces smaller than the tail
// (StartRequest.TailBytes), behind its end, or that finds nothing new at
// its end, is paced, with ReadSince's max as the piece: such a read may
// park for a fraction of a millisecond
// first, so that the reader leaves the CPUs to the child (design section
// 10); it loses what the child writes meanwhile, counted in Chunk.Lost.
func (p *Process) ReadSinceInto(cursor int64, buf []byte) Chunk {
	return p.finalEOF(p.out.ReadSinceInto(cursor, buf))
}

// finalEOF clears c.EOF until the record is final: the buffer is finished
// a moment before, and EOF must come together with the final status.
func (p *Process) finalEOF(c Chunk) Chunk {
	if c.EOF && !p.isFinal() {
		c.EOF = false
	}
	return c
}

// WaitOutput blocks until the Output stream holds bytes past cursor, the
// record is final (nil), or ctx ends (an error wrapping ctx.Err()). It
// starts no goroutine.
//
// WaitOutput is for pollers: it never holds the child. While it waits,
// and for 100 ms after it returns, the record keeps the newest 1 MiB of
// output beyond head and tail for every cursor read, so a loop that reads
// each wake within a few milliseconds loses nothing at 50 MB/s; at a
// flood it loses output, counted in Chunk.Lost, instead of slowing the
// child. The wake may come up to a millisecond after the output, so that
// a flood wakes the waiters less often. A reader that wants every byte
// uses [Process.Follow]; lossless delivery to a slow consumer is
// OutputTee's.
func (p *Process) WaitOutput(ctx context.Context, cursor int64) error {
	if err := p.waitStream(ctx, p.out, cursor); err != nil {
		return xerrors.Errorf("wait output of %q: %w", p.info.ID, err)
	}
	return nil
}

// ReadStderrSince is [Process.ReadSince] for the stderr stream of a process
// started with SeparateStderr, with the same rules: summed over reads from
// 0 until EOF, len(Data) + Lost equals the bytes the child wrote to stderr.
// Without SeparateStderr stderr is part of the Output stream, and this one
// is empty: End is 0, and EOF is set once the record is final.
func (p *Process) ReadStderrSince(cursor int64, max int) Chunk {
	return p.finalEOF(p.stderrStream().ReadSince(cursor, max))
}

// WaitStderr is [Process.WaitOutput] for the stderr stream: it blocks until
// stderr holds bytes past cursor, the record is final (nil), or ctx ends
// (an error wrapping ctx.Err()). Without SeparateStderr the stream stays
// empty, so it returns once the record is final. It starts no goroutine.
func (p *Process) WaitStderr(ctx context.Context, cursor int64) error {
	if err := p.waitStream(ctx, p.stderrStream(), cursor); err != nil {
		return xerrors.Errorf("wait stderr of %q: %w", p.info.ID, err)
	}
	return nil
}

// noStderr is the stderr stream of a process without SeparateStderr: empty
// and finished, so that reads and waits of it follow the record's status
// alone (finalEOF, waitStream).
var noStderr = func() *HeadTailBuffer {
	b := NewHeadTailBuffer(1, 1, 0)
	b.Finish()
	return b
}()

func (p *Process) stderrStream() *HeadTailBuffer {
	if p.errOut == nil {
		return noStderr
	}
	return p.errOut
}

// waitStream waits as WaitOutput does, on one of p's streams. Its error
// is ctx.Err() alone, for the caller to wrap once.
func (p *Process) waitStream(ctx context.Context, b *HeadTailBuffer, cursor int64) error {
	if b.WaitOutput(ctx, cursor) != nil {
		return ctx.Err() // the buffer's only error, without its prefix
	}
	if b.Len() > cursor || p.isFinal() {
		return nil
	}
	// The buffer is finished; the final status follows at once.
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// tree returns the owner of p's tree's end: goneTree once the record is
// final and the tree was seen empty.
func (p *Process) tree() *tree { return p.treeP.Load() }

// goneTree stands for the tree of a final record that was seen empty: it
// has no member to signal, list or wait for, also for a caller that
// took it a moment before the record forgot its tree.
var goneTree = func() *tree {
	t := &tree{sys: goneSys{}}
	t.gone.Store(true)
	t.final.Store(true)
	return t
}()

// goneSys is goneTree's mechanism: an empty tree, released.
type goneSys struct{}

func (goneSys) signal(Signal) error       { return ErrNotRunning }
func (goneSys) alive() bool               { return false }
func (goneSys) waitEmpty(context.Context) {}
func (goneSys) reaped()                   {}
func (goneSys) usage() *TreeUsage         { return nil }
func (goneSys) members() ([]int, bool)    { return nil, true }
func (goneSys) rewatch(*watchdog)         {}
func (goneSys) release()                  {}

// forgetTree lets go of p's tree once it left the registry (seen empty
// with the record final), so that a retained record keeps nothing of it.
func (p *Process) forgetTree() {
	if t := p.tree(); t != goneTree && t.final.Load() && t.gone.Load() {
		p.treeP.Store(goneTree)
	}
}

func (p *Process) isFinal() bool { return tryRecv(p.done) }

// tryRecv reports whether ch is closed (or holds a value, which it takes),
// without blocking.
func tryRecv(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
