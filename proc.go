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
// A process is running, then exited (reaped, output still draining), then
// final. Only a final process reports Running == false, an exit code and an
// exit time; from then on its output never changes. See the README for the
// invariants (I1–I5) and how the tests pin them.
//
// # What proc does not do
//
// proc has no transport (no HTTP, no RPC), does not restart processes, does
// not parse shell syntax itself (commands go to [Options.Shell] or run as an
// exact argv), and does not sandbox what it runs.
package proc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"cdr.dev/slog/v3"
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

// Signal names a portable signal. On Unix it is delivered to the child's
// whole process group. On Windows, where each child runs in a Job Object,
// Kill terminates the job, and Interrupt and Terminate send CTRL_BREAK to
// the child's console process group (ending the job if the child has no
// console). The zero Signal, like any name but the three below, is invalid
// (ErrInvalid); [ParseSignal] reads one from text.
type Signal string

// The signals proc can deliver.
const (
	Interrupt Signal = "interrupt" // SIGINT; CTRL_BREAK on Windows
	Terminate Signal = "terminate" // SIGTERM; CTRL_BREAK on Windows
	Kill      Signal = "kill"      // SIGKILL; TerminateJobObject on Windows
)

// ParseSignal turns a user-supplied name into a [Signal]. It accepts the
// portable names ("kill", "terminate", "interrupt") and the Unix names with
// or without the SIG prefix ("SIGKILL", "TERM", "int"), in any case.
// Anything else is an error wrapping [ErrInvalid].
func ParseSignal(s string) (Signal, error) {
	name := strings.ToUpper(strings.TrimSpace(s))
	name = strings.TrimPrefix(name, "SIG")
	switch name {
	case "KILL":
		return Kill, nil
	case "TERM", "TERMINATE":
		return Terminate, nil
	case "INT", "INTERRUPT":
		return Interrupt, nil
	}
	return "", xerrors.Errorf("parse signal %q: want kill, terminate or interrupt: %w", s, ErrInvalid)
}

func (s Signal) valid() bool {
	return s == Interrupt || s == Terminate || s == Kill
}

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
	// ExitCode is nil until final; 124 on timeout; 128+N when signal N
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
}

// Usage is the resource usage of a final process (the direct child only).
// MaxRSS is in bytes on every OS.
type Usage struct {
	User   time.Duration `json:"user"`
	System time.Duration `json:"system"`
	MaxRSS int64         `json:"max_rss"`
}

// Output is a rendering of a head/tail buffer: the head, then, when bytes
// were dropped, a marker "\n... [omitted N bytes] ...\n", then the tail.
// Truncation is nil when nothing was cut.
type Output struct {
	Text       string      `json:"text"`
	Truncation *Truncation `json:"truncation,omitempty"`
}

// Truncation says exactly what a rendering left out. Counts are of stored
// bytes: OmittedBytes == OriginalBytes - RetainedBytes, and cutting long
// lines (LinesCut) never changes OmittedBytes.
type Truncation struct {
	OriginalBytes int64  `json:"original_bytes"`
	RetainedBytes int64  `json:"retained_bytes"`
	OmittedBytes  int64  `json:"omitted_bytes"`
	LinesCut      int    `json:"lines_cut"`
	Strategy      string `json:"strategy"`
}

// Snapshot pairs a status with output read after it: if Info.Running is
// false, Output and Stderr are final (I2).
type Snapshot struct {
	Info   Info   `json:"info"`
	Output Output `json:"output"`
	Stderr Output `json:"stderr"`
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

// TermSize is a terminal size in character cells.
type TermSize struct {
	Rows uint16 `json:"rows"`
	Cols uint16 `json:"cols"`
}

// Process is one supervised process record, returned by [Manager.Start]
// (and Get, StartOrGet, Scope.Start); the zero value is not usable.
// All methods are safe for concurrent use. Nobody has to call Wait: one
// goroutine per process collects the child's exit and drains its output
// (I3); [Manager.Close] stops whatever is still running. A Process stays
// readable after its record was dropped from the Manager.
type Process struct {
	m    *Manager
	info Info // the static fields, set before the record is published
	seq  uint64

	timeout      time.Duration
	drainQuiet   time.Duration
	drainTimeout time.Duration

	reqWorkDir string // as requested, for StartOrGet

	out    *HeadTailBuffer // combined output, or stdout with SeparateStderr
	errOut *HeadTailBuffer // nil unless SeparateStderr
	group  *procGroup
	in     *stdinPipe // nil unless Stdin or TTY
	tty    *os.File   // the PTY master, nil unless TTY
	log    *logFile   // nil without LogPath

	cmd      *exec.Cmd // owned by the exit goroutine
	pumps    []*pump
	activity chan struct{} // a pump read bytes; capacity 1
	pumpDone chan struct{} // one send per pump; buffered to len(pumps)

	exited chan struct{} // closed once the child was reaped
	done   chan struct{} // closed once the record is final
	ended  chan struct{} // closed when the exit goroutine returns (Close waits)

	// mu guards the fields below.
	mu       sync.Mutex
	final    bool
	exitCode *int // shared by every Info of the final record
	sigName  string
	timedOut bool
	// timersOff: Close (or the Manager dropping the record) took over the
	// timers' work; a timer set from now on is stopped at once.
	timersOff bool
	exitedAt  time.Time
	usage     *Usage
	finalTime time.Time // when the record became final (retention)
	// timeoutTimer stops when the record is final; killTimer outlives it,
	// so that a timed-out group's leftovers are still killed after
	// KillGrace. Close stops both and does their work itself.
	timeoutTimer *quartz.Timer
	killTimer    *quartz.Timer
}

// ID returns the record's ID.
func (p *Process) ID() string { return p.info.ID }

// Info returns the record's status. Running stays true until the record is
// final; then ExitCode, ExitedAt and Usage are set and never change.
func (p *Process) Info() Info {
	info := p.info
	p.mu.Lock()
	info.Running = !p.final
	info.TimedOut = p.timedOut
	if p.final {
		info.ExitCode = p.exitCode
		info.Signal = p.sigName
		info.ExitedAt = p.exitedAt
		info.Usage = p.usage
	}
	p.mu.Unlock()
	// Read after the status, so that a final status carries the final count.
	info.OutputBytes = p.out.Len()
	if p.errOut != nil {
		info.OutputBytes += p.errOut.Len()
	}
	info.LogError = p.log.errString()
	return info
}

// startedWith reports whether req asks for what p was started with, as
// StartOrGet compares: Command, Args, WorkDir as requested, and Owner.
func (p *Process) startedWith(req StartRequest) bool {
	return req.Command == p.info.Command && slices.Equal(req.Args, p.info.Args) &&
		req.WorkDir == p.reqWorkDir && req.Owner == p.info.Owner
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
// Running == false always carries the final output (I2).
func (p *Process) Snapshot() Snapshot {
	info := p.Info()
	return Snapshot{Info: info, Output: p.Output(), Stderr: p.Stderr()}
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

// Signal sends sig to the child's whole process group (Unix) or job
// (Windows). After the child exited it still reaches what is left of the
// group, such as a background child the command left behind, and returns an
// error wrapping ErrNotRunning only once no member of the group is alive
// (never signalling a group whose ID may have been reused). An unknown
// sig is ErrInvalid.
func (p *Process) Signal(sig Signal) error {
	if !sig.valid() {
		return xerrors.Errorf("signal %q: unknown signal %q: %w", p.info.ID, sig, ErrInvalid)
	}
	if p.hasExited() && !p.group.alive() {
		// Never signal a group with no live member: its ID may be reused.
		return xerrors.Errorf("signal %q: %w", p.info.ID, ErrNotRunning)
	}
	if err := p.group.signal(sig); err != nil {
		return xerrors.Errorf("signal %q: %w", p.info.ID, err)
	}
	return nil
}

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
// On Windows a pipe has no deadlines, so a write blocked on a child that
// never reads ends only when the child exits or Close runs, not with ctx.
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

// Resize sets the terminal size of a TTY process; the child gets SIGWINCH.
// Without TTY, or with a zero dimension, it returns an error wrapping
// ErrInvalid; once the child exited, ErrNotRunning.
func (p *Process) Resize(size TermSize) error {
	if p.tty == nil {
		return xerrors.Errorf("resize %q: started without TTY: %w", p.info.ID, ErrInvalid)
	}
	if size.Rows == 0 || size.Cols == 0 {
		return xerrors.Errorf("resize %q: size %dx%d has a zero dimension: %w", p.info.ID, size.Rows, size.Cols, ErrInvalid)
	}
	if err := p.in.check(p); err != nil {
		return err
	}
	if err := resizeTTY(p.tty, size); err != nil {
		if p.hasExited() {
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
func (p *Process) WaitOutput(ctx context.Context, cursor int64) error {
	if err := p.out.WaitOutput(ctx, cursor); err != nil {
		return xerrors.Errorf("wait output of %q: %w", p.info.ID, err)
	}
	if p.out.Len() > cursor || p.isFinal() {
		return nil
	}
	// The buffer is finished; the final status follows at once.
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return xerrors.Errorf("wait output of %q: %w", p.info.ID, ctx.Err())
	}
}

func (p *Process) hasExited() bool { return tryRecv(p.exited) }

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

func (p *Process) finalAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.finalTime
}

// launch starts the child described by sp. On error nothing is left: no
// descriptor, no goroutine, no process.
func (m *Manager) launch(sp *spec, seq uint64) (_ *Process, err error) {
	cmd := m.opts.CommandContext(context.Background(), sp.name, sp.args...)
	if cmd == nil {
		return nil, xerrors.Errorf("start %q: Options.CommandContext returned nil: %w", sp.name, ErrInvalid)
	}
	if cmd.Err != nil {
		// The program was not found: say so before touching the log file.
		return nil, xerrors.Errorf("start %q: %w", sp.name, cmd.Err)
	}
	cmd.Dir = sp.dir
	cmd.Env = sp.env
	// The log is opened only now, with the ID reserved and the program
	// found, so that a start refused for those reasons never creates (or
	// removes) a file another start is using.
	var log *logFile
	if sp.req.LogPath != "" {
		if log, err = openLog(sp.req.LogPath); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				log.discard()
			}
		}()
	}
	p := &Process{
		m:            m,
		seq:          seq,
		timeout:      sp.req.Timeout,
		drainQuiet:   sp.drainQuiet,
		drainTimeout: sp.drainTimeout,
		reqWorkDir:   sp.req.WorkDir,
		log:          log,
		out:          NewHeadTailBuffer(sp.headBytes, sp.tailBytes, m.opts.MaxLineLength),
		activity:     make(chan struct{}, 1),
		exited:       make(chan struct{}),
		done:         make(chan struct{}),
		ended:        make(chan struct{}),
		info: Info{
			ID:         sp.id,
			Command:    sp.req.Command,
			Args:       append([]string(nil), sp.req.Args...),
			WorkDir:    sp.dir,
			Owner:      sp.req.Owner,
			Background: sp.req.Background,
			Running:    true,
			LogPath:    sp.req.LogPath,
		},
	}

	// parentEnds are ours (closed on failure, else by the exit goroutine);
	// childEnds belong to the child and are closed here once it started.
	var parentEnds, childEnds []*os.File
	defer func() {
		for _, f := range childEnds {
			_ = f.Close()
		}
		if err != nil {
			for _, f := range parentEnds {
				_ = f.Close()
			}
		}
	}()
	pipe := func(parentReads bool) (parent, child *os.File, err error) {
		parent, child, err = newPipe(parentReads)
		if err != nil {
			return nil, nil, xerrors.Errorf("start %q: %w", sp.name, err)
		}
		parentEnds = append(parentEnds, parent)
		childEnds = append(childEnds, child)
		return parent, child, nil
	}

	if sp.req.TTY {
		master, slave, err := openTTY(sp.size)
		if err != nil {
			return nil, xerrors.Errorf("start %q: open terminal: %w", sp.name, err)
		}
		parentEnds = append(parentEnds, master)
		childEnds = append(childEnds, slave)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		p.tty = master
		p.in = newStdinPipe(master, true, sp.req.Stdin)
		p.pumps = append(p.pumps, &pump{r: master, dst: p.out})
	} else {
		r, w, err := pipe(true)
		if err != nil {
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = w, w
		p.pumps = append(p.pumps, &pump{r: r, dst: p.out})
		if sp.req.SeparateStderr {
			er, ew, err := pipe(true)
			if err != nil {
				return nil, err
			}
			cmd.Stderr = ew
			p.errOut = NewHeadTailBuffer(sp.headBytes, sp.tailBytes, m.opts.MaxLineLength)
			p.pumps = append(p.pumps, &pump{r: er, dst: p.errOut})
		}
		if sp.req.Stdin {
			iw, ir, err := pipe(false)
			if err != nil {
				return nil, err
			}
			cmd.Stdin = ir
			p.in = newStdinPipe(iw, false, true)
		}
	}
	setupGroup(cmd, sp.req.TTY)
	if sp.req.Command != "" {
		setCommandLine(cmd, m.opts.Shell, sp.req.Command)
	}

	p.info.StartedAt = m.clock.Now("process", "start")
	if err := cmd.Start(); err != nil {
		return nil, xerrors.Errorf("start %q: %w", sp.name, err)
	}
	group, err := newGroup(cmd)
	if err != nil {
		// The child runs but cannot be supervised: stop it and collect it.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, xerrors.Errorf("start %q: %w", sp.name, err)
	}
	p.cmd = cmd
	p.group = group
	p.info.PID = cmd.Process.Pid
	p.pumpDone = make(chan struct{}, len(p.pumps))
	for _, pu := range p.pumps {
		pu.activity = p.activity
		pu.done = p.pumpDone
		pu.log = p.log
	}
	return p, nil
}

// begin starts the pumps, the exit goroutine and the timeout. It runs once,
// after the record is registered, so that the end is always seen by the
// Manager.
func (p *Process) begin() {
	for _, pu := range p.pumps {
		// Stopped by EOF, or by the drain once the child exited (drain.go).
		go pu.run()
	}
	// Stopped when the child exits and the bounded drain ends.
	p.m.exits.Add(1)
	go p.supervise()
	if p.timeout > 0 {
		t := p.m.clock.AfterFunc(p.timeout, p.onTimeout, "process", "timeout")
		p.setTimer(&p.timeoutTimer, t)
	}
}

// supervise is the exit goroutine: the only caller of cmd.Wait, and the only
// goroutine that publishes the end of the process (I3).
func (p *Process) supervise() {
	defer p.m.exits.Done()
	defer close(p.ended)
	waitExited(p.info.PID)
	waitErr := p.cmd.Wait()
	// Refuse stdin and publish the exit before anything else, even a clock
	// call: a write in between would meet a bare broken pipe.
	if p.in != nil {
		p.in.exit()
	}
	close(p.exited)
	p.group.reaped()
	exitedAt := p.m.clock.Now("process", "exit")
	p.drain()
	p.finish(waitErr, exitedAt)
}

// finish publishes the final state. The buffers are finished before the
// status flips, so that whoever sees Running == false sees final output.
func (p *Process) finish(waitErr error, exitedAt time.Time) {
	for _, pu := range p.pumps {
		_ = pu.r.Close()
	}
	p.out.Finish()
	if p.errOut != nil {
		p.errOut.Finish()
	}
	p.log.close()
	code, sigName, usage := exitStatus(p.cmd.ProcessState, waitErr)
	now := p.m.clock.Now("process", "final")

	p.mu.Lock()
	if p.timedOut {
		code = 124
	}
	p.final = true
	p.exitCode = &code
	p.sigName = sigName
	p.exitedAt = exitedAt
	p.finalTime = now
	p.usage = usage
	// A final record keeps only what it reports.
	p.cmd = nil
	p.pumps = nil
	timeout := p.timeoutTimer
	p.timeoutTimer = nil
	p.mu.Unlock()

	if timeout != nil {
		timeout.Stop("process", "timeout")
	}
	// The Manager counts the record as final before anyone can see Done
	// close: a Start right after Wait finds the slot free.
	after := p.m.recordFinal(p)
	close(p.done)
	after()
}

// setTimer stores t in *slot unless Close already stopped p's timers.
func (p *Process) setTimer(slot **quartz.Timer, t *quartz.Timer) {
	p.mu.Lock()
	off := p.timersOff
	if !off {
		*slot = t
	}
	p.mu.Unlock()
	if off {
		t.Stop()
	}
}

// onTimeout runs on the timeout timer: terminate the group, then kill it
// after KillGrace.
func (p *Process) onTimeout() {
	// A leader that exited by itself, even if not reaped yet, beat the
	// deadline: it did not time out.
	if p.hasExited() || leaderExited(p.info.PID) || !p.m.enter() {
		return
	}
	defer p.m.background.Done()
	// Set before the signal: the exit it causes may be published at once.
	p.mu.Lock()
	p.timedOut = true
	p.mu.Unlock()
	if err := p.Signal(Terminate); err != nil {
		if errors.Is(err, ErrNotRunning) {
			// The exit was published in between, and the group is gone:
			// the timeout ended nothing, unless the record already went
			// final saying otherwise (a final record never changes).
			p.mu.Lock()
			if !p.final {
				p.timedOut = false
			}
			p.mu.Unlock()
			return
		}
		p.m.logger.Debug(context.Background(), "terminate on timeout", slog.F("id", p.info.ID), slog.Error(err))
	}
	t := p.m.clock.AfterFunc(p.m.opts.KillGrace, p.onKillGrace, "process", "kill-grace")
	p.setTimer(&p.killTimer, t)
}

func (p *Process) onKillGrace() {
	if !p.m.enter() {
		return
	}
	defer p.m.background.Done()
	if err := p.Signal(Kill); err != nil {
		p.m.logger.Debug(context.Background(), "kill after grace", slog.F("id", p.info.ID), slog.Error(err))
	}
}

// takeKillTimer hands a pending kill-grace timer over to the caller (the
// Manager, when it drops the record).
func (p *Process) takeKillTimer() *quartz.Timer {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.killTimer
	p.killTimer = nil
	p.timersOff = true
	return t
}

// stopping marks p as being stopped by Close: its timers stop (Close does
// their work) and blocked writers return ErrClosed.
func (p *Process) stopping() {
	p.mu.Lock()
	p.timersOff = true
	timers := []*quartz.Timer{p.timeoutTimer, p.killTimer}
	p.timeoutTimer, p.killTimer = nil, nil
	p.mu.Unlock()
	for _, t := range timers {
		if t != nil {
			t.Stop()
		}
	}
	if p.in != nil {
		p.in.closeByManager()
	}
}

// stdinPipe is the parent's end of the child's stdin: a pipe, or the PTY
// master with TTY.
type stdinPipe struct {
	w   *os.File
	tty bool
	// writable is StartRequest.Stdin. A terminal started without it keeps
	// its stdinPipe for Resize, but takes no Write or CloseStdin.
	writable bool

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
	return &stdinPipe{w: w, tty: tty, writable: writable, turn: make(chan struct{}, 1)}
}

func (s *stdinPipe) write(ctx context.Context, b []byte, p *Process) (int, error) {
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return 0, xerrors.Errorf("write to %q: waiting for an earlier write: %w", p.info.ID, ctx.Err())
	}
	defer func() { <-s.turn }()

	s.mu.Lock()
	if err := s.errLocked("write to", p.info.ID); err != nil {
		s.mu.Unlock()
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		s.mu.Unlock()
		return 0, xerrors.Errorf("write to %q: %w", p.info.ID, err)
	}
	s.gen++
	gen := s.gen
	// Clear what an earlier cancelled write left; exit and Close set the
	// deadline again under mu, so they cannot be missed.
	_ = s.w.SetWriteDeadline(time.Time{})
	s.mu.Unlock()

	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		if s.gen == gen {
			_ = s.w.SetWriteDeadline(pastDeadline)
		}
		s.mu.Unlock()
	})
	n, err := s.w.Write(b)
	stop()
	if err == nil {
		return n, nil
	}

	s.mu.Lock()
	stateErr := s.errLocked("write to", p.info.ID)
	s.mu.Unlock()
	switch {
	case stateErr != nil:
		return n, stateErr
	case ctx.Err() != nil:
		// A deadline error that raced the context is the context's.
		return n, xerrors.Errorf("write to %q: %w", p.info.ID, ctx.Err())
	case errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.EIO):
		if p.hasExited() || leaderExited(p.info.PID) {
			// The child is gone; its exit goroutine is about to say so.
			<-p.exited
			return n, xerrors.Errorf("write to %q: %w", p.info.ID, ErrNotRunning)
		}
	}
	return n, xerrors.Errorf("write to %q: %w", p.info.ID, err)
}

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
// blocked on a pipe that a grandchild may hold open without reading.
func (s *stdinPipe) exit() { s.shut(stdinExited) }

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

// waitForLineMax bounds the part of one line that WaitFor matches.
const waitForLineMax = 64 << 10

// WaitFor blocks until a line of the Output stream matches re and returns
// that line, without its newline and a trailing '\r'. It matches lines
// written after the call — including a line begun before the call and
// finished after it — or, with fromStart, every retained line from the
// start. A line whose beginning was not retained is skipped (matching
// resumes after the next newline, never on a fragment); only the first
// 64 KiB of a very long line is matched; an unterminated last line counts
// once the process is final. If the process becomes final without a match
// it returns an error wrapping ErrNotRunning; when ctx ends, one wrapping
// ctx.Err(). It starts no goroutine.
func (p *Process) WaitFor(ctx context.Context, re *regexp.Regexp, fromStart bool) (string, error) {
	if re == nil {
		return "", xerrors.Errorf("wait for in %q: nil regexp: %w", p.info.ID, ErrInvalid)
	}
	var (
		cursor int64
		line   []byte
		// skipping: the current line's beginning is not retained.
		skipping bool
	)
	if !fromStart {
		cursor, line, skipping = p.currentLine()
	}
	matches := func(l []byte) bool {
		return re.Match(bytes.TrimSuffix(l, []byte{'\r'}))
	}
	found := func(l []byte) string {
		return string(bytes.TrimSuffix(l, []byte{'\r'}))
	}
	for {
		c, lineStart := p.out.readSinceLine(cursor, 0)
		c = p.finalEOF(c)
		if c.Lost > 0 {
			// The end of the current line was dropped; so was the beginning
			// of the next, unless the bytes after the gap begin a line.
			line, skipping = line[:0], !lineStart
		}
		data := c.Data
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				if !skipping {
					line = appendCapped(line, data)
				}
				break
			}
			if !skipping {
				line = appendCapped(line, data[:i])
				if matches(line) {
					return found(line), nil
				}
			}
			line, skipping = line[:0], false
			data = data[i+1:]
		}
		cursor = c.Next
		if c.EOF {
			if len(line) > 0 && !skipping && matches(line) {
				return found(line), nil
			}
			return "", xerrors.Errorf("wait for %q in %q: no match before the process ended: %w", re, p.info.ID, ErrNotRunning)
		}
		if err := p.WaitOutput(ctx, cursor); err != nil {
			return "", xerrors.Errorf("wait for %q: %w", re, err)
		}
	}
}

// currentLine finds where the line being written now began: the cursor to
// read on from, the part of the line already retained, and whether its
// beginning is lost. It looks back at most waitForLineMax bytes, and takes
// no byte written after it was called: those are WaitFor's to match.
func (p *Process) currentLine() (cursor int64, line []byte, skipping bool) {
	end := p.out.Len()
	cursor = max(end-waitForLineMax, 0)
	for first := true; cursor < end; first = false {
		c, lineStart := p.out.readSinceLine(cursor, int(end-cursor))
		start := c.Next - int64(len(c.Data)) // the offset of Data[0]
		if first || c.Lost > 0 {
			line, skipping = line[:0], !lineStart
		}
		if start >= end {
			return start, line, skipping // a gap reached past the call
		}
		data := c.Data[:min(int64(len(c.Data)), end-start)]
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			line, skipping = append(line[:0], data[i+1:]...), false
		} else if !skipping {
			line = append(line, data...)
		}
		if len(data) == 0 {
			break
		}
		cursor = start + int64(len(data))
	}
	return cursor, line, skipping
}

func appendCapped(line, b []byte) []byte {
	if room := waitForLineMax - len(line); len(b) > room {
		b = b[:max(room, 0)]
	}
	return append(line, b...)
}
