package proc

import (
	"slices"
	"time"
)

// Retention (design section 7): a final record is kept for RetainExited,
// and at most MaxRetained of them, the earliest to become final dropped
// first. Dropping a record never forgets its process tree: the tree keeper
// holds it until it is seen empty (tree.go).

// prune drops records that retention says must go. It runs on access as
// well as from the reap timer, so memory stays bounded either way.
func (m *Manager) prune() {
	m.pruneAt(m.clock.Now(tagsManagerPrune...))
}

// tagsManagerPrune are prune's clock tags, made once: every start prunes
// (tagsProcessStart says why).
var tagsManagerPrune = []string{"manager", "prune"}

// pruneAt drops expired and surplus final records.
func (m *Manager) pruneAt(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.finals) > 0 {
		oldest := m.finals[0]
		expired := !now.Before(oldest.at.Add(m.opts.RetainExited))
		if !expired && len(m.finals) <= m.opts.MaxRetained {
			break
		}
		m.dropLocked(oldest.p, now)
	}
}

// dropLocked forgets p. Its process tree is not forgotten: the registry
// keeps it until it is seen empty, so that Close still stops it (I4). The
// caller must hold m.mu. now is when, for the removed event.
func (m *Manager) dropLocked(p *Process, now time.Time) {
	if m.records[p.info.ID] == p {
		delete(m.records, p.info.ID)
		if i := m.orderIndexLocked(p); i >= 0 {
			m.order = deleteAt(m.order, i)
		}
		m.eventRemovedLocked(p, now)
	}
	for i, f := range m.finals {
		if f.p == p {
			m.finals = deleteAt(m.finals, i)
			break
		}
	}
}

// deleteAt removes s[i]. Retention drops the oldest record, the first of
// both m.finals and m.order, once per start in a Manager's steady state:
// that one is cut off the front (zeroed, so that the array does not keep
// the record alive) instead of moving the MaxRetained others down, 40 KB
// under m.mu per start at the default 1,000. The next append that finds
// the array full copies only the live elements to a new one.
func deleteAt[S ~[]E, E any](s S, i int) S {
	if i == 0 {
		var zero E
		s[0] = zero
		return s[1:]
	}
	return slices.Delete(s, i, i+1)
}

// retained is an entry of Manager.finals: a final record and when it
// became final.
type retained struct {
	p  *Process
	at time.Time
}

// addLocked registers p, whose static Info is complete, as a retained
// record: in m.records, and in m.order at its place. The caller holds m.mu.
func (m *Manager) addLocked(p *Process) {
	m.records[p.info.ID] = p
	// Records arrive nearly in start order: the place is at or near the end.
	i := len(m.order)
	for i > 0 && startedBefore(p, m.order[i-1]) {
		i--
	}
	m.order = slices.Insert(m.order, i, p)
}

// orderIndexLocked returns the index of p in m.order, or -1 if p is not
// there. A retained record is always there, at the place startedBefore
// gives it, which a binary search finds; should that ever not hold (a bug:
// a record missing, or the order not sorted), the place it would go is
// another record's or past the end, so a miss looks again by identity
// rather than let the caller drop a neighbour. The caller holds m.mu.
func (m *Manager) orderIndexLocked(p *Process) int {
	if len(m.order) > 0 && m.order[0] == p {
		// Retention's drop in a steady state: the oldest record. The
		// search would read the start time of ten others to find it.
		return 0
	}
	i, found := slices.BinarySearchFunc(m.order, p, func(q, p *Process) int {
		if startedBefore(q, p) {
			return -1
		}
		if q == p {
			return 0
		}
		return 1
	})
	if found {
		return i
	}
	return slices.Index(m.order, p)
}

// startedBefore is List's order, oldest first: by start time, then by the
// start sequence number (a mock clock gives equal times).
func startedBefore(a, b *Process) bool {
	if c := a.info.StartedAt.Compare(b.info.StartedAt); c != 0 {
		return c < 0
	}
	return a.seq < b.seq
}

// recordFinal is called once by the exit goroutine of p, after p's status
// is final and before Done closes: the running count and the retention list
// change at once; now is when p became final. It returns what must happen
// after Done closes: watching p's tree until it is empty (if finish could
// not settle it) and arming the reap timer.
func (m *Manager) recordFinal(p *Process, now time.Time) (after func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notFinal--
	arm := false
	if m.records[p.info.ID] == p && !m.closed {
		m.finals = append(m.finals, retained{p: p, at: now})
		arm = !m.reapArmed
		m.reapArmed = true
		for len(m.finals) > m.opts.MaxRetained {
			m.dropLocked(m.finals[0].p, now)
		}
	}
	return func() {
		if p.tree().alive() {
			m.watch(p)
		}
		if arm {
			m.armReap(m.opts.RetainExited)
		}
	}
}

// watch waits, in a goroutine of its own, until the tree of p (which is
// final but whose tree has live members, such as a background child) is
// empty, and then settles it and lets p forget it. The goroutine ends when
// the tree is empty or Close begins; Close waits for it.
func (m *Manager) watch(p *Process) {
	if !m.enter() {
		return // Close stops the tree
	}
	t := p.tree()
	go func() {
		defer m.background.Done()
		t.sys.waitEmpty(m.stopCtx)
		m.trees.settle([]*tree{t})
		p.forgetTree()
	}()
}

// armReap schedules the reap timer. Only one is armed at a time
// (m.reapArmed); it re-arms itself for the next record to expire.
func (m *Manager) armReap(d time.Duration) {
	// Registered as background work, so that Close never returns while a
	// timer is being armed behind its back.
	if !m.enter() {
		return
	}
	defer m.background.Done()
	t := m.clock.AfterFunc(d, m.reap, "manager", "reap")
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		t.Stop("manager", "reap")
		return
	}
	m.reapTimer = t
	m.mu.Unlock()
}

func (m *Manager) reap() {
	if !m.enter() {
		return
	}
	defer m.background.Done()

	now := m.clock.Now("manager", "reap")
	m.pruneAt(now)

	m.mu.Lock()
	m.reapTimer = nil
	if m.closed || len(m.finals) == 0 {
		m.reapArmed = false
		m.mu.Unlock()
		return
	}
	next := m.finals[0].at.Add(m.opts.RetainExited).Sub(now)
	m.mu.Unlock()
	m.armReap(next)
}
