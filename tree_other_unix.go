//go:build unix && (!linux || proc_otherunix)

package proc

import (
	"context"
	"os"
	"os/exec"
	"time"
)

// treeSetup: every child leads a new session.
type treeSetup struct{ guard *watchdog }

// cgroupGone: there are no cgroups here.
func (*treeSetup) cgroupGone(error) bool { return false }

// setupTree makes the child lead a new session; host is always nil here.
func setupTree(cmd *exec.Cmd, tty, _ bool, _ *cgroupHost, guard *watchdog, _ Limits) (*treeSetup, error) {
	setupSession(cmd, tty)
	return &treeSetup{guard: guard}, nil
}

// started makes the tree of the child cmd started: its process group,
// registered with the watchdog.
func (s *treeSetup) started(cmd *exec.Cmd, owner string) (*tree, error) {
	if cmd.Process == nil {
		return nil, nil
	}
	return newGroupTreeGuarded(cmd.Process.Pid, owner, s.guard, -1)
}

// waitPIDs: without /proc or pidfds there is nothing to wait on; pause for
// a moment before the caller looks again. The pause is the OS's polling
// interval, not a policy, so it is not a clock timer.
func waitPIDs(ctx context.Context, _ []int) {
	t := time.NewTimer(50 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// anonFile returns a read-write file with no name: a temporary file,
// removed at once.
func anonFile(name string) (*os.File, error) {
	f, err := os.CreateTemp("", name+"-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}
