//go:build linux

package proc

import (
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// treeSetup prepares one child to start inside a new tree, and makes the
// tree once it started.
type treeSetup struct {
	host    *cgroupHost   // nil in group mode
	rc      *recordCgroup // the record's cgroup
	limited bool          // limits were written into it
	guard   *watchdog     // group mode: registers the group
	// deathsig: the child has Pdeathsig set, which fires when the thread
	// that forked it exits, so start forks on a thread that never does.
	deathsig bool
}

// start starts cmd. With Pdeathsig it forks on a new goroutine: that runs
// on a thread no goroutine is locked to, whereas the caller's thread may be
// locked and end with its goroutine (golang/go#27505), killing the child
// with it. Not covered: a pool thread that forked a child and that another
// goroutine later locks and returns from (so ending it). A goroutine locked
// to one thread for the Manager's life would cover that too; forking
// through it cost this process 110-180 us of CPU per start in a trial,
// against 20-35 us for this hop.
func (s *treeSetup) start(cmd *exec.Cmd) error {
	if !s.deathsig {
		return cmd.Start()
	}
	errc := make(chan error, 1) // buffered: the goroutine never blocks on it
	go func() { errc <- cmd.Start() }()
	return <-errc
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
	case host == nil && guard != nil:
		// The watchdog learns of the group only once Start returned; a
		// host killed in that instant would leave the child running. The
		// kernel kills it then instead (see start).
		cmd.SysProcAttr.Pdeathsig = unix.SIGKILL
		return &treeSetup{guard: guard, deathsig: true}, nil
	case host == nil:
		return &treeSetup{}, nil
	}
	rc, err := host.take()
	if err != nil {
		return nil, xerrors.Errorf("cgroup: %w", err)
	}
	if !limits.IsZero() {
		if err := host.limit(rc.dir, limits); err != nil {
			// Never given back: a later record must not inherit limits.
			rc.discard()
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
		return nil, nil
	case s.host == nil:
		return newGroupTreeGuarded(cmd.Process.Pid, owner, s.guard)
	case cmd.Process == nil && s.limited:
		s.rc.discard()
		return nil, nil
	case cmd.Process == nil:
		// Nothing runs in it: a failed exec's child is reaped already.
		s.host.giveBack(s.rc)
		return nil, nil
	}
	_ = unix.Close(s.rc.dirFD)
	s.rc.dirFD = -1
	c := &cgroupTree{host: s.host, rc: s.rc, dir: s.rc.dir, rel: filepath.Join(s.host.rel, filepath.Base(s.rc.dir))}
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
