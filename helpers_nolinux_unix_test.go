//go:build unix && (!linux || proc_otherunix)

package proc_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/procvisor/proc"
)

// The counterparts of helpers_linux_test.go where there is no cgroup v2
// and no pidfd.

// exitRaceTest marks t, a test that pins the exact decision of a race
// with the child's exit, parallel, and skips it where this backend cannot
// look at a child, stopped or a zombie, without reaping it
// (signal_look_other.go): there haltChild counts the child alive, so a
// deadline that meets its exit may be reported as timed out. macOS reads
// the process table, and Linux under the proc_otherunix tag reads /proc:
// both decide exactly.
func exitRaceTest(t *testing.T) {
	t.Helper()
	t.Parallel()
	if !proc.CanLookChild {
		t.Skip("this OS gives no look at a child without reaping it (signal_look_other.go): a race with the exit is not decided exactly")
	}
}

// backgroundIdle: without cgroups a Manager reads no file in the
// background.
func backgroundIdle(*proc.Manager) {}

// isRecordCgroupFile: there are no record cgroups here.
func isRecordCgroupFile(string) bool { return false }

// treeCgroupParent skips: cgroups are Linux only.
func treeCgroupParent(t testing.TB) string {
	t.Helper()
	t.Skip("cgroup v2 containment is Linux only")
	return ""
}

// treePidfd returns pid: there is no pidfd here.
func treePidfd(_ testing.TB, pid int) int { return pid }

// treeWaitPidfd waits until pid, the test's own child's child, is reaped:
// without pidfds this polls kill(pid, 0), bounded by ctx.
func treeWaitPidfd(ctx context.Context, t testing.TB, pid int, what string) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}
