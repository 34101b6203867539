//go:build linux && !proc_otherunix

package proc

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/procvisor/proc/internal/procfs"
	"golang.org/x/sys/unix"
)

// Activity on Linux, from /proc alone (internal/procfs reads it). A member
// waits for input when one of its threads is blocked waiting to read the
// stdin pipe or the terminal the record was given (inputID); listeners are
// the listening sockets the members hold.

const activitySupported = true

// inputID tells the stdin pipe or terminal proc gave a record from any
// other file: a member waits for input only when it waits on one of these.
// It is set once, at launch, and never changes. The zero value is a record
// with neither.
type inputID struct {
	pipeIno uint64 // the stdin pipe's inode; 0 without Stdin (or with TTY)
	tty     string // the terminal's slave, "/dev/pts/N"; "" without TTY
	ttyIno  uint64 // the slave's inode in its devpts
	ttyDev  uint64 // the slave's device number (as /proc/PID/stat's tty_nr)
}

// files is what procfs looks for a member waiting to read.
func (in inputID) files() procfs.Files {
	return procfs.Files{PipeIno: in.pipeIno, TTY: in.tty, TTYIno: in.ttyIno, TTYDev: in.ttyDev}
}

// inputOf identifies the child's end of its stdin: a pipe, or the slave of
// its terminal. Anything else (or an error) identifies nothing.
func inputOf(f *os.File) inputID {
	fi, err := f.Stat()
	if err != nil {
		return inputID{}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !ok:
		return inputID{}
	case fi.Mode()&os.ModeNamedPipe != 0:
		return inputID{pipeIno: uint64(st.Ino)}
	case fi.Mode()&os.ModeCharDevice != 0 && strings.HasPrefix(f.Name(), "/dev/pts/"):
		// creack/pty names the slave by its path, as /proc/PID/fd links
		// read it.
		return inputID{tty: f.Name(), ttyIno: uint64(st.Ino), ttyDev: uint64(st.Rdev)}
	}
	return inputID{}
}

// inputPending reports whether the stdin pipe whose write end is w holds
// bytes nobody has read yet. FIONREAD (TIOCINQ in x/sys/unix) counts the
// pipe's contents from either end. A closed w holds nothing of ours any
// more.
func inputPending(w *os.File) bool {
	rc, err := w.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	if rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }) != nil {
		return false
	}
	return n > 0
}

// activityLooks is what the looks at a record's tree keep from one look
// to the next: a procfs.Tracker, which reads again only the members that
// ran since the last look. It is closed when the record becomes final (a
// look after that reads afresh and keeps nothing). Its methods are safe
// for concurrent use; looks take turns.
type activityLooks struct {
	mu     sync.Mutex
	t      procfs.Tracker
	group  groupListing // in group mode
	closed bool         // t was closed; guarded by mu
	// dropped is set by close; whoever holds mu then closes t when it
	// lets go.
	dropped atomic.Bool
}

// look reads the activity of tree t, whose record was given in; the
// listeners only if listeners is set; sparsely for a poller (see
// procfs.Tracker.Begin). A member that is gone, or that the host may not
// trace, shows nothing. listed is false where the tree's members cannot
// be listed.
func (l *activityLooks) look(t *tree, in inputID, listeners, sparse bool) (_ Activity, listed bool) {
	l.mu.Lock()
	defer l.unlock()
	tr := &l.t
	if l.closed {
		tr = &procfs.Tracker{}
		defer tr.Close()
	}
	tr.Begin(sparse)
	var pids []int
	if !t.gone.Load() {
		if pids, listed = l.treeMembers(t, tr); !listed {
			return Activity{}, false
		}
	}
	a := Activity{Members: len(pids)}
	waiting, socks := tr.Look(pids, in.files(), listeners)
	a.WaitingForInput = waiting && !in.files().None()
	if listeners {
		a.Listeners = listenersOf(socks)
	}
	return a, true
}

// close closes what l holds, at once or, if a look is under way, when it
// ends: it never waits for a look (finish calls it).
func (l *activityLooks) close() {
	l.dropped.Store(true)
	if l.mu.TryLock() {
		l.closeDropped()
		l.mu.Unlock()
	}
}

// unlock lets go of l.mu, closing what l holds first once it was
// dropped. A close that found mu held set dropped before it looked: if
// this does not see it before letting go, it sees it after, and closes
// unless another look holds mu by then (whose unlock does).
func (l *activityLooks) unlock() {
	l.closeDropped()
	l.mu.Unlock()
	if l.dropped.Load() && l.mu.TryLock() {
		l.closeDropped()
		l.mu.Unlock()
	}
}

// closeDropped closes t if l was dropped and t is not closed yet; mu is
// held.
func (l *activityLooks) closeDropped() {
	if l.dropped.Load() && !l.closed {
		l.closed = true
		l.t.Close()
	}
}

// treeMembers lists the live members of t, as its mechanism does
// (treeSys.members); a process group's with the help of what l keeps.
func (l *activityLooks) treeMembers(t *tree, tr *procfs.Tracker) ([]int, bool) {
	if g, ok := t.sys.(*groupTree); ok {
		return l.group.members(g, tr)
	}
	return t.sys.members()
}

// groupListing is the last listing of a process group's members from
// /proc (groupTree.members), and whether it still stands while its
// members do.
type groupListing struct {
	pids    []int
	trusted bool
}

// members lists the live members of the process group g as
// groupTree.members does: one getpgid per process in /proc, and the stat
// line of those of the group, to leave out zombies. It differs in two
// ways, both from the kernel's rules, so that a look at an idle group
// reads nothing but its members' counters, however busy the host:
//
//   - A member whose last read by tr still stands has not run since, so
//     it is no zombie now: its stat line is not read.
//   - The last listing stands, and /proc is not read, while every member
//     in it still stands by tr, if every one of them already stood when
//     the listing was made (so none ran since before it was begun: a
//     process present throughout is listed), and the group's session had
//     no other process then. A process enters or leaves a group by a fork
//     from a member, by setpgid from its own session (itself, or its
//     parent before it runs a program), by setsid, or by dying: each is
//     done by a running process of the session, and a new process of the
//     session can only be forked from one.
func (c *groupListing) members(g *groupTree, tr *procfs.Tracker) (pids []int, ok bool) {
	if c.trusted && tr.AllKnown(c.pids) {
		return c.pids, true
	}
	c.pids, c.trusted = nil, false
	names, ok := procPIDs()
	var others []int
	sid, trusted := -1, true
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if pgid, err := unix.Getpgid(pid); err != nil || pgid != g.pgid {
			if err == nil {
				others = append(others, pid)
			}
			continue
		}
		if sid < 0 {
			if sid, err = unix.Getsid(pid); err != nil {
				sid = -1
			}
		}
		if state, known := tr.Known(pid); known {
			if state != 'Z' && state != 'X' {
				pids = append(pids, pid)
			}
			continue
		}
		trusted = false
		st, ok := procfs.ReadStat(pid)
		if ok && (st.State != 'Z' && st.State != 'X' || st.State == 'Z' && zombieLeaderLives(name)) {
			pids = append(pids, pid)
		}
	}
	if !ok || !trusted || sid < 0 {
		return pids, ok
	}
	for _, pid := range others {
		if s, err := unix.Getsid(pid); err == nil && s == sid {
			return pids, true
		}
	}
	c.pids, c.trusted = pids, true
	return pids, true
}

// listenersOf are the sockets as Activity reports them: sorted by port,
// then network, then address.
func listenersOf(socks []procfs.Socket) []Listener {
	if len(socks) == 0 {
		return nil
	}
	ls := make([]Listener, len(socks))
	for i, s := range socks {
		ls[i] = Listener{Network: s.Network, Address: s.Addr.String(), Port: int(s.Addr.Port()), PID: s.PID}
	}
	slices.SortFunc(ls, func(a, b Listener) int {
		if a.Port != b.Port {
			return a.Port - b.Port
		}
		if c := strings.Compare(a.Network, b.Network); c != 0 {
			return c
		}
		if c := strings.Compare(a.Address, b.Address); c != 0 {
			return c
		}
		return a.PID - b.PID
	})
	return ls
}
