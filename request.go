package proc

import (
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"golang.org/x/xerrors"
)

// What a start asks for, its validation (design section 8), and the spec
// it resolves to (command, work dir, environment) before anything starts.

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
	// Options.WorkingDir, then $HOME. A relative WorkDir is resolved
	// against that same base, never against the host's current
	// directory. Info.WorkDir holds the absolute path.
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
	// DropEnv holds path.Match patterns ([SecretEnv], "AWS_*") of
	// variable names, matched regardless of case, removed from the
	// inherited environment (os.Environ() and Options.UpdateEnv); Env,
	// Options.OwnerEnv and what NonInteractive sets are never dropped. The names removed, never the
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
	if err := m.validOptions(req); err != nil {
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
		asked:        askedOf(req),
		sandbox:      sb,
		sandboxInfo:  sbInfo,
	}
	if sp.id == "" {
		sp.id = uuid.NewString()
	}
	if sp.size == (TermSize{}) {
		sp.size = TermSize{Rows: 24, Cols: 80}
	}
	sp.name, sp.args = m.argv(req)
	dir, err := m.workDir(req.WorkDir)
	if err != nil {
		return nil, err
	}
	sp.dir = dir
	if req.WorkDir != "" {
		sp.asked.workDir = dir
	}
	if sp.watch, err = newEventWatch(req, sp.maxLine); err != nil {
		return nil, err
	}
	sp.env, sp.droppedEnv = m.environ(req, sp.id)
	return sp, nil
}

// validOptions refuses the Options a start finds bad: an OwnerEnv that
// cannot name a variable (checked only for a request with an Owner), bad
// Limits or DropEnv.
func (m *Manager) validOptions(req StartRequest) error {
	if name := m.opts.OwnerEnv; req.Owner != "" && strings.ContainsAny(name, "=\x00") {
		return xerrors.Errorf("start: Options.OwnerEnv %q holds '=' or NUL: %w", name, ErrInvalid)
	}
	if err := m.opts.Limits.validate("Options.Limits"); err != nil {
		return err
	}
	return validDropEnv("Options.DropEnv", m.opts.DropEnv)
}

// askedOf is what req asked for that StartOrGet compares, copied so
// that the caller's later changes to req do not reach the record.
func askedOf(req StartRequest) asked {
	return asked{
		env:      maps.Clone(req.Env),
		unsetEnv: slices.Clone(req.UnsetEnv),
		clearEnv: req.ClearEnv,
		quiet:    req.NonInteractive,
		dropEnv:  slices.Clone(req.DropEnv),
		sandbox:  req.Sandbox.clone(),
	}
}

// argv is the program req runs and its arguments: Command through
// Options.Shell, else Args.
func (m *Manager) argv(req StartRequest) (name string, args []string) {
	if req.Command != "" {
		return m.opts.Shell[0], append(append([]string{}, m.opts.Shell[1:]...), req.Command)
	}
	return req.Args[0], append([]string{}, req.Args[1:]...)
}

// validate refuses a request that is bad in itself (design section 8),
// before anything is resolved.
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
	case req.Size.checkCells() != nil:
		return xerrors.Errorf("start: Size: %w", req.Size.checkCells())
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

// workDir resolves the work dir, absolute: the request's if absolute;
// a relative one joined to the base an empty one gets (workBase), never to
// the host's current directory; it must be an existing directory. An
// empty one is the base itself, else the host's current directory.
func (m *Manager) workDir(requested string) (string, error) {
	if requested == "" {
		if base, ok := m.workBase(true); ok {
			return base, nil
		}
		return os.Getwd()
	}
	dir := requested
	if !filepath.IsAbs(requested) {
		base, ok := m.workBase(false)
		if !ok {
			return "", xerrors.Errorf("start: relative work dir %s: neither Options.WorkingDir nor $HOME is an existing directory to resolve it against: %w",
				quotePath(requested), ErrInvalid)
		}
		dir = filepath.Join(base, requested)
		if err := isDir(dir); err != nil {
			return "", xerrors.Errorf("start: work dir %s, resolved against %s: %v: %w", quotePath(requested), quotePath(base), err, ErrInvalid)
		}
		return dir, nil
	}
	if err := isDir(dir); err != nil {
		return "", xerrors.Errorf("start: work dir %s: %v: %w", quotePath(requested), err, ErrInvalid)
	}
	return filepath.Clean(dir), nil
}

// workBase is the work dir of a request that names none, absolute:
// Options.WorkingDir() if it is an existing directory, else $HOME if it is
// one; ok is false when neither is. With trusted, a candidate found an
// existing directory before is taken without a look (workBaseSeen): only
// for a start's own work dir, which its chdir looks at.
func (m *Manager) workBase(trusted bool) (base string, ok bool) {
	var candidates []string
	if m.opts.WorkingDir != nil {
		candidates = append(candidates, m.opts.WorkingDir())
	}
	if home, err := os.UserHomeDir(); err == nil {
		candidates = append(candidates, home)
	}
	for _, dir := range candidates {
		if abs := m.workBases.lookup(dir); trusted && dir != "" && abs != "" {
			return abs, true // found before; launch looks again if a start fails
		}
		if dir == "" || isDir(dir) != nil {
			continue
		}
		if abs, err := filepath.Abs(dir); err == nil {
			m.workBases.found(dir, abs)
			return abs, true
		}
	}
	return "", false
}

// isDir returns why dir is not an existing directory, or nil.
func isDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return err
	case !fi.IsDir():
		return xerrors.New("not a directory")
	}
	return nil
}

// askedWorkDir is the WorkDir StartOrGet compares: "" as it is (the
// base, whatever it is at the time), any other resolved as workDir would
// (without looking whether it exists), so that "src" and the absolute path
// it resolves to ask for the same, and "src" against another base does
// not. A relative one with no base stays as it is, equal to no record's.
func (m *Manager) askedWorkDir(requested string) string {
	switch {
	case requested == "":
		return ""
	case filepath.IsAbs(requested):
		return filepath.Clean(requested)
	}
	if base, ok := m.workBase(false); ok {
		return filepath.Join(base, requested)
	}
	return requested
}
