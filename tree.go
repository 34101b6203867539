package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"cdr.dev/slog/v3"
	"github.com/coder/quartz"
	"golang.org/x/xerrors"
)

// Process trees (design section 6). A record's tree is its child and
// everything the child starts. One type, tree, owns a tree's end:
// signalling it, deciding whether any member is alive, killing it, and
// waiting until it is empty. One type, treeKeeper, owns the trees of a
// Manager: it registers every tree from the moment its child starts until
// it is seen empty with its record final, whether or not the record is
// still retained, applies the stop policy, and decides how trees are held;
// Process.Signal, the timeout, Close, Scope.Close and retention all go
// through these two.
//
// The OS mechanism behind a tree is a treeSys: a cgroup v2 directory
// (Linux), a session and process group (Unix), or a Job Object (Windows).
// Backends do mechanics only; what to do and when is decided here.

// Containment says how a Manager holds its process trees. See
// [Options.Containment].
type Containment string

// The containment modes.
const (
	// ContainAuto uses cgroups on Linux where creating them and starting a
	// child inside one works, and otherwise falls back to ContainGroup
	// (logged once). [Info.Containment] tells what each record got.
	ContainAuto Containment = ""
	// ContainGroup runs each child as the leader of a new session and
	// process group (a Job Object on Windows). A member that starts a
	// session of its own (setsid) leaves the group and is out of reach.
	ContainGroup Containment = "group"
	// ContainCgroup requires cgroup v2: each child starts inside a cgroup
	// of its own, which no member can leave. Start fails with
	// ErrUnsupported where cgroups cannot be used.
	ContainCgroup Containment = "cgroup"
)

func (c Containment) valid() bool {
	return c == ContainAuto || c == ContainGroup || c == ContainCgroup
}

// treeSys is one OS mechanism that holds a tree. Its methods are safe for
// concurrent use.
type treeSys interface {
	// signal sends sig to every live member, and follows Terminate and
	// Interrupt with SIGCONT where it exists, so that a stopped member
	// runs its handler. It returns ErrNotRunning when no member is alive.
	signal(sig Signal) error
	// alive reports whether any member is alive; zombies are dead.
	alive() bool
	// waitEmpty returns once no member is alive or ctx has ended, without
	// spinning.
	waitEmpty(ctx context.Context)
	// reaped tells the mechanism that the exit goroutine reaped the child.
	reaped()
	// usage is the tree's whole usage so far, or nil where the mechanism
	// does not account for it.
	usage() *TreeUsage
	// members lists the PIDs of the live members, as the mechanism itself
	// knows them (cgroup.procs, the process group in /proc). ok is false
	// where the OS cannot list them.
	members() (pids []int, ok bool)
	// rewatch registers the tree with a new host-death watchdog, if the
	// mechanism needs registering (process groups do).
	rewatch(guard *watchdog)
	// release frees what the mechanism holds (a cgroup directory, a job
	// handle). It is called once, when the tree leaves the registry.
	release()
}

// tree is the one owner of a process tree's end.
type tree struct {
	sys   treeSys
	kind  string // "cgroup", "group" or "job", for Info.Containment
	owner string
	// gone is set once the tree was seen without a live member: a tree
	// never regains members, and a process group's ID may name another
	// group later, so it is never signalled again.
	gone atomic.Bool
	// final is set once the tree's record is final; a tree leaves the
	// registry only then.
	final atomic.Bool
	// stopSandbox ends the host's service of a sandboxed tree's routed
	// calls (design section 17); nil for an unrestricted tree. Called
	// once, when the tree leaves the registry (release).
	stopSandbox func()
}

// release frees what the tree's mechanism holds and ends its sandbox's
// service, once, when it leaves the registry.
func (t *tree) release() {
	t.sys.release()
	t.endSandbox()
}

func (t *tree) endSandbox() {
	if t.stopSandbox != nil {
		t.stopSandbox()
	}
}

// signal sends sig to every live member of the tree, or returns
// ErrNotRunning if there is none.
func (t *tree) signal(sig Signal) error {
	if t.gone.Load() {
		return ErrNotRunning
	}
	err := t.sys.signal(sig)
	if errors.Is(err, ErrNotRunning) {
		t.gone.Store(true)
	}
	return err
}

// alive reports whether any member of the tree is alive.
func (t *tree) alive() bool {
	if t.gone.Load() {
		return false
	}
	if t.sys.alive() {
		return true
	}
	t.gone.Store(true)
	return false
}

// treeKeeper is the one owner of the end of a Manager's trees (design
// section 6): the registry of every tree from the moment its child starts
// until it is seen empty with its record final, settling, the stop policy,
// and the containment decision (how trees are held, decided at the first
// Start). Its methods are safe for concurrent use. It never calls back
// into the Manager.
type treeKeeper struct {
	clock  quartz.Clock
	logger slog.Logger
	grace  time.Duration // Options.KillGrace
	// contain is how trees are held; it has a mutex of its own.
	contain containState

	// mu guards set. It is a leaf lock: nothing else is taken, no
	// signal sent, nothing logged while it is held.
	mu  sync.Mutex
	set map[*tree]struct{}

	// exits sees the exits of the children whose end is handed over
	// (endHandoff); it has a mutex of its own.
	exits exitWatch

	// nullMu guards null: os.DevNull opened once, read-only, the stdin
	// of every child started without Stdin or TTY (os/exec would open and
	// close it for each), until close; nullFailed once it could not be.
	nullMu     sync.Mutex
	null       *os.File
	nullFailed bool
	nullClosed bool
}

// devNull returns the shared stdin of a child without one, or nil where
// it cannot be opened, on Windows (whose children get handles of their
// own), or once the keeper is closed: exec.Cmd then opens its own. The
// children read it only (reads give EOF whatever its flags), and exec.Cmd
// hands it to the child as it is, never closing it.
func (k *treeKeeper) devNull() *os.File {
	if runtime.GOOS == "windows" {
		return nil
	}
	k.nullMu.Lock()
	defer k.nullMu.Unlock()
	if k.null == nil && !k.nullFailed && !k.nullClosed {
		f, err := os.Open(os.DevNull)
		if err != nil {
			k.nullFailed = true
			return nil
		}
		k.null = f
	}
	if k.nullClosed {
		return nil
	}
	return k.null
}

func newTreeKeeper(opts Options, logger slog.Logger) *treeKeeper {
	return &treeKeeper{
		clock:  opts.Clock,
		logger: logger,
		grace:  opts.KillGrace,
		contain: containState{
			mode:   opts.Containment,
			parent: opts.CgroupParent,
			keep:   opts.KeepOnHostExit,

			poolClock: quartz.NewReal(),
		},
		set: make(map[*tree]struct{}),
	}
}

// register adds t, whose child just started, to the registry.
func (k *treeKeeper) register(t *tree) {
	k.mu.Lock()
	k.set[t] = struct{}{}
	k.mu.Unlock()
}

// settle takes the trees among ts whose record is final and that have no
// live member out of the registry, and releases them.
func (k *treeKeeper) settle(ts []*tree) {
	for _, t := range k.takeSettled(ts) {
		t.release()
	}
}

// laterReleaser is a treeSys whose release hands off work that need not
// come before the record's end is published (a cgroup's readying for
// reuse), and can leave it to its caller instead of waking a goroutine.
type laterReleaser interface {
	// releaseLater is release, but returns the work release would hand
	// off, for the caller to run (nil if none).
	releaseLater() (later func())
}

// settleOwn is settle of one tree by its record's exit goroutine (finish),
// which publishes the record's end next and then has nothing left to do:
// it returns what the release handed off (laterReleaser), for the caller
// to run after that end, on its own goroutine. later is nil if there is
// nothing, or the tree was not released (it outlived its child).
func (k *treeKeeper) settleOwn(t *tree) (later func()) {
	for _, t := range k.takeSettled([]*tree{t}) {
		if r, ok := t.sys.(laterReleaser); ok {
			t.endSandbox()
			return r.releaseLater()
		}
		t.release()
	}
	return nil
}

// takeSettled takes the trees among ts whose record is final and that
// have no live member out of the registry, and returns them: the caller
// releases them.
func (k *treeKeeper) takeSettled(ts []*tree) []*tree {
	var done []*tree
	for _, t := range ts {
		if t.final.Load() && !t.alive() {
			done = append(done, t)
		}
	}
	if len(done) == 0 {
		return nil
	}
	k.mu.Lock()
	released := done[:0]
	for _, t := range done {
		// Only the caller that takes it out releases it.
		if _, ok := k.set[t]; ok {
			delete(k.set, t)
			released = append(released, t)
		}
	}
	k.mu.Unlock()
	return released
}

// registered returns the registered trees, of one owner if owner is
// non-nil.
func (k *treeKeeper) registered(owner *string) (ts []*tree) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for t := range k.set {
		if owner == nil || t.owner == *owner {
			ts = append(ts, t)
		}
	}
	return ts
}

// releaseAll empties the registry and releases every tree in it: Close
// calls it once every tree is empty, or holds a member the kernel would not
// tear down.
func (k *treeKeeper) releaseAll() {
	k.mu.Lock()
	set := k.set
	k.set = map[*tree]struct{}{}
	k.mu.Unlock()
	for t := range set {
		t.release()
	}
}

// stop is the stop policy, the one place that ends trees: terminate every
// live tree (SIGCONT follows), wait until each is empty for at most
// KillGrace (a clock timer tagged tags), kill what is left, and wait until
// it is empty. If ctx ends during the grace, it returns at once without
// killing: the caller that ended ctx (Close) takes over. The wait after
// the kill is bounded by killWait, a safety net in real time for a member
// the kernel is slow to tear down, not a policy.
func (k *treeKeeper) stop(ctx context.Context, ts []*tree, tags ...string) {
	k.graceThenKill(ctx, signalEach(ts, Terminate), tags...)
}

// stopAll is stop for every registered tree: Close's. It tells the cgroup
// host first that Close began (see draining). Where the trees are
// cgroups, they all lie below the Manager's cgroup, which holds no process
// of its own, so one watch of it ("populated 0") tells that every tree is
// empty, in place of a wait for each tree in turn.
func (k *treeKeeper) stopAll(ctx context.Context, tags ...string) {
	wait := waitEach
	if host := k.draining(); host != nil {
		wait = func(ctx context.Context, _ []*tree) { host.waitEmpty(ctx) }
	}
	k.graceThenKillWaiting(ctx, signalEach(k.registered(nil), Terminate), wait, tags...)
}

// graceThenKill is the rest of stop, for trees that were just sent
// Terminate (the timeout sends it itself): wait until each is empty for at
// most KillGrace, then kill.
func (k *treeKeeper) graceThenKill(ctx context.Context, live []*tree, tags ...string) {
	k.graceThenKillWaiting(ctx, live, waitEach, tags...)
}

// waitEach waits until every tree of ts is empty, or ctx ends.
func waitEach(ctx context.Context, ts []*tree) {
	for _, t := range ts {
		t.sys.waitEmpty(ctx)
	}
}

// graceThenKillWaiting is graceThenKill, waiting until the trees of live
// are empty with wait.
func (k *treeKeeper) graceThenKillWaiting(ctx context.Context, live []*tree, wait func(context.Context, []*tree), tags ...string) {
	if len(live) == 0 {
		return
	}
	grace, cancel := context.WithCancel(ctx)
	timer := k.clock.NewTimer(k.grace, tags...)
	waited := make(chan struct{})
	// Ends the grace when the timer fires; stops once the wait is over.
	go func() {
		select {
		case <-timer.C:
			cancel()
		case <-waited:
		}
	}()
	wait(grace, live)
	close(waited)
	timer.Stop(tags...)
	cancel()
	if ctx.Err() != nil {
		return
	}
	killed := signalEach(live, Kill)
	if len(killed) == 0 {
		return
	}
	bound, cancelBound := context.WithTimeout(context.Background(), killWait)
	defer cancelBound()
	wait(bound, killed)
	for _, t := range killed {
		if t.alive() {
			k.logger.Warn(context.Background(), "a killed process tree still has live members",
				slog.F("containment", t.kind), slog.F("owner", t.owner))
		}
	}
}

// killWait bounds the wait for killed members to be torn down.
const killWait = 2 * time.Second

// signalEach sends sig to every tree in ts and returns those it reached.
// Trees whose mechanism reaches the child apart from the other members
// (childSignaller: a cgroup's child through its os.Process) get a
// Terminate or Interrupt in two walks: every child first, then the other
// members of each tree. The first walk costs what a process group's
// signal does; by the second, most trees of one process have emptied,
// which the second sees without listing their members. Every member is
// still signalled after its parent, and before the grace begins.
func signalEach(ts []*tree, sig Signal) []*tree {
	var child []bool // by index in ts: its child was signalled
	if sig != Kill {
		child = make([]bool, len(ts))
		for i, t := range ts {
			child[i] = t.signalChild(sig)
		}
	}
	var reached []*tree
	for i, t := range ts {
		var err error
		if child != nil {
			err = t.signalOthers(sig, child[i])
		} else {
			err = t.signal(sig)
		}
		if err == nil {
			reached = append(reached, t)
		}
	}
	return reached
}

// childSignaller is a treeSys that can signal its child apart from the
// other members, more cheaply than its whole tree.
type childSignaller interface {
	// signalChild sends sig, then SIGCONT, to the child alone, unless it
	// was reaped; it reports whether it did.
	signalChild(sig Signal) bool
	// signalOthers sends sig, each followed by SIGCONT, to every live
	// member but the child, which signalChild was called for; child says
	// whether it reached it. It returns ErrNotRunning when neither the
	// child nor any other member was reached.
	signalOthers(sig Signal, child bool) error
}

// signalChild is the first of signalEach's two walks: it signals t's
// child alone where the mechanism can (childSignaller).
func (t *tree) signalChild(sig Signal) bool {
	cs, ok := t.sys.(childSignaller)
	return ok && !t.gone.Load() && cs.signalChild(sig)
}

// signalOthers is the second of signalEach's two walks: the rest of t, or
// all of it where the mechanism cannot signal its child alone.
func (t *tree) signalOthers(sig Signal, child bool) error {
	cs, ok := t.sys.(childSignaller)
	if !ok {
		return t.signal(sig)
	}
	if t.gone.Load() {
		if child {
			return nil
		}
		return ErrNotRunning
	}
	err := cs.signalOthers(sig, child)
	if errors.Is(err, ErrNotRunning) {
		t.gone.Store(true)
	}
	return err
}

// containState is how a Manager holds its trees, decided at the first
// Start that needs it, and its host-death watchdog.
type containState struct {
	mode   Containment // Options.Containment
	parent string      // Options.CgroupParent
	keep   bool        // Options.KeepOnHostExit
	// poolClock drives the idle timer of the spare cgroup pool: the real
	// clock, not Options.Clock, whose tests advance a mock past any
	// timer pending on it; the pool's own tests put a mock here before
	// the first Start.
	poolClock quartz.Clock

	// mu guards the fields below. It is not a leaf: decide holds it while
	// the Manager's cgroup is made and probed (taking cgroupHost.mu, and
	// forking the probe child) and while a watchdog is started (a fork) or
	// asked whether it is lost (taking watchdog.mu), so that concurrent
	// first Starts wait for one decision. Lock order: containState.mu
	// before cgroupHost.mu and watchdog.mu; treeKeeper.mu is never taken
	// under it, and nothing is logged or signalled under it.
	mu      sync.Mutex
	decided bool
	host    *cgroupHost // nil: no cgroups
	err     error       // why there are none
	guard   *watchdog   // nil with KeepOnHostExit, on Windows, or until started
}

// setup decides how the child of cmd is held and prepares cmd for it (the
// backend's SysProcAttr, a record cgroup): the portable containment and
// limits decision, over the backend's mechanics (setupTree). The tree is
// made by the returned setup's started, once the child is forked.
func (k *treeKeeper) setup(cmd *exec.Cmd, tty, sandboxed bool, limits Limits) (*treeSetup, error) {
	host, guard, err := k.decide()
	if err != nil {
		return nil, err
	}
	if host == nil && !limits.IsZero() && !limitsWithoutCgroup {
		return nil, k.limitsUnsupported(limits)
	}
	return setupTree(cmd, tty, sandboxed, host, guard, limits)
}

// limitsUnsupported is the error of a start with limits whose tree would
// be a process group, which cannot enforce any.
func (k *treeKeeper) limitsUnsupported(l Limits) error {
	why := "Options.Containment is group"
	k.contain.mu.Lock()
	if k.contain.err != nil {
		why = "cgroups cannot be used: " + k.contain.err.Error()
	}
	k.contain.mu.Unlock()
	return xerrors.Errorf("start: limits %+v need a cgroup (Linux) or a job (Windows); %s: %w", l, why, ErrUnsupported)
}

// decide returns the Manager's cgroup host, or nil when its children
// lead sessions instead: with ContainGroup, and with ContainAuto where
// cgroups cannot be used (logged once on Linux). With ContainCgroup a missing
// cgroup is an error wrapping ErrUnsupported, and a CgroupParent that is
// not a cgroup v2 directory one wrapping ErrInvalid in either mode. It
// also returns the watchdog that kills the trees if the host dies, started
// here with the first Start unless KeepOnHostExit is set.
func (k *treeKeeper) decide() (*cgroupHost, *watchdog, error) {
	c := &k.contain
	mode := c.mode
	if !mode.valid() {
		return nil, nil, xerrors.Errorf("start: Options.Containment %q: want %q, %q or %q: %w",
			mode, ContainAuto, ContainGroup, ContainCgroup, ErrInvalid)
	}
	c.mu.Lock()
	first := !c.decided
	if first && mode != ContainGroup {
		c.host, c.err = openCgroupHost(c.parent, c.keep, c.poolClock)
	}
	c.decided = true
	host, err := c.host, c.err
	if err != nil && (mode == ContainCgroup || errors.Is(err, ErrInvalid)) {
		c.mu.Unlock()
		return nil, nil, xerrors.Errorf("start: %w", err)
	}
	// Cgroups (host), or process groups (host nil) from here on. A
	// watchdog killed or stopped from outside is replaced, and learns
	// every group the host still holds.
	var guardErr error
	var lost *watchdog
	if c.guard != nil && c.guard.lost() {
		lost, c.guard = c.guard, nil
	}
	restarted := false
	if c.guard == nil && !c.keep {
		c.guard, guardErr = startWatchdog(host.path())
		restarted = guardErr == nil && lost != nil
	}
	guard := c.guard
	c.mu.Unlock()
	if lost != nil {
		lost.abandon()
		k.logger.Warn(context.Background(), "the host-death watchdog was gone; started a new one")
	}
	// Only Linux has cgroups to miss; elsewhere sessions (or jobs) are
	// simply how trees are held.
	if first && err != nil && runtime.GOOS == "linux" {
		k.logger.Info(context.Background(), "cgroups cannot be used; children lead sessions instead",
			slog.Error(err))
	}
	if guardErr != nil {
		return nil, nil, xerrors.Errorf("start: %v (Options.KeepOnHostExit runs without it): %w", guardErr, ErrUnsupported)
	}
	if restarted {
		// The newest watchdog for each: another may have replaced this
		// one meanwhile.
		for _, t := range k.registered(nil) {
			k.recheck(t)
		}
	}
	return host, guard, nil
}

// recheck registers t with the Manager's current watchdog unless it is
// registered with it already. A start calls it once its tree is in the
// registry: a watchdog replaced while the start was under way registered
// the trees of the registry only.
func (k *treeKeeper) recheck(t *tree) {
	c := &k.contain
	c.mu.Lock()
	guard := c.guard
	c.mu.Unlock()
	if guard != nil {
		t.sys.rewatch(guard)
	}
}

// draining tells the cgroup host, if any, that Close began: cgroups that
// are done are removed at once from then on, while Close stops the trees.
// It returns the host; nil without cgroups.
func (k *treeKeeper) draining() *cgroupHost {
	c := &k.contain
	c.mu.Lock()
	host := c.host
	c.mu.Unlock()
	host.drain()
	return host
}

// close stops the exit watch and the watchdog and removes the Manager's
// cgroups, once every tree has left them.
func (k *treeKeeper) close() {
	k.exits.close()
	k.nullMu.Lock()
	k.nullClosed = true
	if k.null != nil {
		_ = k.null.Close()
		k.null = nil
	}
	k.nullMu.Unlock()
	c := &k.contain
	c.mu.Lock()
	host, guard := c.host, c.guard
	c.mu.Unlock()
	guard.close()
	if host != nil {
		host.close()
	}
}
