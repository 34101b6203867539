//go:build unix && (!linux || proc_otherunix)

package proc_test

import (
	"testing"

	"github.com/procvisor/proc"
)

// TestTreeCgroupUnsupported pins that ContainCgroup is ErrUnsupported
// where there are no cgroups.
func TestTreeCgroupUnsupported(t *testing.T) {
	t.Parallel()
	m := newManager(t, proc.Options{Containment: proc.ContainCgroup})
	_, err := m.Start(proc.StartRequest{Command: "true"})
	mgrCheckErr(t, "Start with ContainCgroup", err, proc.ErrUnsupported)
}
