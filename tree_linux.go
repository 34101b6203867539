//go:build linux

package proc

import (
	"os/exec"
	"path/filepath"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// treeSetup prepares one child to start inside a new tree, and makes the
// tree once it started.
type treeSetup struct {
	host    *cgroupHost // nil in group mode
	dir     string      // the record's cgroup
	fd      int         // open on dir while the child starts
	limited bool        // limits were written into dir
	guard   *watchdog   // group mode: registers the group
}

// setupTree prepares cmd: a new session, and with cgroups the record's
// cgroup, which the child is cloned into.
func (m *Manager) setupTree(cmd *exec.Cmd, tty bool, limits Limits) (*treeSetup, error) {
	setupSession(cmd, tty)
	host, guard, err := m.containment()
	switch {
	case err != nil:
		return nil, err
	case host == nil && !limits.IsZero():
		return nil, m.limitsUnsupported(limits)
	case host == nil:
		return &treeSetup{fd: -1, guard: guard}, nil
	}
	dir, err := host.take()
	if err != nil {
		return nil, xerrors.Errorf("cgroup: %w", err)
	}
	if !limits.IsZero() {
		if err := host.limit(dir, limits); err != nil {
			// Never given back: a later record must not inherit limits.
			removeCgroup(dir)
			return nil, err
		}
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		removeCgroup(dir)
		return nil, xerrors.Errorf("open cgroup: %w", err)
	}
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = fd
	return &treeSetup{host: host, dir: dir, fd: fd, limited: !limits.IsZero()}, nil
}

// started makes the tree of the child cmd started, or, if it did not
// start (cmd.Process is nil), gives back what setupTree took.
func (s *treeSetup) started(cmd *exec.Cmd, owner string) (*tree, error) {
	if s.fd >= 0 {
		_ = unix.Close(s.fd)
	}
	switch {
	case cmd.Process == nil:
		switch {
		case s.host == nil:
		case s.limited:
			removeCgroup(s.dir)
		default:
			// Nothing runs in it: a failed exec's child is reaped already.
			s.host.giveBack(s.dir)
		}
		return nil, nil
	case s.host == nil:
		return newGroupTreeGuarded(cmd.Process.Pid, owner, s.guard)
	}
	c := &cgroupTree{host: s.host, dir: s.dir, rel: filepath.Join(s.host.rel, filepath.Base(s.dir))}
	return &tree{sys: c, kind: string(ContainCgroup), owner: owner}, nil
}
