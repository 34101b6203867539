//go:build linux && !proc_otherunix

package proc

import (
	"os"
	"slices"
	"strings"
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

// treeActivity reads the activity of the members pids of a tree whose
// record was given in; the listeners only if listeners is set. A member
// that is gone, or that the host may not trace, shows nothing.
func treeActivity(pids []int, in inputID, listeners bool) Activity {
	a := Activity{Members: len(pids)}
	var s procfs.Scanner
	if files := in.files(); !files.None() {
		for _, pid := range pids {
			if s.WaitsToRead(pid, files) {
				a.WaitingForInput = true
				break
			}
		}
	}
	if listeners {
		a.Listeners = listenersOf(s.Listeners(pids))
	}
	return a
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
