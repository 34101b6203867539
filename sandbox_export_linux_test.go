//go:build linux

package proc

import "github.com/procvisor/proc/internal/sandbox"

// SetSandboxSteps replaces the steps of m's sandbox probe, before its
// first sandboxed start: a test plays a kernel without a feature.
func SetSandboxSteps(m *Manager, steps sandbox.Steps) { m.sandbox.steps = steps }
