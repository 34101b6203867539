//go:build linux && !proc_otherunix

package proc

import (
	"testing"
)

// TestParseCgroupName pins which names a Manager takes for another
// Manager's cgroup: only its own pattern, never anything else.
func TestParseCgroupName(t *testing.T) {
	t.Parallel()
	for name, ok := range map[string]bool{
		"procvisor-4026531836-123-4567-1":      true,
		"procvisor-keep-4026531836-123-4567-1": false, // kept: never parsed as a candidate
		"procvisor-123-4567-1":                 false, // no PID namespace
		"procvisor-4026531836-abc-4567-1":      false,
		"procvisor-4026531836-123-4567-1-x":    false,
		"system.slice":                         false,
		"":                                     false,
	} {
		ns, pid, start, got := parseCgroupName(name)
		if got != ok {
			t.Errorf("parseCgroupName(%q) = %s, %d, %q, %v; want ok %v", name, ns, pid, start, got, ok)
		}
		if got && (ns != "4026531836" || pid != 123 || start != "4567") {
			t.Errorf("parseCgroupName(%q) = %s, %d, %q; want 4026531836, 123, 4567", name, ns, pid, start)
		}
	}
}
