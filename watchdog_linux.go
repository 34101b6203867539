//go:build linux && !proc_otherunix

package proc

import (
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// markPending covers a start in group mode with a pending mark in the
// watchdog's groups file (see watchdog_unix.go), from before its fork
// until started registers its group in the same slot (or blanks it if
// the start failed): sandboxed says which kind (mark). It costs one clock
// read (no system call: bootTicks) and one pwrite; the registration that
// replaces the mark writes nothing more than it would have.
func (s *treeSetup) markPending(sandboxed bool) error {
	ticks, err := bootTicks()
	if err != nil {
		return xerrors.Errorf("host-death watchdog: mark a start: %w", err)
	}
	// mark names the watchdog in its error itself.
	s.pending, err = s.guard.mark(ticks, sandboxed)
	return err
}

// mark writes a pending mark into a slot of its own, and returns the
// slot: the caller hands it to guard once the child's group is known, or
// to forget if the start failed. The mark is ticks (the clock ticks since
// boot of a time before the child's fork, see watchdogScript) after "w"
// for a sandboxed start, whose child has no-new-privileges, which the
// sweep then also requires, or "p" for a plain one. The slot is -1 when
// there is no watchdog or it was closed. Only Linux marks: elsewhere the
// window between a child's exec and its registration is not covered (see
// the README's "When the host dies").
func (d *watchdog) mark(ticks int64, sandboxed bool) (int64, error) {
	kind := "p"
	if sandboxed {
		kind = "w"
	}
	var mark [slotSize]byte
	s := slotOf(strconv.AppendInt(append(mark[:0], kind...), ticks, 10))
	off, err := d.write(s[:], -1)
	if err != nil {
		return -1, xerrors.Errorf("host-death watchdog: mark a start: %w", err)
	}
	return off, nil
}

// bootTicks is the time since boot (CLOCK_BOOTTIME, as a process's start
// time in /proc/<pid>/stat) floored to the clock tick of that file,
// USER_HZ: 100 a second on every architecture Go supports, also the
// resolution of /proc/uptime. It is the kernel's clock, not the Manager's
// (quartz): the mark is compared with the kernel's start times.
//
// A start must not pay a system call for it (x/sys reads CLOCK_BOOTTIME
// without the vDSO): it is a reading of the kernel's clock taken at most
// bootRefresh ago, plus the monotonic time (time.Now, the vDSO) passed
// since. It is never later than the kernel's clock, which is what the
// mark needs (a mark later than its child's start would spare the child):
// the reading is taken before the monotonic instant it is paired with,
// and the boot clock runs at least as fast as the monotonic one (it also
// counts suspended time). After a suspend it is earlier than the kernel's
// by the time suspended, until the next reading: that widens a sweep by
// as much, for starts in the bootRefresh after the resume.
func bootTicks() (int64, error) {
	b := bootBase.Load()
	now := time.Now()
	if b == nil || now.Sub(b.at) >= bootRefresh {
		ns, err := kernelBootTime()
		if err != nil {
			return 0, err
		}
		b = &bootReading{ns: ns, at: time.Now()}
		bootBase.Store(b)
		now = b.at
	}
	return (b.ns + now.Sub(b.at).Nanoseconds()) / (1e9 / userHZ), nil
}

// bootReading is a reading of CLOCK_BOOTTIME (ns) and a time.Now taken
// right after it (at).
type bootReading struct {
	ns int64
	at time.Time
}

// bootBase is the reading bootTicks counts from; nil until the first.
var bootBase atomic.Pointer[bootReading]

// bootRefresh is how long a reading of the boot clock serves.
const bootRefresh = time.Second

// kernelBootTime reads CLOCK_BOOTTIME, in nanoseconds.
func kernelBootTime() (int64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0, xerrors.Errorf("clock_gettime(CLOCK_BOOTTIME): %w", err)
	}
	return ts.Nano(), nil
}

// userHZ is the unit of the times in /proc/<pid>/stat, in ticks a second.
const userHZ = 100
