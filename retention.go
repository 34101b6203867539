package proc

import "time"

// Retention (design section 7): a final record is kept for RetainExited,
// and at most MaxRetained of them, the earliest to become final dropped
// first. Dropping a record never forgets its process tree: the tree keeper
// holds it until it is seen empty (tree.go).

// prune drops records that retention says must go. It runs on access as
// well as from the reap timer, so memory stays bounded either way.
func (m *Manager) prune() {
	m.pruneAt(m.clock.Now("manager", "prune"))
}

// pruneAt drops expired and surplus final records.
func (m *Manager) pruneAt(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.finals) > 0 {
		oldest := m.finals[0]
		expired := !now.Before(oldest.finalAt().Add(m.opts.RetainExited))
		if !expired && len(m.finals) <= m.opts.MaxRetained {
			break
		}
		m.dropLocked(oldest)
	}
}

// dropLocked forgets p. Its process tree is not forgotten: the registry
// keeps it until it is seen empty, so that Close still stops it (I4). The
// caller must hold m.mu.
func (m *Manager) dropLocked(p *Process) {
	if m.records[p.info.ID] == p {
		delete(m.records, p.info.ID)
	}
	for i, f := range m.finals {
		if f == p {
			m.finals = append(m.finals[:i], m.finals[i+1:]...)
			break
		}
	}
}

// recordFinal is called once by the exit goroutine of p, after p's status
// is final and before Done closes: the running count and the retention list
// change at once. It returns what must happen after Done closes: watching
// p's tree until it is empty (if finish could not settle it) and arming
// the reap timer.
func (m *Manager) recordFinal(p *Process) (after func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notFinal--
	arm := false
	if m.records[p.info.ID] == p && !m.closed {
		m.finals = append(m.finals, p)
		arm = !m.reapArmed
		m.reapArmed = true
		for len(m.finals) > m.opts.MaxRetained {
			m.dropLocked(m.finals[0])
		}
	}
	return func() {
		if p.tree.alive() {
			m.watch(p.tree)
		}
		if arm {
			m.armReap(m.opts.RetainExited)
		}
	}
}

// watch waits, in a goroutine of its own, until t (whose record is final
// but which has live members, such as a background child) is empty, and
// then settles it. The goroutine ends when t is empty or Close begins;
// Close waits for it.
func (m *Manager) watch(t *tree) {
	if !m.enter() {
		return // Close stops t
	}
	go func() {
		defer m.background.Done()
		t.sys.waitEmpty(m.stopCtx)
		m.trees.settle([]*tree{t})
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
	next := m.finals[0].finalAt().Add(m.opts.RetainExited).Sub(now)
	m.mu.Unlock()
	m.armReap(next)
}
