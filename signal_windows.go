//go:build windows

package proc

import (
	"os"
	"os/exec"
	"strings"
	"syscall"

	"golang.org/x/xerrors"
)

var defaultShell = []string{"cmd.exe", "/C"}

// setCommandLine passes a shell command to cmd.exe as written. os/exec
// quotes each argument for CommandLineToArgvW, which cmd.exe does not use
// to parse its /C command (a quoted "a b" would arrive mangled).
func setCommandLine(cmd *exec.Cmd, shell []string, command string) {
	quoted := make([]string, len(shell))
	for i, arg := range shell {
		quoted[i] = syscall.EscapeArg(arg)
	}
	cmd.SysProcAttr.CmdLine = strings.Join(quoted, " ") + " " + command
}

// killStarted kills a child that started but cannot be supervised (it is
// still suspended, outside any job).
func killStarted(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

// exitSignaled: Windows has no signals.
func exitSignaled(*os.ProcessState) bool { return false }

// exitStatus turns a reaped child's state into the exit code and usage.
// Windows has no signals, and MaxRSS is not reported.
func exitStatus(state *os.ProcessState) (code int, sigName string, usage *Usage) {
	if state == nil {
		return -1, "", nil
	}
	return state.ExitCode(), "", &Usage{User: state.UserTime(), System: state.SystemTime()}
}

// stopReading closes f: pipes from os.Pipe are not pollable on Windows, so
// no deadline can stop a read, but closing cancels it. There is no final
// pass there.
func stopReading(f *os.File) {
	_ = f.Close()
}

// writeNonblock is not reached on Windows (it serves TTYs, which are
// Unix-only).
func writeNonblock(uintptr, []byte) (int, error) {
	return 0, xerrors.Errorf("write: %w", ErrUnsupported)
}

// readNonblock is not reached on Windows (stopReading ends reads by closing).
func readNonblock(uintptr, []byte) (int, error) {
	return 0, xerrors.Errorf("read: %w", ErrUnsupported)
}

// envKey is the form of an environment variable name used to compare names:
// case-insensitive on Windows.
func envKey(name string) string { return strings.ToUpper(name) }

// logOpenFlags: Windows has no FIFOs to guard against.
const logOpenFlags = 0
