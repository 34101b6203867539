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

// watchdogScript reads "+ PGID" (a group to kill) and "- PGID" (a group
// seen empty) lines, or "q" (Close), until end-of-file. $1 is the
// Manager's cgroup, or empty in group mode.
const watchdogScript = `cg=$1
groups=' '
while IFS= read -r line; do
	case $line in
	q) exit 0 ;;
	'+ '*) groups="$groups${line#+ } " ;;
	'- '*) id=${line#- }; groups="${groups%% $id *} ${groups#* $id }" ;;
	esac
done
if [ -n "$cg" ]; then
	echo 1 >"$cg/cgroup.kill" 2>/dev/null
	for f in "$cg"/*/cgroup.procs; do
		for p in $(cat "$f" 2>/dev/null); do kill -s KILL "$p" 2>/dev/null; done
	done
fi
for g in $groups; do kill -s KILL -- "-$g" 2>/dev/null; done
`

// watchdog is a Manager's host-death guard. Its methods are safe for
// concurrent use.
type watchdog struct {
	cmd *exec.Cmd
	// pidfd tells whether the watchdog exited without waking it; nil
	// where pidfds are missing.
	pidfd *os.File

	// mu guards w; a leaf lock, held for one small write.
	mu sync.Mutex
	w  *os.File // nil once closed
}

// startWatchdog starts the watchdog; cgroupDir is the Manager's cgroup, or
// "" when its trees are process groups.
func startWatchdog(cgroupDir string) (*watchdog, error) {
	r, w, err := os.Pipe() // both ends close-on-exec
	if err != nil {
		return nil, xerrors.Errorf("host-death watchdog: %w", err)
	}
	defer r.Close()
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, "proc-watchdog", cgroupDir)
	cmd.Stdin = r // its only descriptor besides /dev/null
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		_ = w.Close()
		return nil, xerrors.Errorf("host-death watchdog: %w", err)
	}
	return &watchdog{cmd: cmd, w: w, pidfd: openPidfd(cmd.Process.Pid)}, nil
}

// send writes one line, at once or not at all: a watchdog that is gone
// (killed from outside) or stuck (stopped, its pipe full) makes it fail,
// and the Manager starts a new one (containment).
func (d *watchdog) send(line string) error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.w == nil {
		return nil
	}
	if err := writeOnce(d.w, []byte(line+"\n")); err != nil {
		return xerrors.Errorf("host-death watchdog: %w", err)
	}
	return nil
}

// lost reports whether the watchdog is gone (killed from outside) or
// stuck (its pipe full). On Linux a pidfd answers without waking the
// watchdog; elsewhere a line it ignores is written.
func (d *watchdog) lost() bool {
	if d.pidfd != nil {
		return pidfdExited(d.pidfd)
	}
	return d.send(".") != nil
}

// guard registers the process group pgid.
func (d *watchdog) guard(pgid int) error { return d.send("+ " + strconv.Itoa(pgid)) }

// forget unregisters pgid once it was seen without a live member: its ID
// may name another group later.
func (d *watchdog) forget(pgid int) { _ = d.send("- " + strconv.Itoa(pgid)) }

// abandon ends a watchdog that stopped reading, and reaps it.
func (d *watchdog) abandon() {
	d.mu.Lock()
	_ = d.w.Close()
	d.w = nil
	d.mu.Unlock()
	_ = d.cmd.Process.Kill()
	_ = d.cmd.Wait()
	d.closePidfd()
}

func (d *watchdog) closePidfd() {
	if d.pidfd != nil {
		_ = d.pidfd.Close()
	}
}

// close tells the watchdog to exit without killing anything, and reaps it.
func (d *watchdog) close() {
	if d == nil {
		return
	}
	_ = d.send("q")
	d.mu.Lock()
	_ = d.w.Close()
	d.w = nil
	d.mu.Unlock()
	_ = d.cmd.Wait()
	d.closePidfd()
}
