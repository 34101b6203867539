//go:build unix

package proc

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

var defaultShell = []string{"sh", "-c"}

// maxRSSUnit converts Rusage.Maxrss to bytes: macOS reports bytes, Linux
// and the BSDs KiB.
var maxRSSUnit int64 = 1024

func init() {
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		maxRSSUnit = 1
	}
}

// setupGroup makes the child lead a new process group, so that signals
// reach everything it starts. With a TTY it leads a new session instead,
// with the terminal as its controlling terminal (stdin is the terminal).
func setupGroup(cmd *exec.Cmd, tty bool) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if tty {
		cmd.SysProcAttr.Setsid = true
		cmd.SysProcAttr.Setctty = true
		cmd.SysProcAttr.Ctty = 0
		cmd.SysProcAttr.Setpgid = false
		return
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pgid = 0
}

// setCommandLine: on Unix the shell gets its command as one argument.
func setCommandLine(*exec.Cmd, []string, string) {}

// procGroup is a child's process group; its ID is the child's PID.
//
// A group ID can name a new group once the old one is gone. POSIX keeps a
// PID from being reused while a process group of that ID exists; hence,
// once the leader is reaped, a process whose PID is the group ID is a
// newcomer, and the old group is gone. One case stays undecidable without
// watching every member: the old group dies unobserved, the PID wraps, and
// the newcomer that took it leaves members behind and exits; those members
// then pass for ours. The exit goroutine's check right after the reap
// (empty groups, the common case) and every later look shrink that window.
type procGroup struct {
	pgid int
	// gone is set once the group was seen without a live member: a group
	// never regains members (its ID could only name a new group later).
	gone atomic.Bool
	// leaderReaped is set by the exit goroutine once cmd.Wait returned.
	leaderReaped atomic.Bool
}

func newGroup(cmd *exec.Cmd) (*procGroup, error) {
	return &procGroup{pgid: cmd.Process.Pid}, nil
}

func (g *procGroup) signal(sig Signal) error {
	var s unix.Signal
	switch sig {
	case Interrupt:
		s = unix.SIGINT
	case Terminate:
		s = unix.SIGTERM
	default:
		s = unix.SIGKILL
	}
	err := unix.Kill(-g.pgid, s)
	if errors.Is(err, unix.ESRCH) {
		return ErrNotRunning
	}
	return err
}

// reaped records that the leader was reaped, and settles with one system
// call whether the group went with it (the common case), so that a later
// Signal on the final record never asks about an ID that may have been
// reused by then. The exit goroutine calls it once, after cmd.Wait.
func (g *procGroup) reaped() {
	g.leaderReaped.Store(true)
	g.empty()
}

// empty reports whether kill(-pgid, 0) finds no member at all, not even a
// zombie, and then marks the group gone for good.
func (g *procGroup) empty() bool {
	if errors.Is(unix.Kill(-g.pgid, 0), unix.ESRCH) {
		g.gone.Store(true)
		return true
	}
	return false
}

// alive reports whether the group has a member that is not a zombie.
// kill(-pgid, 0) also succeeds for zombies, which PID 1 may reap late, so
// where /proc exists it is read instead.
func (g *procGroup) alive() bool {
	if g.gone.Load() {
		return false
	}
	// The common case after a child exits, and far cheaper than reading
	// the process table.
	if g.empty() {
		return false
	}
	if g.leaderReaped.Load() {
		// Our leader is reaped, so a process with its PID is a newcomer,
		// which the PID could only be given to once our group was gone:
		// the members kill(-pgid) found are another group's.
		if err := unix.Kill(g.pgid, 0); err == nil || errors.Is(err, unix.EPERM) {
			g.gone.Store(true)
			return false
		}
	}
	// Only ESRCH settles it for good: a scan of /proc is not atomic, and a
	// member that forks and exits during it could be missed.
	if live, ok := g.scanAlive(); ok {
		return live
	}
	return true // kill(-pgid, 0) succeeded: members, perhaps only zombies
}

// id is the group's ID as /proc/<pid>/stat writes it.
func (g *procGroup) id() string { return strconv.Itoa(g.pgid) }

// release frees what the group holds; on Unix nothing.
func (g *procGroup) release() {}

// scanAlive scans /proc for a process of the group whose state is not
// Z (zombie) or X (dead). ok is false where there is no /proc.
func (g *procGroup) scanAlive() (live, ok bool) {
	want := g.id()
	ok = scanProc(func(group string) bool {
		live = group == want
		return !live
	})
	return live, ok
}

// scanProc calls visit with the process group of every process in /proc
// that is neither a zombie (Z) nor dead (X), until visit returns false. ok
// is false where there is no /proc.
func scanProc(visit func(pgrp string) (more bool)) (ok bool) {
	return scanProcPIDs(func(_ int, pgrp string) bool { return visit(pgrp) })
}

// scanProcPIDs is scanProc that also passes each process's PID.
func scanProcPIDs(visit func(pid int, pgrp string) (more bool)) (ok bool) {
	dir, err := os.Open("/proc")
	if err != nil {
		return false
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return false
	}
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		state, group, ok := procStat(name)
		live := state != 'Z' && state != 'X' || state == 'Z' && zombieLeaderLives(name)
		if ok && live && !visit(pid, group) {
			break
		}
	}
	return true
}

// procStat reads the state and process group of /proc/<pid>/stat.
func procStat(pid string) (state byte, pgrp string, ok bool) {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, "", false
	}
	// "pid (comm) state ppid pgrp ...": comm may hold spaces and parens.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, "", false
	}
	fields := bytes.Fields(data[i+1:])
	if len(fields) < 3 || len(fields[0]) != 1 {
		return 0, "", false
	}
	return fields[0][0], string(fields[2]), true
}

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

// exitStatus turns a reaped child's state into the exit code (128+N for
// signal N), the signal's name and the usage.
func exitStatus(state *os.ProcessState, waitErr error) (code int, sigName string, usage *Usage) {
	if state == nil {
		return -1, "", nil
	}
	usage = &Usage{User: state.UserTime(), System: state.SystemTime()}
	if ru, ok := state.SysUsage().(*syscall.Rusage); ok && ru != nil {
		usage.MaxRSS = int64(ru.Maxrss) * maxRSSUnit
	}
	ws, ok := state.Sys().(syscall.WaitStatus)
	if !ok {
		return state.ExitCode(), "", usage
	}
	if ws.Signaled() {
		sig := unix.Signal(ws.Signal())
		return 128 + int(sig), unix.SignalName(sig), usage
	}
	return ws.ExitStatus(), "", usage
}

// newPipe returns a pipe whose parent end is non-blocking and registered
// with the poller (so that deadlines work on it) and whose child end is a
// plain blocking descriptor. os.Pipe registers both ends, and a child end
// registered with the poller was measured to add ~100µs to cmd.Start.
func newPipe(parentReads bool) (parent, child *os.File, err error) {
	var p [2]int
	// As os.Pipe does where there is no pipe2: hold ForkLock so that no
	// child is started between pipe and close-on-exec.
	syscall.ForkLock.RLock()
	err = syscall.Pipe(p[:])
	if err == nil {
		syscall.CloseOnExec(p[0])
		syscall.CloseOnExec(p[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, nil, xerrors.Errorf("pipe: %w", err)
	}
	pi, ci := p[0], p[1]
	if !parentReads {
		pi, ci = p[1], p[0]
	}
	if err := syscall.SetNonblock(pi, true); err != nil {
		_ = syscall.Close(pi)
		_ = syscall.Close(ci)
		return nil, nil, xerrors.Errorf("pipe: %w", err)
	}
	// os.NewFile registers a non-blocking descriptor with the poller.
	return os.NewFile(uintptr(pi), "|parent"), os.NewFile(uintptr(ci), "|child"), nil
}

// stopReading makes a Read blocked on f return os.ErrDeadlineExceeded.
func stopReading(f *os.File) {
	_ = f.SetReadDeadline(pastDeadline)
}

// writeNonblock writes once to a non-blocking descriptor.
func writeNonblock(fd uintptr, p []byte) (int, error) {
	n, err := unix.Write(int(fd), p)
	if err != nil {
		return 0, xerrors.Errorf("write: %w", err)
	}
	return n, nil
}

// readNonblock reads once from a non-blocking descriptor.
func readNonblock(fd uintptr, p []byte) (int, error) {
	n, err := unix.Read(int(fd), p)
	if err != nil {
		return 0, xerrors.Errorf("read: %w", err)
	}
	return n, nil
}

// envKey is the form of an environment variable name used to compare names:
// case-sensitive on Unix.
func envKey(name string) string { return name }

// logOpenFlags makes opening a log file that is a FIFO fail at once
// (ENXIO without a reader) instead of blocking.
const logOpenFlags = unix.O_NONBLOCK
