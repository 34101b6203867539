//go:build unix

package proc

import (
	"os"
	"os/exec"
	"runtime"
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

// setCommandLine: on Unix the shell gets its command as one argument.
func setCommandLine(*exec.Cmd, []string, string) {}

// killStarted kills a child that started but cannot be supervised, with
// its process group (it leads a session of its own).
func killStarted(cmd *exec.Cmd) {
	_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
	_ = cmd.Process.Kill()
}

// exitSignaled reports whether a signal ended the reaped child.
func exitSignaled(state *os.ProcessState) bool {
	ws, ok := state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}

// exitStatus turns a reaped child's state into the exit code (128+N for
// signal N), the signal's name and the usage.
func exitStatus(state *os.ProcessState) (code int, sigName string, usage *Usage) {
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
// registered with the poller adds to every cmd.Start.
func newPipe(parentReads bool) (parent, child *os.File, err error) {
	pi, ci, err := rawPipe(parentReads)
	if err != nil {
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
