//go:build unix

package proc

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/xerrors"
)

// The host-death watchdog (design section 14). Unless KeepOnHostExit is
// set, a Manager starts one small process with its first Start: /bin/sh
// running watchdogScript, in a session of its own, reading a pipe whose
// only write end the host holds (close-on-exec, so no child inherits it).
// When the host dies without Close, the kernel closes that end, the
// watchdog reads end-of-file and kills what the host registered: the
// Manager's whole cgroup (escapees included), and every process group the
// host registered and had not yet seen empty, so that a recycled group ID
// is never killed. Close tells it to exit ("q") and reaps it.
//
// The registered groups are not sent down the pipe, which would wake the
// watchdog twice per start: the host writes them into slots of a file
// that only the two of them hold (anonFile), and the watchdog reads it
// once, after end-of-file. A slot is slotSize bytes, a group ID padded
// with blanks or only blanks, and never crosses a page: one pwrite writes
// it whole, so a host killed in the middle of one leaves no torn ID.

// watchdogScript reads the pipe until "q" (Close) or end-of-file (the
// host died); "." lines (liveness checks) are ignored. $1 is the
// Manager's cgroup, or empty in group mode; descriptor 3 is the groups
// file, read from its start.
const watchdogScript = `cg=$1
while IFS= read -r line; do
	[ "$line" = q ] && exit 0
done
if [ -n "$cg" ]; then
	echo 1 >"$cg/cgroup.kill" 2>/dev/null
	for f in "$cg"/*/cgroup.procs; do
		for p in $(cat "$f" 2>/dev/null); do kill -s KILL "$p" 2>/dev/null; done
	done
fi
while read -r g; do
	[ -n "$g" ] && kill -s KILL -- "-$g" 2>/dev/null
done <&3
`

// slotSize is the size of a slot in the groups file: room for any group
// ID, and a divisor of every page size.
const slotSize = 16

// watchdog is a Manager's host-death guard. Its methods are safe for
// concurrent use.
type watchdog struct {
	cmd *exec.Cmd
	// pidfd tells whether the watchdog exited without waking it; nil
	// where pidfds are missing.
	pidfd *os.File

	// mu guards the fields below; a leaf lock, held for one small write.
	mu     sync.Mutex
	w      *os.File       // the pipe; nil once closed
	groups *os.File       // the groups file; nil once closed, with w
	used   map[int64]bool // the slots that hold a group (by offset)
	free   []int64        // blank slots
	end    int64          // the file's size
	// broken is set when a slot could not be written: the file may list a
	// group it should not, so lost reports true and the Manager replaces
	// the watchdog (the new one learns the live groups afresh).
	broken bool
}

// startWatchdog starts the watchdog; cgroupDir is the Manager's cgroup, or
// "" when its trees are process groups.
func startWatchdog(cgroupDir string) (*watchdog, error) {
	groups, err := anonFile("proc-watchdog-groups")
	if err != nil {
		return nil, xerrors.Errorf("host-death watchdog: groups file: %w", err)
	}
	r, w, err := os.Pipe() // both ends close-on-exec
	if err != nil {
		_ = groups.Close()
		return nil, xerrors.Errorf("host-death watchdog: %w", err)
	}
	defer r.Close()
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, "proc-watchdog", cgroupDir)
	cmd.Stdin = r                       // the pipe
	cmd.ExtraFiles = []*os.File{groups} // descriptor 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		_ = w.Close()
		_ = groups.Close()
		return nil, xerrors.Errorf("host-death watchdog: %w", err)
	}
	return &watchdog{cmd: cmd, w: w, groups: groups, used: map[int64]bool{}, pidfd: openPidfd(cmd.Process.Pid)}, nil
}

// send writes one line, at once or not at all: a watchdog that is gone
// (killed from outside) or stuck (stopped, its pipe full) makes it fail,
// and the Manager starts a new one (treeKeeper.decide).
func (d *watchdog) send(line string) error {
	return d.locked(func() error {
		if err := writeOnce(d.w, []byte(line+"\n")); err != nil {
			return xerrors.Errorf("host-death watchdog: %w", err)
		}
		return nil
	})
}

// locked runs f under d.mu, unless there is no watchdog or it was closed.
func (d *watchdog) locked(f func() error) error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.w == nil {
		return nil
	}
	return f()
}

// lost reports whether the watchdog is gone (killed from outside), stuck
// (its pipe full) or broken. On Linux a pidfd answers without waking the
// watchdog; elsewhere a line it ignores is written.
func (d *watchdog) lost() bool {
	d.mu.Lock()
	broken := d.broken
	d.mu.Unlock()
	if broken {
		return true
	}
	if d.pidfd != nil {
		return pidfdExited(d.pidfd)
	}
	return d.send(".") != nil
}

// guard registers the process group pgid: the watchdog kills it if the
// host dies before forget. It returns the slot, which the caller hands to
// forget: a group ID may be registered twice (its group went unseen and
// the ID named a new one), and each registration has a slot of its own.
// The slot is -1 when there is no watchdog or it was closed.
func (d *watchdog) guard(pgid int) (int64, error) {
	off := int64(-1)
	err := d.locked(func() error {
		at := d.end
		if n := len(d.free); n > 0 {
			at = d.free[n-1]
		}
		if _, err := d.groups.WriteAt(slot(pgid), at); err != nil {
			d.broken = true
			return xerrors.Errorf("host-death watchdog: register group %d: %w", pgid, err)
		}
		if at == d.end {
			d.end += slotSize
		} else {
			d.free = d.free[:len(d.free)-1]
		}
		d.used[at] = true
		off = at
		return nil
	})
	return off, err
}

// forget unregisters the group of the slot off (from guard) once it was
// seen without a live member: its ID may name another group later.
func (d *watchdog) forget(off int64) {
	_ = d.locked(func() error {
		if !d.used[off] {
			return nil
		}
		delete(d.used, off)
		// A slot that could not be blanked may still name the group.
		if _, err := d.groups.WriteAt(slot(0), off); err != nil {
			d.broken = true
			return nil
		}
		d.free = append(d.free, off)
		return nil
	})
}

// slot is the content of a slot: pgid, or blanks for 0.
func slot(pgid int) []byte {
	b := bytes.Repeat([]byte{' '}, slotSize)
	b[slotSize-1] = '\n'
	if pgid != 0 {
		id := strconv.Itoa(pgid)
		copy(b[slotSize-1-len(id):], id)
	}
	return b
}

// abandon ends a watchdog that is lost (gone, stuck or broken), and
// reaps it.
func (d *watchdog) abandon() { d.finish(true) }

// close tells the watchdog to exit without killing anything, and reaps it.
func (d *watchdog) close() {
	if d == nil {
		return
	}
	_ = d.send("q")
	d.finish(false)
}

// finish ends the watchdog and closes the host's ends. Killed, it is
// reaped before its pipe closes: a live one (broken) would otherwise read
// end-of-file and kill every group the host registered.
func (d *watchdog) finish(kill bool) {
	if kill {
		_ = d.cmd.Process.Kill()
		_ = d.cmd.Wait()
	}
	d.mu.Lock()
	_ = d.w.Close()
	d.w = nil
	_ = d.groups.Close()
	d.groups = nil
	d.mu.Unlock()
	if !kill {
		_ = d.cmd.Wait()
	}
	if d.pidfd != nil {
		_ = d.pidfd.Close()
	}
}
