package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cdr.dev/slog/v3"
	"github.com/coder/quartz"
	"github.com/google/uuid"
	"golang.org/x/xerrors"
)

// Defaults applied by [NewManager] to zero fields of [Options].
const (
	DefaultHeadBytes     = 16 << 10
	DefaultTailBytes     = 16 << 10
	DefaultMaxLineLength = 2048
	DefaultDrainQuiet    = 50 * time.Millisecond
	DefaultDrainTimeout  = 2 * time.Second
	DefaultKillGrace     = 3 * time.Second
	DefaultRetainExited  = 5 * time.Minute
	DefaultMaxRetained   = 1000
	// DefaultMaxBufferBytes is Options.MaxBufferBytes when it is zero.
	DefaultMaxBufferBytes = 256 << 20
)

// Options configure a [Manager]. The zero value is usable: every zero field
// takes the default named in its comment.
type Options struct {
	// Logger receives the manager's diagnostics. The zero value discards.
	Logger slog.Logger
	// Clock drives every timestamp, timeout, drain window and retention
	// timer. nil: quartz.NewReal(). Tests pass quartz.NewMock.
	Clock quartz.Clock
	// Shell runs StartRequest.Command as Shell + [Command].
	// nil: {"sh", "-c"}; on Windows {"cmd.exe", "/C"}.
	Shell []string
	// WorkingDir is the work dir of requests that name none, when it returns
	// an existing directory; otherwise $HOME is used.
	WorkingDir func() string
	// UpdateEnv may rewrite the base environment (os.Environ()) of every
	// child. If it fails, the manager logs a warning and keeps the current
	// environment.
	UpdateEnv func(current []string) ([]string, error)
	// CommandContext builds the *exec.Cmd, for callers that wrap commands
	// (sandboxes, nice, ...). nil: exec.CommandContext. The manager then
	// sets the command's Dir, Env, standard streams and the process-group
	// fields of SysProcAttr; anything else the hook set is kept. It may be
	// called more than once for one start: a start whose cgroup was
	// removed from outside is made again, command included, into another
	// (three tries at most). Every command but the last is dropped
	// unstarted, so the hook must not hold a resource per call.
	CommandContext func(ctx context.Context, name string, args ...string) *exec.Cmd
	// OwnerEnv, if set, names an environment variable that carries the
	// request's Owner to the child.
	OwnerEnv string
	// DropEnv is the default of StartRequest.DropEnv: path.Match patterns
	// of inherited variable names removed from every child's environment
	// (a request with a DropEnv of its own, even empty, replaces it). A
	// malformed pattern is ErrInvalid at Start.
	DropEnv []string
	// HeadBytes and TailBytes size each output buffer. 0: 16 KiB each.
	HeadBytes int
	TailBytes int
	// MaxLineLength cuts longer lines in renderings. 0: 2048 bytes.
	MaxLineLength int
	// MaxBufferBytes bounds what one request may ask to be kept: a
	// StartRequest whose HeadBytes + TailBytes, or whose MaxLineLength,
	// is above it is ErrInvalid at Start (a request may come straight
	// from a client). The fields above are the host's and are not
	// checked. 0: 256 MiB.
	MaxBufferBytes int
	// DrainQuiet ends the post-exit drain after this long without output.
	// 0: 50ms.
	DrainQuiet time.Duration
	// DrainTimeout caps the whole post-exit drain. 0: 2s.
	DrainTimeout time.Duration
	// KillGrace is the wait between terminate and kill, for timeouts and
	// Close. 0: 3s.
	KillGrace time.Duration
	// RetainExited is how long a final record is kept. 0: 5m.
	RetainExited time.Duration
	// MaxRetained caps the number of final records kept; the earliest to
	// become final are dropped first. 0: 1000.
	MaxRetained int
	// MaxRunning caps the records that are not final; past it Start returns
	// an error wrapping ErrLimit. 0: no limit.
	MaxRunning int
	// Containment says how each record's process tree is held (design
	// section 6): ContainAuto ("") uses a cgroup v2 per record on Linux
	// where that works and otherwise falls back to ContainGroup, logging
	// why once; ContainCgroup requires cgroups (Start fails with
	// ErrUnsupported, saying why, without them); ContainGroup uses a new
	// session and process group per child (a Job Object on Windows). Any
	// other value is ErrInvalid at Start.
	Containment Containment
	// CgroupParent is a cgroup v2 directory this process may create
	// cgroups in; "": the host process's own cgroup. The Manager makes one
	// cgroup of its own below it (removed by Close) and one per record
	// below that. A CgroupParent that is not a cgroup v2 directory is
	// ErrInvalid at Start. Ignored with ContainGroup.
	CgroupParent string
	// Limits are the defaults of every request's Limits: a zero field of
	// StartRequest.Limits takes the value here. A non-zero limit needs
	// cgroups with the controller enabled (Linux) or a job (Windows);
	// without, Start fails with ErrUnsupported.
	Limits Limits
	// EventHistory is how many events Manager.Events keeps (design
	// section 19); older ones are dropped and counted as lost. 0: 4096.
	EventHistory int
	// KeepOnHostExit lets the process trees outlive a host process that
	// dies without Close (SIGKILL, a crash, the OOM killer). By default
	// they are killed within about 100 ms of the host's death (design
	// section 14; the README says what each OS can do).
	KeepOnHostExit bool
	// Sandbox is the default of every request's Sandbox: a request that
	// sets none is restricted by this one. nil: unrestricted.
	Sandbox *Sandbox
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = quartz.NewReal()
	}
	if len(o.Shell) == 0 {
		o.Shell = defaultShell
	}
	if o.CommandContext == nil {
		o.CommandContext = exec.CommandContext
	}
	o.HeadBytes = positiveOr(o.HeadBytes, DefaultHeadBytes)
	o.TailBytes = positiveOr(o.TailBytes, DefaultTailBytes)
	o.MaxLineLength = positiveOr(o.MaxLineLength, DefaultMaxLineLength)
	o.MaxBufferBytes = positiveOr(o.MaxBufferBytes, DefaultMaxBufferBytes)
	o.DrainQuiet = positiveOr(o.DrainQuiet, DefaultDrainQuiet)
	o.DrainTimeout = positiveOr(o.DrainTimeout, DefaultDrainTimeout)
	o.KillGrace = positiveOr(o.KillGrace, DefaultKillGrace)
	o.RetainExited = positiveOr(o.RetainExited, DefaultRetainExited)
	o.MaxRetained = positiveOr(o.MaxRetained, DefaultMaxRetained)
	o.EventHistory = positiveOr(o.EventHistory, DefaultEventHistory)
	return o
}

// positiveOr is the one "zero means default" rule: v if it is positive,
// else def. Negative values were refused before they get here, or (in
// Options) mean the default too.
func positiveOr[T int | int64 | float64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// StartRequest describes one process to start. Exactly one of Command and
// Args must be set.
//
// A request decodes from JSON with the snake_case names of its tags
// ({"args":["make","test"],"work_dir":"/src","separate_stderr":true}); a
// field left out keeps its zero value, which means the default. Durations
// (Timeout, DrainQuiet, DrainTimeout) are integers of nanoseconds, as
// encoding/json encodes a time.Duration: {"timeout":30000000000} is 30s.
// A transport that decodes requests from clients it does not trust chooses
// the fields it accepts: LogPath names a file the host writes, and Owner is
// better set by a [Scope].
type StartRequest struct {
	// ID is the caller's name for the record; "" gets a new UUID. An ID
	// held by a running or retained record is refused with ErrDuplicateID.
	ID string `json:"id,omitempty"`
	// Command runs through Options.Shell.
	Command string `json:"command,omitempty"`
	// Args is an exact argv; Args[0] is looked up in $PATH.
	Args []string `json:"args,omitempty"`
	// WorkDir must be an existing directory; "" falls back to
	// Options.WorkingDir, then $HOME.
	WorkDir string `json:"work_dir,omitempty"`
	// Env overrides variables of the base environment.
	Env map[string]string `json:"env,omitempty"`
	// UnsetEnv removes variables from the environment.
	UnsetEnv []string `json:"unset_env,omitempty"`
	// ClearEnv starts the child from an empty environment instead of
	// os.Environ() and Options.UpdateEnv (which is not called): the child
	// sees only Env, and Options.OwnerEnv if set. UnsetEnv still applies.
	// For callers that must control exactly what a child sees.
	ClearEnv bool `json:"clear_env,omitempty"`
	// NonInteractive sets, unless Env sets them, TERM=dumb (not with
	// TTY), NO_COLOR=1, PAGER=cat, GIT_PAGER=cat, GH_PAGER=cat,
	// GIT_TERMINAL_PROMPT=0, DEBIAN_FRONTEND=noninteractive and CI=1, so
	// that a command neither pages, nor prompts for git credentials, nor
	// paints colours. UnsetEnv still removes them.
	NonInteractive bool `json:"non_interactive,omitempty"`
	// DropEnv holds path.Match patterns ("*_TOKEN", "*SECRET*", "AWS_*")
	// of variable names removed from the inherited environment
	// (os.Environ() and Options.UpdateEnv); Env, Options.OwnerEnv and what
	// NonInteractive sets are never dropped. The names removed, never the
	// values, are in Info.DroppedEnv. nil: Options.DropEnv; an empty list
	// drops nothing (and encodes as [], where nil is left out). A
	// malformed pattern is ErrInvalid.
	DropEnv []string `json:"drop_env,omitzero"`
	// Owner tags the record for a [Scope].
	Owner string `json:"owner,omitempty"`
	// Background is recorded for callers and changes nothing here.
	Background bool `json:"background,omitempty"`
	// Timeout, if positive, terminates the process group after this long,
	// kills it after Options.KillGrace, and reports exit code [ExitTimedOut].
	Timeout time.Duration `json:"timeout,omitempty"`
	// Stdin keeps the child's stdin open for Process.Write and
	// Process.CloseStdin. Without it the child reads from the null device
	// (with TTY, from the terminal, where nobody types).
	Stdin bool `json:"stdin,omitempty"`
	// TTY runs the child under a pseudo-terminal (Unix only): stdin, stdout
	// and stderr are the terminal, so output is one stream. Typing into it
	// (Process.Write, CloseStdin) needs Stdin as well; Resize does not.
	TTY bool `json:"tty,omitempty"`
	// Size is the initial terminal size; zero: 24 rows × 80 columns.
	Size TermSize `json:"size,omitzero"`
	// SeparateStderr keeps stderr in its own buffer (Process.Stderr,
	// Process.ReadStderrSince).
	SeparateStderr bool `json:"separate_stderr,omitempty"`
	// HeadBytes, TailBytes, DrainQuiet and DrainTimeout override the
	// manager's options for this process when positive. HeadBytes +
	// TailBytes above Options.MaxBufferBytes is ErrInvalid.
	HeadBytes    int           `json:"head_bytes,omitempty"`
	TailBytes    int           `json:"tail_bytes,omitempty"`
	DrainQuiet   time.Duration `json:"drain_quiet,omitempty"`
	DrainTimeout time.Duration `json:"drain_timeout,omitempty"`
	// MaxLineLength cuts longer lines in the renderings of this process's
	// buffers (Output and Stderr). 0: Options.MaxLineLength; negative, or
	// above Options.MaxBufferBytes, is ErrInvalid.
	MaxLineLength int `json:"max_line_length,omitempty"`
	// Limits bound the process tree; a zero field takes Options.Limits'
	// value. See [Limits].
	Limits Limits `json:"limits,omitzero"`
	// Sandbox restricts the tree: the files it may change, the network.
	// nil takes Options.Sandbox. See [Sandbox].
	Sandbox *Sandbox `json:"sandbox,omitempty"`
	// LogPath, if set, also appends the full output, unbounded, to this
	// file: both streams in arrival order, written before the in-memory
	// buffer. An existing file is appended to with its mode unchanged; a new
	// one is created with mode 0600. A path that cannot be opened for
	// appending as a regular file (or /dev/null, /dev/full) is ErrInvalid;
	// running out of descriptors, memory or disk space while opening it
	// wraps the OS error instead. The first write error stops
	// logging and is reported in Info.LogError; the process and its Output
	// are unaffected. The file is complete and closed before Done closes.
	LogPath string `json:"log_path,omitempty"`
	// OutputTee, if set, receives every byte of the Output stream (the
	// combined output, or stdout with SeparateStderr), in order, from the
	// pump, before the buffer stores it, in pieces of up to 64 KiB. Its
	// Write may block: that holds the pump and, once the pipe is full, the
	// child, as a pipe would (flow control). Writes to the tees of one
	// process never overlap, even when one writer is both tees. The first
	// error (or short write) stops that tee and is recorded in
	// Info.TeeError; the process and its buffers are unaffected. A Write
	// still blocked DrainTimeout after the child's exit is cut off (and
	// TeeError says so) so that the record can become final; the pump
	// goroutine it holds ends when that Write returns.
	OutputTee io.Writer `json:"-"`
	// StderrTee is OutputTee for the stderr stream, with SeparateStderr;
	// without it, it receives nothing.
	StderrTee io.Writer `json:"-"`
	// Watch lists named patterns the lines of the Output stream are
	// matched against; each match is an EventMatched event (see [Watch]).
	// An empty or repeated name, a bad pattern, a pattern longer than
	// MaxWatchPattern bytes, or more than MaxWatches watches is
	// ErrInvalid.
	Watch []Watch `json:"watch,omitempty"`
	// WatchActivity appends EventWaitingForInput each time the tree begins
	// to wait for input and EventListening for each new listener, noticed
	// within 250 ms (it polls Activity on Options.Clock). Linux only:
	// elsewhere the start fails with ErrUnsupported.
	WatchActivity bool `json:"watch_activity,omitempty"`
}

// Manager starts and supervises processes and keeps their records. Create
// it with [NewManager]; the zero value is not usable. All methods are safe
// for concurrent use. The caller must call [Manager.Close] when done: it
// stops every process the manager started and waits for them (I4).
type Manager struct {
	// Set by NewManager and never changed.
	opts   Options
	clock  quartz.Clock
	logger slog.Logger
	// stopCtx ends when Close begins: a timeout's stop or a Scope.Close
	// in progress gives way to Close, which stops every tree itself.
	stopCtx    context.Context
	cancelStop context.CancelFunc
	// closeDone is closed when the first Close returns; later calls wait.
	closeDone chan struct{}

	// trees owns the end of every process tree (tree.go): the registry,
	// the stop policy and the containment decision. It has its own mutex,
	// never taken under mu.
	trees *treeKeeper
	// sandbox is the first-use sandbox probe (sandbox.go); its own mutex,
	// a leaf.
	sandbox sandboxCache
	// events is the event log (events.go, design section 19); its own
	// mutex, a leaf, taken under mu when a dropped record's removed event
	// is appended.
	events eventLog
	// polls is what the output buffers of this Manager's records share so
	// that a tight poller of one record makes the pumps of the others try
	// their pipes between its turns (pollSignal, pump.read).
	polls pollSignal
	// pipes counts the pipes this Manager's pumps grew (pipeBudget).
	pipes pipeBudget

	// background counts timer callbacks and tree watchers in flight;
	// Close ends them (stopCtx) and waits for them. Add only under mu
	// while !closed (enter).
	background sync.WaitGroup
	// exits counts exit goroutines (and the activity pollers, which end
	// with them): Close's one wait for every record to be final, those it
	// found and those dropped before it looked. A record's is added before
	// the record is registered (launchRegistered), so that no Add comes
	// after Close found the record; an activity poller's while the
	// record's is counted.
	exits sync.WaitGroup
	// ends wakes Scope.Close waiting for its records' exit goroutines to
	// return (waitEnded):
	// closed and cleared each time one returns, made by a waiter when
	// there is none. endsMu guards it; a leaf.
	endsMu sync.Mutex
	ends   chan struct{}

	// mu guards the fields below. Lock order: Manager.mu before
	// Process.mu; never held while calling the clock, logging or
	// signalling.
	mu      sync.Mutex
	closed  bool
	seq     uint64
	records map[string]*Process
	// order holds the records of m.records sorted oldest first, by start
	// time, then by seq (startedBefore): List reads it backwards.
	order []*Process
	// starting holds the IDs of starts between validation and registration,
	// so that a concurrent start of the same ID and Close both see them.
	starting map[string]chan struct{}
	// notFinal counts records (and starts in progress) that are not final.
	notFinal int
	// finals lists final records in the order they became final.
	finals    []retained
	reapArmed bool
	reapTimer *quartz.Timer
}

// NewManager returns a Manager configured by opts (see [Options] for the
// defaults).
func NewManager(opts Options) *Manager {
	opts = opts.withDefaults()
	stopCtx, cancelStop := context.WithCancel(context.Background())
	logger := opts.Logger.Named("proc")
	return &Manager{
		opts:       opts,
		clock:      opts.Clock,
		logger:     logger,
		records:    make(map[string]*Process),
		starting:   make(map[string]chan struct{}),
		trees:      newTreeKeeper(opts, logger),
		closeDone:  make(chan struct{}),
		stopCtx:    stopCtx,
		cancelStop: cancelStop,
		events:     eventLog{max: opts.EventHistory},
	}
}

// Start validates req, starts the process and returns its record. A bad
// request is refused with an error wrapping ErrInvalid (or ErrDuplicateID,
// ErrLimit, ErrClosed, ErrUnsupported) before anything starts; when the
// operating system refuses to start the program the error wraps the OS error
// and none of the package's sentinels. Either way nothing is left behind.
func (m *Manager) Start(req StartRequest) (*Process, error) {
	return m.start(req, nil)
}

// Run starts req and waits until it is final or ctx ends. If ctx ends
// first, the process keeps running (re-attach later by snap.Info.ID) and Run
// returns its running snapshot with an error wrapping both ErrRunning and
// ctx.Err(); a ctx that is already over still starts the process. Start
// errors are returned as Start returns them, with an empty Snapshot.
func (m *Manager) Run(ctx context.Context, req StartRequest) (Snapshot, error) {
	return m.run(ctx, req, nil)
}

// StartOrGet makes retried starts idempotent. If req.ID names a running or
// retained record started with the same Command, Args, WorkDir (as
// requested), Owner, Env, UnsetEnv, ClearEnv, Background, NonInteractive,
// DropEnv (nil and empty differ), Sandbox, Watch and WatchActivity, it
// returns that record with started == false; other parameters are
// ErrDuplicateID. Calls with one ID start at most one
// process however many race: a call that finds a start in progress waits
// for it. Without an ID it is Start.
func (m *Manager) StartOrGet(req StartRequest) (p *Process, started bool, err error) {
	return m.startOrGet(req, nil)
}

// Get returns the record with the given ID, running or retained, also
// after Close: an error wrapping ErrNotFound if there is none.
func (m *Manager) Get(id string) (*Process, error) {
	return m.get(id, nil)
}

// List returns the status of every retained record: running ones first,
// then newest first by start time. After Close it lists the records still
// retained, all final.
func (m *Manager) List() []Info {
	return m.list(nil)
}

// Signal sends sig to the process tree of the record id. See
// [Process.Signal].
func (m *Manager) Signal(id string, sig Signal) error {
	p, err := m.get(id, nil)
	if err != nil {
		return err
	}
	return p.Signal(sig)
}

// Remove forgets a final record at once, also after Close. It returns an
// error wrapping ErrRunning if the record is not final, ErrNotFound if
// there is none. Its process tree stays with the Manager until it is empty.
func (m *Manager) Remove(id string) error {
	now := m.clock.Now("manager", "remove")
	m.mu.Lock()
	p, ok := m.records[id]
	if !ok {
		m.mu.Unlock()
		return xerrors.Errorf("remove %q: %w", id, ErrNotFound)
	}
	if !p.isFinal() {
		m.mu.Unlock()
		return xerrors.Errorf("remove %q: %w", id, ErrRunning)
	}
	m.dropLocked(p, now)
	m.mu.Unlock()
	return nil
}

// Scope returns the view of one owner: it starts processes tagged with owner
// and sees only them. Scopes are cheap; each call returns a new one.
func (m *Manager) Scope(owner string) *Scope {
	return &Scope{m: m, owner: owner}
}

// Close refuses new starts with ErrClosed, terminates every process tree
// the manager started (including trees whose records were already
// dropped), kills what is left after Options.KillGrace, and returns once
// every record is final and every tree it killed is empty. It takes at
// most about KillGrace + DrainTimeout (the largest per-request
// DrainTimeout, if larger) plus a little. Close is idempotent: a later or
// concurrent call waits until the first has finished and returns nil.
// Afterwards Get, List, Remove and every read of a Process keep answering
// for the records still retained; calls that start or control a process
// return ErrClosed.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		<-m.closeDone
		return nil
	}
	m.closed = true
	pending := m.pendingStartsLocked()
	timer := m.reapTimer
	m.reapTimer = nil
	m.mu.Unlock()
	defer close(m.closeDone)
	// A timeout's stop, a tree watcher or a Scope.Close in progress gives
	// way: Close stops every tree itself.
	m.cancelStop()
	if timer != nil {
		timer.Stop("manager", "reap")
	}
	// Timer callbacks that started before Close finish first; later ones
	// see the manager closed and do nothing.
	m.background.Wait()

	// A start that passed validation before Close finishes registering
	// first, so that Close stops it too: nothing escapes.
	for _, ch := range pending {
		<-ch
	}
	m.mu.Lock()
	procs := make([]*Process, 0, len(m.records))
	for _, p := range m.records {
		procs = append(procs, p)
	}
	m.mu.Unlock()
	for _, p := range procs {
		p.stopping()
	}
	m.trees.stopAll(context.Background(), "manager", "kill-grace")
	// Every record is final once its exit goroutine returned: those of
	// every record Close found, counted since they were registered, and of
	// records dropped before it looked. Their trees' usage is read by
	// then, before the registry lets go of the trees.
	m.exits.Wait()

	// Every tree is empty now, or holds a member the kernel would not tear
	// down: the registry lets go of them all.
	m.trees.releaseAll()
	m.trees.close()
	m.events.close()
	return nil
}

// waitEnded waits until every exit goroutine of procs has returned, which
// is after the record became final and the Manager recorded it: the wait
// of Scope.Close, which waits for its owner's records only (Close waits
// for every exit goroutine through m.exits). One
// channel of the Manager's wakes it (m.ends), not one per record: a
// retained record keeps none.
func (m *Manager) waitEnded(procs []*Process) {
	for _, p := range procs {
		for {
			m.endsMu.Lock()
			if p.ended.Load() {
				m.endsMu.Unlock()
				break
			}
			if m.ends == nil {
				m.ends = make(chan struct{})
			}
			ch := m.ends
			m.endsMu.Unlock()
			<-ch
		}
	}
}

// endedNow marks the exit goroutine of p as returning (its last step)
// and wakes waitEnded.
func (p *Process) endedNow() {
	p.ended.Store(true)
	m := p.m
	m.endsMu.Lock()
	if m.ends != nil {
		close(m.ends)
		m.ends = nil
	}
	m.endsMu.Unlock()
}

// Scope is one owner's view of a [Manager]: it starts processes tagged with
// the owner and sees only them. Another owner's process is reported as
// ErrNotFound, never as forbidden. A Scope is safe for concurrent use. Get
// one from [Manager.Scope]; the zero value is not usable.
type Scope struct {
	m     *Manager
	owner string
	// closed is guarded by m.mu.
	closed bool
	// eventsClosed is set when Close returns: WaitEvent's ErrClosed.
	eventsClosed atomic.Bool
}

// Start starts req as this scope's owner. req.Owner must be empty or equal
// to the owner.
func (s *Scope) Start(req StartRequest) (*Process, error) {
	if err := s.own(&req); err != nil {
		return nil, err
	}
	return s.m.start(req, s)
}

// Run is [Manager.Run] as this scope's owner.
func (s *Scope) Run(ctx context.Context, req StartRequest) (Snapshot, error) {
	if err := s.own(&req); err != nil {
		return Snapshot{}, err
	}
	return s.m.run(ctx, req, s)
}

// StartOrGet is [Manager.StartOrGet] as this scope's owner. An ID held by
// another owner is ErrDuplicateID, never that owner's process.
func (s *Scope) StartOrGet(req StartRequest) (p *Process, started bool, err error) {
	if err := s.own(&req); err != nil {
		return nil, false, err
	}
	return s.m.startOrGet(req, s)
}

// own tags req with the scope's owner.
func (s *Scope) own(req *StartRequest) error {
	if req.Owner != "" && req.Owner != s.owner {
		return xerrors.Errorf("start: owner %q does not match scope %q: %w", req.Owner, s.owner, ErrInvalid)
	}
	req.Owner = s.owner
	return nil
}

// Get returns the owner's record id; any other owner's is ErrNotFound.
func (s *Scope) Get(id string) (*Process, error) {
	return s.m.get(id, s)
}

// List returns the owner's records, ordered as [Manager.List].
func (s *Scope) List() []Info {
	return s.m.list(s)
}

// Signal signals the owner's record id; see [Process.Signal].
func (s *Scope) Signal(id string, sig Signal) error {
	p, err := s.m.get(id, s)
	if err != nil {
		return err
	}
	return p.Signal(sig)
}

// Close refuses further starts through this Scope value, then stops every
// process tree of the owner (started through any Scope, including trees
// of dropped records) as [Manager.Close] does, and waits until the
// owner's records are final. Their records stay retained. Close is
// idempotent.
func (s *Scope) Close() error {
	m := s.m
	m.mu.Lock()
	s.closed = true
	pending := m.pendingStartsLocked()
	m.mu.Unlock()
	for _, ch := range pending {
		<-ch
	}
	m.mu.Lock()
	var procs []*Process
	for _, p := range m.records {
		if p.info.Owner == s.owner {
			procs = append(procs, p)
		}
	}
	m.mu.Unlock()
	for _, p := range procs {
		p.stopping()
	}
	trees := m.trees.registered(&s.owner)
	// If Close begins meanwhile, it takes over and finishes the records.
	m.trees.stop(m.stopCtx, trees, "manager", "kill-grace")
	m.waitEnded(procs)
	m.trees.settle(trees)
	s.eventsClosed.Store(true)
	m.events.wakeAll()
	return nil
}

func (m *Manager) pendingStartsLocked() []chan struct{} {
	pending := make([]chan struct{}, 0, len(m.starting))
	for _, ch := range m.starting {
		pending = append(pending, ch)
	}
	return pending
}

func (m *Manager) get(id string, s *Scope) (*Process, error) {
	m.prune()
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.records[id]
	if !ok || (s != nil && p.info.Owner != s.owner) {
		return nil, xerrors.Errorf("get %q: %w", id, ErrNotFound)
	}
	return p, nil
}

func (m *Manager) list(s *Scope) []Info {
	m.prune()
	// The records in List's order, newest first and running before final,
	// as the order kept at insert gives them: pointers, cheap to move
	// under the lock. Whether a record is final is read once, here.
	m.mu.Lock()
	procs := make([]*Process, len(m.order))
	front, back := 0, len(procs)
	for i := len(m.order) - 1; i >= 0; i-- {
		p := m.order[i]
		if s != nil && p.info.Owner != s.owner {
			continue
		}
		if p.isFinal() {
			back--
			procs[back] = p
		} else {
			procs[front] = p
			front++
		}
	}
	m.mu.Unlock()
	finals := procs[back:]
	slices.Reverse(finals)
	procs = append(procs[:front], finals...)

	// Each Info is written in place: a final record's is composed from
	// its static Info and final status, without a lock; a running one's
	// is its status when it was looked at above (it may carry more
	// output, never less).
	infos := make([]Info, len(procs))
	for i, p := range procs {
		if i < front {
			infos[i] = p.runningInfo()
		} else {
			p.finalInfo(&infos[i])
		}
	}
	return infos
}

func (m *Manager) run(ctx context.Context, req StartRequest, s *Scope) (Snapshot, error) {
	p, err := m.start(req, s)
	if err != nil {
		return Snapshot{}, err
	}
	waitErr := p.Wait(ctx)
	snap := p.snapshot(false) // once: never paced for others' polls
	if waitErr != nil && snap.Info.Running {
		// Two causes to match: fmt.Errorf wraps both (xerrors wraps one).
		return snap, fmt.Errorf("run %q: %w: %w", p.info.ID, ErrRunning, ctx.Err())
	}
	return snap, nil
}

func (m *Manager) startOrGet(req StartRequest, s *Scope) (*Process, bool, error) {
	if req.ID == "" {
		p, err := m.start(req, s)
		return p, err == nil, err
	}
	m.prune()
	for {
		m.mu.Lock()
		if m.closed || (s != nil && s.closed) {
			m.mu.Unlock()
			return nil, false, xerrors.Errorf("start %q: %w", req.ID, ErrClosed)
		}
		existing, inProgress := m.records[req.ID], m.starting[req.ID]
		m.mu.Unlock()
		switch {
		case inProgress != nil:
			<-inProgress // then look again
		case existing != nil:
			if !existing.startedWith(req) {
				return nil, false, xerrors.Errorf("start %q: id is held by a process with other parameters: %w", req.ID, ErrDuplicateID)
			}
			return existing, false, nil
		default:
			p, err := m.start(req, s)
			if errors.Is(err, ErrDuplicateID) {
				continue // another call won the race; look at what it started
			}
			return p, err == nil, err
		}
	}
}

// spec is a validated request with everything resolved.
type spec struct {
	req          StartRequest
	id           string
	name         string
	args         []string
	dir          string
	env          []string
	droppedEnv   []string // inherited names DropEnv removed
	headBytes    int
	tailBytes    int
	drainQuiet   time.Duration
	drainTimeout time.Duration
	maxLine      int
	limits       Limits // the request's, defaults filled in
	size         TermSize
	asked        asked
	watch        *eventWatch   // nil without Watch and WatchActivity
	sandbox      *sandboxStart // nil: unrestricted
	sandboxInfo  string        // Info.Sandbox
}

// prepare validates req (section 8 of the design) and resolves its command,
// work dir and environment. It starts nothing.
func (m *Manager) prepare(req StartRequest) (*spec, error) {
	if err := validate(req); err != nil {
		return nil, err
	}
	if err := validBuffers(req, m.opts.MaxBufferBytes); err != nil {
		return nil, err
	}
	if name := m.opts.OwnerEnv; req.Owner != "" && strings.ContainsAny(name, "=\x00") {
		return nil, xerrors.Errorf("start: Options.OwnerEnv %q holds '=' or NUL: %w", name, ErrInvalid)
	}
	if err := m.opts.Limits.validate("Options.Limits"); err != nil {
		return nil, err
	}
	if err := validDropEnv("Options.DropEnv", m.opts.DropEnv); err != nil {
		return nil, err
	}
	sb, sbInfo, err := m.sandboxFor(req)
	if err != nil {
		return nil, err
	}
	sp := &spec{
		req:          req,
		id:           req.ID,
		headBytes:    positiveOr(req.HeadBytes, m.opts.HeadBytes),
		tailBytes:    positiveOr(req.TailBytes, m.opts.TailBytes),
		drainQuiet:   positiveOr(req.DrainQuiet, m.opts.DrainQuiet),
		drainTimeout: positiveOr(req.DrainTimeout, m.opts.DrainTimeout),
		maxLine:      positiveOr(req.MaxLineLength, m.opts.MaxLineLength),
		limits:       req.Limits.orDefault(m.opts.Limits),
		size:         req.Size,
		asked: asked{
			workDir:  req.WorkDir,
			env:      maps.Clone(req.Env),
			unsetEnv: slices.Clone(req.UnsetEnv),
			clearEnv: req.ClearEnv,
			quiet:    req.NonInteractive,
			dropEnv:  slices.Clone(req.DropEnv),
			sandbox:  req.Sandbox.clone(),
		},
		sandbox:     sb,
		sandboxInfo: sbInfo,
	}
	if sp.id == "" {
		sp.id = uuid.NewString()
	}
	if sp.size == (TermSize{}) {
		sp.size = TermSize{Rows: 24, Cols: 80}
	}
	if req.Command != "" {
		sp.name = m.opts.Shell[0]
		sp.args = append(append([]string{}, m.opts.Shell[1:]...), req.Command)
	} else {
		sp.name = req.Args[0]
		sp.args = append([]string{}, req.Args[1:]...)
	}
	dir, err := m.workDir(req.WorkDir)
	if err != nil {
		return nil, err
	}
	sp.dir = dir
	if sp.watch, err = newEventWatch(req, sp.maxLine); err != nil {
		return nil, err
	}
	sp.env, sp.droppedEnv = m.environ(req, sp.id)
	return sp, nil
}

func validate(req StartRequest) error {
	limitsErr := req.Limits.validate("StartRequest.Limits")
	switch {
	case req.Command == "" && len(req.Args) == 0:
		return xerrors.Errorf("start: neither Command nor Args is set: %w", ErrInvalid)
	case req.Command != "" && len(req.Args) > 0:
		return xerrors.Errorf("start: both Command and Args are set: %w", ErrInvalid)
	case len(req.Args) > 0 && req.Args[0] == "":
		return xerrors.Errorf("start: Args[0] is empty: %w", ErrInvalid)
	case strings.ContainsRune(req.Command, 0):
		return xerrors.Errorf("start: Command contains NUL: %w", ErrInvalid)
	case limitsErr != nil:
		return limitsErr
	case req.Timeout < 0:
		return xerrors.Errorf("start: negative Timeout %v: %w", req.Timeout, ErrInvalid)
	case req.DrainQuiet < 0 || req.DrainTimeout < 0:
		return xerrors.Errorf("start: negative drain window: %w", ErrInvalid)
	case req.HeadBytes < 0 || req.TailBytes < 0:
		return xerrors.Errorf("start: negative buffer size: %w", ErrInvalid)
	case req.MaxLineLength < 0:
		return xerrors.Errorf("start: negative MaxLineLength %d: %w", req.MaxLineLength, ErrInvalid)
	case (req.Size.Rows == 0) != (req.Size.Cols == 0):
		return xerrors.Errorf("start: Size %dx%d has a zero dimension: %w", req.Size.Rows, req.Size.Cols, ErrInvalid)
	case req.TTY && req.SeparateStderr:
		return xerrors.Errorf("start: a TTY has one output stream, SeparateStderr is not possible: %w", ErrInvalid)
	case req.TTY && !ttySupported:
		return xerrors.Errorf("start: TTY is not supported on this platform: %w", ErrUnsupported)
	case strings.ContainsRune(req.LogPath, 0):
		return xerrors.Errorf("start: LogPath contains NUL: %w", ErrInvalid)
	case strings.ContainsRune(req.ID, 0):
		return xerrors.Errorf("start: ID contains NUL: %w", ErrInvalid)
	case strings.ContainsRune(req.Owner, 0):
		return xerrors.Errorf("start: Owner contains NUL: %w", ErrInvalid)
	}
	for _, a := range req.Args {
		if strings.ContainsRune(a, 0) {
			return xerrors.Errorf("start: argument %q contains NUL: %w", a, ErrInvalid)
		}
	}
	for name, value := range req.Env {
		if err := validEnvName(name); err != nil {
			return err
		}
		if strings.ContainsRune(value, 0) {
			// Never echo environment values: they may be secrets.
			return xerrors.Errorf("start: value of environment variable %q contains NUL: %w", name, ErrInvalid)
		}
	}
	for _, name := range req.UnsetEnv {
		if err := validEnvName(name); err != nil {
			return err
		}
	}
	return validDropEnv("StartRequest.DropEnv", req.DropEnv)
}

// validBuffers refuses a request that asks to keep more than maxBytes
// (Options.MaxBufferBytes): head and tail together, or one line. Each
// size is checked alone first, so that their sum cannot overflow.
func validBuffers(req StartRequest, maxBytes int) error {
	head, tail := req.HeadBytes, req.TailBytes
	if head > maxBytes || tail > maxBytes || head+tail > maxBytes {
		return xerrors.Errorf("start: HeadBytes %d + TailBytes %d is above Options.MaxBufferBytes (%d): %w", head, tail, maxBytes, ErrInvalid)
	}
	if req.MaxLineLength > maxBytes {
		return xerrors.Errorf("start: MaxLineLength %d is above Options.MaxBufferBytes (%d): %w", req.MaxLineLength, maxBytes, ErrInvalid)
	}
	return nil
}

// workDir resolves the work dir: the request's (which must exist), then
// Options.WorkingDir (if it exists), then $HOME, then the current directory.
func (m *Manager) workDir(requested string) (string, error) {
	if requested != "" {
		fi, err := os.Stat(requested)
		if err != nil {
			return "", xerrors.Errorf("start: work dir %s: %v: %w", quotePath(requested), err, ErrInvalid)
		}
		if !fi.IsDir() {
			return "", xerrors.Errorf("start: work dir %s is not a directory: %w", quotePath(requested), ErrInvalid)
		}
		return filepath.Abs(requested)
	}
	var candidates []string
	if m.opts.WorkingDir != nil {
		candidates = append(candidates, m.opts.WorkingDir())
	}
	if home, err := os.UserHomeDir(); err == nil {
		candidates = append(candidates, home)
	}
	for _, dir := range candidates {
		if dir == "" {
			continue
		}
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return filepath.Abs(dir)
		}
	}
	return os.Getwd()
}

// enter registers background work that is about to act (a timer callback,
// a tree watcher); it reports false once Close has begun (Close then does
// that work). Work that entered calls m.background.Done when it is
// finished.
func (m *Manager) enter() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.background.Add(1)
	return true
}

func (m *Manager) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}
