//go:build linux

package proc

import (
	"os"
	"os/exec"

	"github.com/procvisor/proc/internal/cgroup2"
	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// treeSetup is one child prepared to start inside a new tree; started
// makes the tree once the child is forked.
type treeSetup struct {
	host    *cgroupHost   // nil in group mode
	rc      *recordCgroup // the record's cgroup
	limited bool          // limits were written into it
	guard   *watchdog     // group mode: registers the group
	// pending is the slot of the start's pending mark (markPending), -1
	// if none; the group is registered into it.
	pending int64
	// deathsig: the child has Pdeathsig set (see pdeathsig).
	deathsig bool
}

// pdeathsig reports whether the child has Pdeathsig set. It fires when the
// thread that forked the child exits, so the fork site (forkOn) forks it
// on a fresh goroutine (see forkOnFreshGoroutine).
func (s *treeSetup) pdeathsig() bool { return s.deathsig }

// setupTree prepares cmd for the tree the keeper decided on: a new
// session, and with host the record's cgroup, which the child is cloned
// into, with limits written into it before. It is mechanics only: the
// decision (treeKeeper.setup) was made before.
func setupTree(cmd *exec.Cmd, tty bool, host *cgroupHost, guard *watchdog, limits Limits) (*treeSetup, error) {
	setupSession(cmd, tty)
	switch {
	case host == nil && guard != nil:
		// The watchdog learns of the group only once Start returned; a
		// host killed in that instant would leave the child running. The
		// kernel kills it then instead (see pdeathsig).
		cmd.SysProcAttr.Pdeathsig = unix.SIGKILL
		return &treeSetup{guard: guard, deathsig: true, pending: -1}, nil
	case host == nil:
		return &treeSetup{pending: -1}, nil
	}
	rc, err := host.take()
	if err != nil {
		return nil, xerrors.Errorf("cgroup: %w", err)
	}
	if !limits.IsZero() {
		if err := host.limit(rc.dir, limits); err != nil {
			// Never given back: a later record must not inherit limits.
			host.discard(rc)
			return nil, err
		}
	}
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = rc.dirFD
	return &treeSetup{host: host, rc: rc, limited: !limits.IsZero()}, nil
}

// started makes the tree of the child cmd started, or, if it did not
// start (cmd.Process is nil), gives back what setupTree took.
func (s *treeSetup) started(cmd *exec.Cmd, owner string) (*tree, error) {
	switch {
	case s.host == nil && cmd.Process == nil:
		if s.pending >= 0 {
			s.guard.forget(s.pending)
		}
		return nil, nil
	case s.host == nil:
		return newGroupTreeGuarded(cmd.Process.Pid, owner, s.guard, s.pending)
	case cmd.Process == nil && s.limited:
		s.host.discard(s.rc)
		return nil, nil
	case cmd.Process == nil:
		// Nothing runs in it: a failed exec's child is reaped already.
		s.host.refused(s.rc)
		return nil, nil
	}
	// The directory stays open until release: the tree's files are
	// opened relative to it.
	c := &cgroupTree{host: s.host, rc: s.rc, limited: s.limited, events: s.rc.events, base: s.rc.base,
		leader: cmd.Process, pid: cmd.Process.Pid,
		d: cgroup2.Dir{Path: s.rc.dir, Rel: s.host.rel + "/" + s.rc.name, At: s.rc.dirFD}}
	return &tree{sys: c, kind: string(ContainCgroup), owner: owner}, nil
}

// anonFile returns a read-write file with no name: a memfd, which needs no
// writable directory.
func anonFile(name string) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, xerrors.Errorf("memfd_create: %w", err)
	}
	return os.NewFile(uintptr(fd), name), nil
}
