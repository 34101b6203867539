//go:build unix

package proc

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/procvisor/proc/internal/procfs"
	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// The group backend (Unix): every child leads a new session, and so its own
// process group, not attached to the host's terminal. With TTY the
// terminal becomes its controlling terminal.

// setupSession makes the child lead a new session (and process group).
// With a TTY, the terminal (the child's stdin) becomes its controlling
// terminal; without one it has none, so that opening /dev/tty fails at once
// instead of stopping the child with SIGTTIN when the host has a terminal.
func setupSession(cmd *exec.Cmd, tty bool) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	attr := cmd.SysProcAttr
	attr.Setsid = true
	attr.Setpgid = false
	attr.Setctty = tty
	attr.Ctty = 0
	attr.Noctty = false
	attr.Foreground = false
}

// limitsWithoutCgroup: a process group enforces no Limits.
const limitsWithoutCgroup = false

// unixSignal is the signal number of a portable Signal.
func unixSignal(sig Signal) unix.Signal {
	switch sig {
	case Interrupt:
		return unix.SIGINT
	case Terminate:
		return unix.SIGTERM
	}
	return unix.SIGKILL
}

// groupTree is a child's session and process group; its ID is the child's
// PID. A member that starts a session of its own leaves it.
//
// A group ID can name a new group once the old one is gone. POSIX keeps a
// PID from being reused while a process group of that ID exists; hence,
// once the leader is reaped, a process whose PID is the group ID is a
// newcomer, and the old group is gone. One case stays undecidable without
// watching every member: the old group dies unobserved, the PID wraps, and
// the newcomer that took it leaves members behind and exits; those members
// then pass for ours. The exit goroutine's check right after the reap
// (empty groups, the common case) and every later look shrink that window;
// the cgroup backend has no such case.
type groupTree struct {
	pgid int
	// gone is set once the group was seen without a live member.
	gone atomic.Bool
	// leaderReaped is set by the exit goroutine once cmd.Wait returned.
	leaderReaped atomic.Bool

	// mu guards guard and slot. Lock order: before watchdog.mu.
	mu    sync.Mutex
	guard *watchdog // nil: no host-death watchdog
	slot  int64     // the group's slot with guard; -1: none
}

// newGroupTreeGuarded makes the tree of the child pid, which leads its own
// session, and registers its group with the watchdog (if any), in the
// slot of the start's pending mark if there is one (pending, else -1).
func newGroupTreeGuarded(pid int, owner string, guard *watchdog, pending int64) (*tree, error) {
	slot, err := guard.guard(pid, pending)
	if err != nil {
		return nil, xerrors.Errorf("register with the host-death watchdog: %w", err)
	}
	return newGroupTree(pid, owner, guard, slot), nil
}

// newGroupTree makes the tree of the child pid, which leads its own
// session, registered with guard (if any) in slot (-1: not registered).
func newGroupTree(pid int, owner string, guard *watchdog, slot int64) *tree {
	g := &groupTree{pgid: pid, guard: guard, slot: slot}
	return &tree{sys: g, kind: string(ContainGroup), owner: owner}
}

// markGone records that the group has no live member, for good, and tells
// the watchdog to forget it: its ID may name another group later.
func (g *groupTree) markGone() {
	if g.gone.CompareAndSwap(false, true) {
		g.mu.Lock()
		guard, slot := g.guard, g.slot
		g.slot = -1
		g.mu.Unlock()
		if slot >= 0 {
			guard.forget(slot)
		}
	}
}

func (g *groupTree) signal(sig Signal) error {
	if g.leaderReaped.Load() && !g.alive() {
		// Never signal a group with no live member: its ID may be reused.
		return ErrNotRunning
	}
	err := unix.Kill(-g.pgid, unixSignal(sig))
	if errors.Is(err, unix.ESRCH) {
		g.markGone()
		return ErrNotRunning
	}
	if err == nil && sig != Kill {
		// A stopped member runs its handler only once continued.
		_ = unix.Kill(-g.pgid, unix.SIGCONT)
	}
	return err
}

// reaped records that the leader was reaped, and settles with one system
// call whether the group went with it (the common case), so that a later
// Signal on the final record never asks about an ID that may have been
// reused by then.
func (g *groupTree) reaped() {
	g.leaderReaped.Store(true)
	g.empty()
}

// empty reports whether kill(-pgid, 0) finds no member at all, not even a
// zombie, and then marks the group gone for good.
func (g *groupTree) empty() bool {
	if errors.Is(unix.Kill(-g.pgid, 0), unix.ESRCH) {
		g.markGone()
		return true
	}
	return false
}

// alive reports whether the group has a member that is not a zombie.
// kill(-pgid, 0) also succeeds for zombies, which PID 1 may reap late, so
// where /proc exists it is read instead.
func (g *groupTree) alive() bool {
	if g.gone.Load() || g.empty() {
		return false
	}
	if g.leaderReaped.Load() {
		// Our leader is reaped, so a process with its PID is a newcomer,
		// which the PID could only be given to once our group was gone:
		// the members kill(-pgid) found are another group's.
		if err := unix.Kill(g.pgid, 0); err == nil || errors.Is(err, unix.EPERM) {
			g.markGone()
			return false
		}
	}
	// A scan of /proc that finds only zombies settles it too: a group
	// never regains members, and the watchdog must forget it before the
	// zombies are reaped and the ID can name another group.
	if pids, ok := g.members(); ok {
		if len(pids) == 0 {
			g.markGone()
		}
		return len(pids) > 0
	}
	return true // kill(-pgid, 0) succeeded: members, perhaps only zombies
}

// members lists the live members of the group from /proc: one getpgid
// per process, and /proc/<pid>/stat only for those of the group (to leave
// out zombies). ok is false where there is no /proc.
func (g *groupTree) members() (pids []int, ok bool) {
	names, ok := procPIDs()
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if pgid, err := unix.Getpgid(pid); err != nil || pgid != g.pgid {
			continue
		}
		st, ok := procfs.ReadStat(pid)
		if ok && (st.State != 'Z' && st.State != 'X' || st.State == 'Z' && zombieLeaderLives(name)) {
			pids = append(pids, pid)
		}
	}
	return pids, ok
}

// procPIDs lists the entries of /proc; ok is false where there is none.
func procPIDs() (names []string, ok bool) {
	dir, err := os.Open("/proc")
	if err != nil {
		return nil, false
	}
	defer dir.Close()
	names, err = dir.Readdirnames(-1)
	return names, err == nil
}

// usage: the kernel accounts for no process group as a whole.
func (g *groupTree) usage() *TreeUsage { return nil }

// rewatch registers the group with a new watchdog, unless it is gone or
// registered with that one already. It holds g.mu throughout: a markGone
// that set gone before the check leaves it unregistered, and one that sets
// gone later waits for the slot and forgets it.
func (g *groupTree) rewatch(guard *watchdog) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.guard == guard && g.slot >= 0 {
		return // registered with it already
	}
	g.guard, g.slot = guard, -1
	if g.gone.Load() {
		return
	}
	if slot, err := guard.guard(g.pgid, -1); err == nil {
		g.slot = slot
	}
}

// release: a process group holds nothing; the watchdog forgets it.
func (g *groupTree) release() { g.markGone() }

// zombieLeaderLives reports whether a process whose stat says Z is still
// alive: /proc/<pid>/stat describes the main thread, which may have exited
// (pthread_exit) while other threads run on. Threads counts the whole
// group, the exited main thread included.
func zombieLeaderLives(pid string) bool {
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return false
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("Threads:")); ok {
			n, err := strconv.Atoi(string(bytes.TrimSpace(rest)))
			return err == nil && n > 1
		}
	}
	return false
}

// waitEmpty waits until the group has no live member or ctx ends: it
// waits for the exit of each member it finds (waitPIDs), then looks again,
// since a member may have started others meanwhile.
func (g *groupTree) waitEmpty(ctx context.Context) {
	for ctx.Err() == nil {
		if g.gone.Load() || g.empty() {
			return
		}
		pids, ok := g.members()
		if ok && len(pids) == 0 {
			g.markGone()
			return
		}
		// Without /proc (pids is nil) this is a short pause.
		waitPIDs(ctx, pids)
	}
}
