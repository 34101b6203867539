package proc

// SetFinalStepHook makes hook run in every final step of m's records,
// between the append of the final event and the close of Done. It gets
// the record, the events the log holds then (as Events(0, 0) returns
// them), whether Done was closed already, and whether the step held the
// log's lock (so that no reader could see the one without the other).
// Set it before m's first Start.
func SetFinalStepHook(m *Manager, hook func(p *Process, evs []Event, doneClosed, locked bool)) {
	l := &m.events
	l.finalHook = func(p *Process) {
		locked := !l.mu.TryLock()
		evs, _, _ := l.readLocked(0, 0, nil)
		if !locked {
			l.mu.Unlock()
		}
		hook(p, evs, p.isFinal(), locked)
	}
}
