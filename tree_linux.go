//go:build linux && !proc_otherunix

package proc

import (
	"errors"
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
	// guarded: the child must die with the host until it is in its tree
	// (a group registered, or a sandboxed child moved into its cgroup)
	// with a watchdog: the pending mark covers it, and in group mode a
	// sandboxed child also the sandbox's exit-kill (exitKill).
	guarded bool
	// stopSandbox ends the host's service of a sandboxed tree's routed
	// calls (set by the sandbox's start); the tree calls it when released.
	stopSandbox func()
	// registered: the sandbox's restricted thread registered the held
	// child's group (registerHeld), in slot; started makes its tree
	// without writing again.
	registered bool
	slot       int64
}

// exitKill reports whether the sandbox must kill its held child with the
// host from the exec stop on (PTRACE_O_EXITKILL): a sandboxed child in
// group mode that must die with the host until its group is registered
// (setupTree). In cgroup mode the child enters its cgroup at its exec
// stop, where the exit-kill would begin, and from then on the Manager's
// cgroup, which the watchdog kills with the host, holds it. Only
// sandboxed starts ask.
func (s *treeSetup) exitKill() bool { return s.guarded && s.host == nil }

// registerHeld registers the group of the sandboxed child pid with the
// watchdog, in the slot of its pending mark: the sandbox calls it on the
// restricted thread while it holds the child at its exec stop, under the
// exit-kill (sandbox.Policy.Register), so that the thread need not wait
// for the caller's registration. It only writes into the watchdog's open
// file. Only where exitKill; the caller's goroutine waits meanwhile.
func (s *treeSetup) registerHeld(pid int) error {
	slot, err := s.guard.guard(pid, s.pending)
	if err != nil {
		return err
	}
	s.slot, s.registered = slot, true
	return nil
}

// setupTree prepares cmd for the tree the keeper decided on: a new
// session, and with host the record's cgroup, which the child is cloned
// into, with limits written into it before. It is mechanics only: the
// decision (treeKeeper.setup) was made before. sandboxed says the child
// is forked by the sandbox, on a thread that ends before the child is
// registered.
func setupTree(cmd *exec.Cmd, tty, sandboxed bool, host *cgroupHost, guard *watchdog, limits Limits) (*treeSetup, error) {
	setupSession(cmd, tty)
	switch {
	case host == nil && guard != nil:
		// The watchdog learns of the group only once the child runs
		// (started registers it); a host killed in that instant would
		// leave the child running. A pending mark covers the child from
		// before its fork (the watchdog kills the children of a start
		// still marked when the host died, see watchdogScript), and a
		// sandboxed one also the sandbox's exit-kill from its exec stop on
		// (exitKill). The group replaces the mark (started), or a failed
		// start blanks it. Not Pdeathsig: it fires when the thread that
		// forked the child ends, not the host (golang/go#27505), so it
		// would need a hop to a fresh goroutine on every start and still
		// kill a child whose forking thread a goroutine later locked and
		// ended; a sandboxed child's thread ends on purpose.
		s := &treeSetup{guard: guard, guarded: true, pending: -1}
		if err := s.markPending(sandboxed); err != nil {
			return nil, err
		}
		return s, nil
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
			// A spare removed from outside has no limit files either,
			// which is no missing controller: launch tries another.
			gone := removed(rc.dir)
			host.discard(rc)
			if gone {
				return nil, xerrors.Errorf("start: %w", &cgroupGoneError{err})
			}
			return nil, err
		}
	}
	cmd.SysProcAttr.UseCgroupFD = true
	cmd.SysProcAttr.CgroupFD = rc.dirFD
	s := &treeSetup{host: host, rc: rc, limited: !limits.IsZero(), pending: -1}
	if sandboxed && guard != nil {
		// The sandbox forks the child outside its cgroup and moves it in
		// at its exec stop (a sandboxed tree cannot clone into a cgroup):
		// until then the Manager's cgroup does not hold it, so a host
		// killed in that instant would leave it running. The pending mark
		// covers it until then (exitKill).
		s.guard, s.guarded = guard, true
		if err := s.markPending(true); err != nil {
			host.discard(rc)
			return nil, err
		}
	}
	return s, nil
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
	case s.host == nil && s.registered:
		t := newGroupTree(cmd.Process.Pid, owner, s.guard, s.slot)
		t.stopSandbox = s.stopSandbox
		return t, nil
	case s.host == nil:
		t, err := newGroupTreeGuarded(cmd.Process.Pid, owner, s.guard, s.pending)
		if t != nil {
			t.stopSandbox = s.stopSandbox
		}
		return t, err
	case s.pending >= 0:
		// In its cgroup now (or never started): the mark goes.
		s.guard.forget(s.pending)
		s.pending = -1
		return s.started(cmd, owner)
	case cmd.Process == nil && s.limited:
		s.host.discard(s.rc)
		return nil, nil
	case cmd.Process == nil:
		// Nothing runs in it: a failed exec's child is reaped already.
		s.host.refused(s.rc)
		return nil, nil
	}
	// The child is in its cgroup. The tree keeps the directory open only
	// while few others do (holdDir); else it is closed at once, and the
	// tree's files are opened relative to the Manager's cgroup (see
	// recordCgroup).
	d := cgroup2.Dir{Path: s.rc.dir, Rel: s.rc.rel, At: s.rc.dirFD}
	held := s.host.holdDir()
	if !held {
		s.rc.closeDir()
		s.host.fdMu.RLock()
		d.At, d.Name = s.host.d.At, s.rc.name
		s.host.fdMu.RUnlock()
	}
	c := &cgroupTree{host: s.host, rc: s.rc, d: d, heldDir: held, limited: s.limited, base: s.rc.base,
		leader: cmd.Process, pid: cmd.Process.Pid}
	return &tree{sys: c, kind: string(ContainCgroup), owner: owner, stopSandbox: s.stopSandbox}, nil
}

// cgroupGone reports whether a start that failed with err failed because
// its cgroup was removed from outside: a spare an outsider removed after
// it was made (rmdir needs it empty, and so it is until a start). The
// clone into a removed cgroup fails with ENOENT, as an exec of a missing
// program does, so the cgroup is looked up by path; only a failed start
// pays.
func (s *treeSetup) cgroupGone(err error) bool {
	if s.host == nil || !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENODEV) {
		return false
	}
	return removed(s.rc.dir)
}

// removed reports whether the directory dir is gone.
func removed(dir string) bool {
	var st unix.Stat_t
	return errors.Is(unix.Lstat(dir, &st), unix.ENOENT)
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
