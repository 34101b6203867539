//go:build unix

package proc

import (
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
// with blanks, a pending mark, or only blanks, and never crosses a page:
// one pwrite writes it whole, so a host killed in the middle of one leaves
// no torn ID.
//
// A pending mark ("w" or "p" and a time) covers a start in group mode
// from before its fork until its group is registered (Linux, the only
// place marks are written; see watchdog_linux.go): the host learns the
// child's PID only after its exec. The host writes the mark into a slot
// before the fork and overwrites the same slot with the group ID once it
// has one, or blanks it if the start failed: one write more than an
// unmarked start. After end-of-file, a mark makes the watchdog sweep for
// the children of unfinished starts (watchdogScript says how, and what
// it relies on). A "w" mark is a sandboxed start's, whose child has
// no-new-privileges (set on the restricted thread that forks it, design
// section 17); a "p" mark any other's.

// watchdogScript reads the pipe until "q" (Close) or end-of-file (the
// host died); "." lines (liveness checks) are ignored. $1 is the
// Manager's cgroup, or empty in group mode; descriptor 3 is the groups
// file, read from its start. It is POSIX sh (dash runs it).
//
// After end-of-file it notes the time (end: now, called in a command
// substitution, is the start time in /proc/<pid>/stat of the subshell it
// forks: the clock and unit of every process's start time, where
// /proc/uptime may be a container's own, as with lxcfs; "" without /proc),
// kills the cgroup and every registered group, removes the Manager's
// cgroup directories (rmcg: each record's, then the Manager's own) once
// their killed members are gone (rmdir fails while a cgroup is
// populated: it tries again every 50 ms, for 2 s at most (every second,
// twice, where sleep takes whole seconds only), then leaves
// them to the next Manager's sweep of leftovers on that parent), and, if
// the file holds pending marks ("w<ticks>", since: the earliest;
// "p<ticks>", plain: the earliest), kills the children of the unfinished
// starts. It relies on these kernel facts, for each such child C:
//   - C was forked after its mark's time was read (floored to the tick),
//     and before the host died, which was before end.
//   - Until its exec, C holds a copy of the host's descriptor table (Go
//     forks without CLONE_FILES), the pipe's write end included: the
//     watchdog reads end-of-file only once C has exec'd or died. By then
//     C leads a session of its own (Go's child calls setsid before its
//     exec; a session leader stays one), and a sandboxed C has
//     no-new-privileges (set on the restricted thread, inherited, never
//     cleared).
//   - C, a child of the host like the watchdog, is reparented to the
//     same process (the reaper: the nearest child subreaper above the
//     host, else PID 1). End-of-file may come before that (the host's
//     descriptors close before its children are handed over), so the
//     sweep first waits, a second at most, until the watchdog's own
//     parent is no longer the host; once that happened no host thread is
//     left for C to move to, so C is among the children of the host's
//     threads or, later, of the reaper's (read in that order; where the
//     kernel has no /proc/<pid>/task/<tid>/children, every process).
//   - The kernel lists a task's children in that file by position, and
//     looks each one up afresh by its index (sh reads a byte at a time):
//     a child removed (reaped) before the position read so far shifts
//     the rest, and the read skips one entry for each, wherever it is (a
//     reaper busy reaping the trees it was handed, PID 1 in a loaded
//     test run, made the sweep miss children of unfinished starts).
//     Lists only grow at their end, so a read is complete (every process
//     that was a child throughout it is listed) if nothing it listed was
//     removed: each listed process must still exist once all the lists
//     are read, or they are read again; after three tries the sweep reads
//     every process's stat instead (/proc lists processes by PID, which
//     nothing shifts). A child moved from a host thread to the reaper
//     while read is in the reaper's list, read after.
//
// It then kills the group of every candidate with all of: PID = process
// group ID = session ID, parent the reaper or the host, the watchdog's
// own cgroups (/proc/<pid>/cgroup: in group mode the host's children
// stay in the host's cgroup, which the watchdog shares; a service or a
// container started elsewhere, or a record of a Manager in cgroup mode,
// is in another), and a start time within [plain, end] and no watchdog
// (argv[0] watchdogName: another Manager's, whose host died in the same
// instant, is a session leader whose parent is the reaper too, and
// killing it would leave its host's trees running), or within [since,
// end] with NoNewPrivs 1. stat is parsed after its last ')': the command
// name before it may hold blanks and parentheses.
//
// So no child of an unfinished start that stays in the host's cgroup
// survives the host. What the sweep cannot tell from one: a stranger
// with all of these, that is, a session leader in the host's cgroup
// whose parent is the same reaper and that started in those ticks (for a
// "w" mark only one with no-new-privileges): a process the reaper
// started there in the instant the host died, a daemon whose parent
// exited then, a child of another host that died then, or one the same
// host started then outside this Manager (a group-mode child of a
// KeepOnHostExit Manager, or its own os/exec child with Setsid); it is
// killed too. A child that names itself proc-watchdog (argv[0], matched
// as a prefix of the whole command line) is spared. Not found: a child of an unfinished start that left the
// host's cgroup before the sweep, or a grandchild it left when it exited
// (Pdeathsig missed that one too). The sweep runs only when a mark is
// left, that is when the host died while a start in group mode was under
// way, and looks only at the ticks from the earliest mark left (10 ms
// each) to the watchdog's end-of-file.
const watchdogScript = `cg=$1 host=$PPID
now() { read -r s 2>/dev/null </proc/self/stat && set -- ${s##*")"} && echo "${20}"; }
rmcg() {
	for d in "$1"/*/; do [ -d "$d" ] && rmcg "${d%/}"; done
	rmdir "$1" 2>/dev/null || [ ! -d "$1" ]
}
while IFS= read -r line; do
	[ "$line" = q ] && exit 0
done
end=$(now)
if [ -n "$cg" ]; then
	echo 1 >"$cg/cgroup.kill" 2>/dev/null
	for f in "$cg"/*/cgroup.procs; do
		for p in $(cat "$f" 2>/dev/null); do kill -s KILL "$p" 2>/dev/null; done
	done
fi
since= plain=
while read -r g; do
	case $g in
	w*) if [ -z "$since" ] || [ "${g#w}" -lt "$since" ]; then since=${g#w}; fi ;;
	p*) if [ -z "$plain" ] || [ "${g#p}" -lt "$plain" ]; then plain=${g#p}; fi ;;
	?*) kill -s KILL -- "-$g" 2>/dev/null ;;
	esac
done <&3
if [ -n "$cg" ]; then
	i=0
	until rmcg "$cg" || [ $i -ge 40 ]; do
		i=$((i + 1))
		sleep 0.05 2>/dev/null || { sleep 1 && i=$((i + 19)); }
	done
fi
[ -n "$since$plain" ] && [ -n "$end" ] || exit 0
reaper=
while read -r s 2>/dev/null </proc/$$/stat; do
	set -- ${s##*")"}
	if [ "$2" != "$host" ]; then reaper=$2; break; fi
	[ "$(now)" -gt $((end + 100)) ] && exit 0
done
[ -n "$reaper" ] || exit 0
pids= all=1 i=0
if [ -e /proc/$$/task/$$/children ]; then
	while [ -n "$all" ] && [ $i -lt 3 ]; do
		pids= all= i=$((i + 1))
		for f in /proc/$host/task/*/children /proc/$reaper/task/*/children; do
			l=
			read -r l 2>/dev/null <"$f"
			pids="$pids $l"
		done
		for p in $pids; do [ -e "/proc/$p" ] || { all=1; break; }; done
	done
fi
if [ -n "$all" ]; then
	pids=
	for d in /proc/[0-9]*; do pids="$pids ${d#/proc/}"; done
fi
cgof() { c=; while IFS= read -r l; do c="$c$l;"; done 2>/dev/null <"$1/cgroup"; echo "$c"; }
mycg=$(cgof /proc/$$)
for p in $pids; do
	d=/proc/$p
	[ "$p" != $$ ] && read -r s 2>/dev/null <"$d/stat" || continue
	set -- ${s##*")"}
	[ "$3" = "$p" ] && [ "$4" = "$p" ] || continue
	[ "$2" = "$reaper" ] || [ "$2" = "$host" ] || continue
	[ "${20}" -le "$end" ] || continue
	[ "$(cgof "$d")" = "$mycg" ] || continue
	if [ -n "$plain" ] && [ "${20}" -ge "$plain" ]; then
		c=
		read -r c 2>/dev/null <"$d/cmdline"
		case $c in proc-watchdog*) ;; *) kill -s KILL -- "-$p" 2>/dev/null ;; esac
		continue
	fi
	[ -n "$since" ] && [ "${20}" -ge "$since" ] || continue
	while read -r k v; do
		[ "$k" = NoNewPrivs: ] || continue
		[ "$v" = 1 ] && kill -s KILL -- "-$p" 2>/dev/null
		break
	done 2>/dev/null <"$d/status"
done
`

// watchdogName is the watchdog's argv[0] and $0.
const watchdogName = "proc-watchdog"

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
	w      *os.File // the pipe; nil once closed
	groups *os.File // the groups file; nil once closed, with w
	used   []bool   // the slots that hold a group or a mark, by offset/slotSize
	free   []int64  // blank slots
	end    int64    // the file's size
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
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, watchdogName, cgroupDir)
	cmd.Args[0] = watchdogName          // what ps shows, and what the sweep spares
	cmd.Stdin = r                       // the pipe
	cmd.ExtraFiles = []*os.File{groups} // descriptor 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		_ = w.Close()
		_ = groups.Close()
		return nil, xerrors.Errorf("host-death watchdog: %w", err)
	}
	return &watchdog{cmd: cmd, w: w, groups: groups, pidfd: openPidfd(cmd.Process.Pid)}, nil
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
// With pending (a slot from mark, else -1) the group takes that slot,
// replacing the mark in one write. The slot is -1 when there is no
// watchdog or it was closed.
func (d *watchdog) guard(pgid int, pending int64) (int64, error) {
	s := slot(pgid)
	off, err := d.write(s[:], pending)
	if err != nil {
		return -1, xerrors.Errorf("host-death watchdog: register group %d: %w", pgid, err)
	}
	return off, nil
}

// write writes b into the slot at (a slot in use), or into a free one
// if at is -1, and returns its offset; -1 if there is no watchdog or it
// was closed.
func (d *watchdog) write(b []byte, at int64) (int64, error) {
	off := int64(-1)
	err := d.locked(func() error {
		reuse := d.inUse(at)
		if !reuse {
			at = d.end
			if n := len(d.free); n > 0 {
				at = d.free[n-1]
			}
		}
		if _, err := d.groups.WriteAt(b, at); err != nil {
			d.broken = true
			return err
		}
		switch {
		case reuse:
		case at == d.end:
			d.end += slotSize
			d.used = append(d.used, false)
		default:
			d.free = d.free[:len(d.free)-1]
		}
		d.used[at/slotSize] = true
		off = at
		return nil
	})
	return off, err
}

// inUse reports whether the slot at off holds a group or a mark; d.mu
// is held.
func (d *watchdog) inUse(off int64) bool {
	return off >= 0 && off%slotSize == 0 && off/slotSize < int64(len(d.used)) && d.used[off/slotSize]
}

// forget unregisters the group of the slot off (from guard) once it was
// seen without a live member: its ID may name another group later; or it
// blanks a pending mark (from mark) whose start failed.
func (d *watchdog) forget(off int64) {
	_ = d.locked(func() error {
		if !d.inUse(off) {
			return nil
		}
		d.used[off/slotSize] = false
		// A slot that could not be blanked may still name the group.
		blank := slot(0)
		if _, err := d.groups.WriteAt(blank[:], off); err != nil {
			d.broken = true
			return nil
		}
		d.free = append(d.free, off)
		return nil
	})
}

// slot is the content of a slot: pgid, or blanks for 0.
func slot(pgid int) [slotSize]byte {
	if pgid == 0 {
		return slotOf(nil)
	}
	var digits [slotSize]byte
	return slotOf(strconv.AppendInt(digits[:0], int64(pgid), 10))
}

// slotOf is the content of a slot holding s (a group ID or a pending
// mark, at most slotSize-1 bytes), right-aligned in blanks before the
// newline; all blanks for an empty s. An array rather than a slice: slots
// are written on every start (a mark, a registration, a blank), and the
// writes keep no reference, so it stays on the stack.
func slotOf(s []byte) [slotSize]byte {
	var b [slotSize]byte
	for i := range slotSize - 1 {
		b[i] = ' '
	}
	b[slotSize-1] = '\n'
	copy(b[slotSize-1-len(s):], s)
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
