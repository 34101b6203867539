package proc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"cdr.dev/slog/v3"
	"github.com/coder/quartz"
	"golang.org/x/xerrors"
)

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
	// workBases is the default work dir found last (startworkdir.go).
	workBases workBaseSeen

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
// retained record started with the same Command, Args, WorkDir ("" as it
// is, any other resolved: "src" asks for what its absolute path does),
// Owner, Env, UnsetEnv, ClearEnv, Background, NonInteractive,
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
	m.sandbox.close()
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
			asked := req
			asked.WorkDir = m.askedWorkDir(req.WorkDir)
			if !existing.startedWith(asked) {
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
