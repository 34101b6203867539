package proc

import (
	"context"
	"sync/atomic"

	"golang.org/x/xerrors"
)

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
