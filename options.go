package proc

import (
	"context"
	"os/exec"
	"time"

	"cdr.dev/slog/v3"
	"github.com/coder/quartz"
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
	// WorkingDir is the work dir of requests that name none, and the base
	// a relative StartRequest.WorkDir is resolved against, when it returns
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
	// of inherited variable names, matched regardless of case, removed
	// from every child's environment (a request with a DropEnv of its own,
	// even empty, replaces it). [SecretEnv] is the usual choice. A
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
