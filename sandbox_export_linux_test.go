//go:build linux && !proc_otherunix

package proc

import (
	"errors"

	"github.com/procvisor/proc/internal/sandbox"
)

// SetSandboxSteps replaces the steps of m's sandbox probe, before its
// first sandboxed start: a test plays a kernel without a feature.
func SetSandboxSteps(m *Manager, steps sandbox.Steps) { m.sandbox.steps = steps }

// MarkPendingStart writes a pending mark of ticks (clock ticks since boot,
// as in /proc/<pid>/stat) into the groups file of m's watchdog, as a
// sandboxed start in group mode does before its fork: a host test plays
// a host killed while such a start is under way.
func MarkPendingStart(m *Manager, ticks int64) error { return markPendingStart(m, ticks, true) }

// MarkPendingPlainStart is MarkPendingStart for a start that is not
// sandboxed.
func MarkPendingPlainStart(m *Manager, ticks int64) error { return markPendingStart(m, ticks, false) }

func markPendingStart(m *Manager, ticks int64, sandboxed bool) error {
	m.trees.contain.mu.Lock()
	guard := m.trees.contain.guard
	m.trees.contain.mu.Unlock()
	if guard == nil {
		return errors.New("no watchdog yet")
	}
	_, err := guard.mark(ticks, sandboxed)
	return err
}

// BreakWatchdogFile closes the host's end of the groups file of m's
// watchdog, under the watchdog's lock (a write under way ends first):
// every later write to it fails, as on a host out of memory.
func BreakWatchdogFile(m *Manager) {
	m.trees.contain.mu.Lock()
	guard := m.trees.contain.guard
	m.trees.contain.mu.Unlock()
	guard.mu.Lock()
	_ = guard.groups.Close()
	guard.mu.Unlock()
}
