//go:build windows

package proc

import (
	"context"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
	"golang.org/x/xerrors"
)

// The job backend (Windows): every child is in a Job Object with
// kill-on-close, so closing the last handle ends whatever is left in it.

// containJob is what Info.Containment reports on Windows.
const containJob = "job"

// watchdog: on Windows every job is created with kill-on-close and its
// only handle is the host's, so the trees die with the host without one.
type watchdog struct{}

func startWatchdog(string) (*watchdog, error) { return nil, nil }

func (*watchdog) close() {}

func (*watchdog) lost() bool { return false }

func (*watchdog) abandon() {}

// limitsWithoutCgroup: a job enforces Limits itself.
const limitsWithoutCgroup = true

// treeSetup starts the child in a new console process group, so that
// CTRL_BREAK can be sent to it and its children, and suspended, so that
// started can put it into its job before it runs a single instruction:
// nothing it starts can be outside the job, and a child that would exit at
// once cannot make the assignment fail (AssignProcessToJobObject answers
// "Access is denied" for a process that has already exited).
type treeSetup struct{ limits Limits }

// cgroupGone: there are no cgroups here.
func (*treeSetup) cgroupGone(error) bool { return false }

// setupTree sets the creation flags of treeSetup; the job is made, and
// limits set on it, by started.
func setupTree(cmd *exec.Cmd, _, _ bool, _ *cgroupHost, _ *watchdog, limits Limits) (*treeSetup, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CreationFlags |= windows.CREATE_NEW_PROCESS_GROUP | windows.CREATE_SUSPENDED
	return &treeSetup{limits: limits}, nil
}

// started puts the child, started suspended, into a new Job Object and
// then lets it run. On error the child is still suspended and the caller
// kills it.
//
// os/exec keeps the handle of the child's main thread to itself, so the
// child is resumed with NtResumeProcess, which resumes every thread of the
// process (it has just the one). The documented alternative, creating the
// child inside the job (PROC_THREAD_ATTRIBUTE_JOB_LIST), is out of reach
// through os/exec too.
func (s *treeSetup) started(cmd *exec.Cmd, owner string) (*tree, error) {
	if cmd.Process == nil {
		return nil, nil
	}
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return nil, xerrors.Errorf("create job object: %w", err)
	}
	if err := limitJob(job, s.limits); err != nil {
		_ = windows.CloseHandle(job)
		return nil, err
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
	return &tree{sys: &jobTree{pid: pid, job: job}, kind: containJob, owner: owner}, nil
}

// limitJob sets kill-on-close and the limits of l on job: the job memory
// limit, the active process limit, and a hard cap on the CPU rate.
func limitJob(job windows.Handle, l Limits) error {
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{}
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if l.MemoryBytes > 0 {
		info.BasicLimitInformation.LimitFlags |= windows.JOB_OBJECT_LIMIT_JOB_MEMORY
		info.JobMemoryLimit = uintptr(l.MemoryBytes)
	}
	if l.Pids > 0 {
		info.BasicLimitInformation.LimitFlags |= windows.JOB_OBJECT_LIMIT_ACTIVE_PROCESS
		info.BasicLimitInformation.ActiveProcessLimit = uint32(l.Pids)
	}
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		if l.MemoryBytes > 0 || l.Pids > 0 {
			return xerrors.Errorf("start: set job limits %+v: %v: %w", l, err, ErrUnsupported)
		}
		return xerrors.Errorf("set job limits: %w", err)
	}
	if l.CPUs > 0 {
		// The rate is in hundredths of a percent of the whole machine.
		rate := min(max(uint32(l.CPUs/float64(runtime.NumCPU())*10000), 1), 10000)
		cpu := jobCPURate{ControlFlags: jobCPURateEnable | jobCPURateHardCap, Value: rate}
		if _, err := windows.SetInformationJobObject(job, windows.JobObjectCpuRateControlInformation,
			uintptr(unsafe.Pointer(&cpu)), uint32(unsafe.Sizeof(cpu))); err != nil {
			return xerrors.Errorf("start: set the job's CPU rate for %v CPUs: %v: %w", l.CPUs, err, ErrUnsupported)
		}
	}
	return nil
}

// jobCPURate is JOBOBJECT_CPU_RATE_CONTROL_INFORMATION with CpuRate.
type jobCPURate struct {
	ControlFlags uint32
	Value        uint32
}

const (
	jobCPURateEnable  = 0x1 // JOB_OBJECT_CPU_RATE_CONTROL_ENABLE
	jobCPURateHardCap = 0x4 // JOB_OBJECT_CPU_RATE_CONTROL_HARD_CAP
)

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

// jobTree is the Job Object holding a child and everything it starts.
type jobTree struct {
	pid uint32

	// mu guards job against release racing a signal.
	mu  sync.Mutex
	job windows.Handle
}

func (g *jobTree) signal(sig Signal) error {
	if !g.alive() {
		return ErrNotRunning
	}
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

// usage reads the job's accounting: the CPU of every process it held and
// its peak memory. Windows has no peak process count or OOM kills.
func (g *jobTree) usage() *TreeUsage {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.job == 0 {
		return nil
	}
	var acct jobAccounting
	if err := windows.QueryInformationJobObject(g.job, windows.JobObjectBasicAccountingInformation,
		uintptr(unsafe.Pointer(&acct)), uint32(unsafe.Sizeof(acct)), nil); err != nil {
		return nil
	}
	u := &TreeUsage{User: time.Duration(acct.TotalUserTime) * 100, System: time.Duration(acct.TotalKernelTime) * 100}
	var ext windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	if err := windows.QueryInformationJobObject(g.job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&ext)), uint32(unsafe.Sizeof(ext)), nil); err == nil {
		u.MemoryPeak = int64(ext.PeakJobMemoryUsed)
	}
	return u
}

// rewatch: a job needs no watchdog.
func (g *jobTree) rewatch(*watchdog) {}

// members: listing a job's processes is not implemented.
func (g *jobTree) members() ([]int, bool) { return nil, false }

// reaped: a job handle names this job for ever; nothing to settle.
func (g *jobTree) reaped() {}

// alive reports whether the job has active processes.
func (g *jobTree) alive() bool {
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

// waitEmpty looks at the job's active processes every few milliseconds:
// a job signals no handle when it empties.
func (g *jobTree) waitEmpty(ctx context.Context) {
	for g.alive() {
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
}

// release closes the job handle; kill-on-close ends anything left in it.
func (g *jobTree) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.job != 0 {
		_ = windows.CloseHandle(g.job)
		g.job = 0
	}
}

// waitExited: cmd.Wait does all the waiting on Windows.
func waitExited(int) {}

// haltChild: Windows has no stop signal; the child counts as alive, and
// the exit goroutine's ordering decides.
func haltChild(int) bool { return false }

func resumeHalted(int) {}

// termPending: Windows has no pending signals.
func termPending(int) bool { return false }

// exitsSoon cannot tell here without reaping; the exit goroutine decides.
func exitsSoon(int, <-chan struct{}) bool { return false }
