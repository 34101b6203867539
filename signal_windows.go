//go:build windows

package proc

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
	"golang.org/x/xerrors"
)

var defaultShell = []string{"cmd.exe", "/C"}

// setupGroup starts the child in a new console process group, so that
// CTRL_BREAK can be sent to it and its children, and suspended, so that
// newGroup can put it into its job before it runs a single instruction:
// nothing it starts can be outside the job, and a child that would exit at
// once cannot make the assignment fail (AssignProcessToJobObject answers
// "Access is denied" for a process that has already exited).
func setupGroup(cmd *exec.Cmd, _ bool) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CreationFlags |= windows.CREATE_NEW_PROCESS_GROUP | windows.CREATE_SUSPENDED
}

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

// procGroup is the Job Object holding a child and everything it starts.
// The job is created with kill-on-close, so closing the last handle
// (release) ends whatever is left in it.
type procGroup struct {
	pid uint32

	// mu guards job against release racing a signal.
	mu  sync.Mutex
	job windows.Handle
}

// newGroup puts the child, started suspended by setupGroup, into a new Job
// Object and then lets it run. On error the child is still suspended and
// the caller kills it.
//
// os/exec keeps the handle of the child's main thread to itself, so the
// child is resumed with NtResumeProcess, which resumes every thread of the
// process (it has just the one). The documented alternative, creating the
// child inside the job (PROC_THREAD_ATTRIBUTE_JOB_LIST), is out of reach
// through os/exec too.
func newGroup(cmd *exec.Cmd) (*procGroup, error) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return nil, xerrors.Errorf("create job object: %w", err)
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{}
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		_ = windows.CloseHandle(job)
		return nil, xerrors.Errorf("set job limits: %w", err)
	}
	// The PID names our child: it is not reaped (cmd.Wait has not run),
	// and os/exec holds a handle to it.
	pid := uint32(cmd.Process.Pid)
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE|windows.PROCESS_SUSPEND_RESUME, false, pid)
	if err != nil {
		_ = windows.CloseHandle(job)
		return nil, xerrors.Errorf("open process %d: %w", pid, err)
	}
	defer windows.CloseHandle(h)
	if err := windows.AssignProcessToJobObject(job, h); err != nil {
		_ = windows.CloseHandle(job)
		return nil, xerrors.Errorf("assign process %d to job: %w", pid, err)
	}
	if err := resumeProcess(h); err != nil {
		_ = windows.CloseHandle(job)
		return nil, xerrors.Errorf("resume process %d: %w", pid, err)
	}
	return &procGroup{pid: pid, job: job}, nil
}

var procNtResumeProcess = windows.NewLazySystemDLL("ntdll.dll").NewProc("NtResumeProcess")

// resumeProcess resumes every thread of the process h.
func resumeProcess(h windows.Handle) error {
	if err := procNtResumeProcess.Find(); err != nil {
		return err
	}
	status, _, _ := procNtResumeProcess.Call(uintptr(h))
	if status != 0 {
		return windows.NTStatus(status)
	}
	return nil
}

func (g *procGroup) signal(sig Signal) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.job == 0 {
		return ErrNotRunning
	}
	if sig != Kill {
		// CTRL_BREAK reaches the console process group; a child without a
		// console cannot get it, so fall back to ending the job.
		if err := windows.GenerateConsoleCtrlEvent(windows.CTRL_BREAK_EVENT, g.pid); err == nil {
			return nil
		}
	}
	if err := windows.TerminateJobObject(g.job, 1); err != nil {
		return xerrors.Errorf("terminate job: %w", err)
	}
	return nil
}

// jobAccounting is JOBOBJECT_BASIC_ACCOUNTING_INFORMATION.
type jobAccounting struct {
	TotalUserTime             int64
	TotalKernelTime           int64
	ThisPeriodTotalUserTime   int64
	ThisPeriodTotalKernelTime int64
	TotalPageFaultCount       uint32
	TotalProcesses            uint32
	ActiveProcesses           uint32
	TotalTerminatedProcesses  uint32
}

// reaped: a job handle names this job for ever; nothing to settle.
func (g *procGroup) reaped() {}

// alive reports whether the job has active processes.
func (g *procGroup) alive() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.job == 0 {
		return false
	}
	var info jobAccounting
	err := windows.QueryInformationJobObject(g.job, windows.JobObjectBasicAccountingInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)), nil)
	return err == nil && info.ActiveProcesses > 0
}

// waitExited: cmd.Wait does all the waiting on Windows.
func waitExited(int) {}

// waitGone does not wait on Windows: TerminateJobObject, like
// TerminateProcess, may return before the processes are gone.
func waitGone([]*procGroup) {}

// release closes the job handle; kill-on-close ends anything left in it.
func (g *procGroup) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.job != 0 {
		_ = windows.CloseHandle(g.job)
		g.job = 0
	}
}

// leaderExited has no cheap answer on Windows; the exit goroutine decides.
func leaderExited(int) bool { return false }

// exitStatus turns a reaped child's state into the exit code and usage.
// Windows has no signals, and MaxRSS is not reported.
func exitStatus(state *os.ProcessState, _ error) (code int, sigName string, usage *Usage) {
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
