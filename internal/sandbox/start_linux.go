//go:build linux

package sandbox

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"

	"github.com/procvisor/proc/internal/procfs"
)

// Start starts cmd restricted by p, as sup (from [Probe]) allows, and
// returns once the child is held: stopped at its exec, before it ran any
// code of its own.
//
// Every restriction (Landlock, the seccomp filter, no-new-privileges, no
// capabilities) applies to one OS thread and is inherited at fork: Start
// restricts a new locked thread — never the main thread, which Go never
// ends — forks cmd from it and lets it end (its goroutine returns while
// still locked). The rest of the process is never restricted.
//
// Until that thread is gone the child shares its Landlock domain, so it
// could signal the thread (a SIGKILL there kills the host) or read the
// host's memory through /proc/<host>/task/<tid>. So the child is started
// traced (SysProcAttr.Ptrace) by that thread: it stops at its exec, the
// thread consumes the stop (so that the exec's SIGTRAP is never
// delivered) and ends, and the kernel then detaches the child, which runs
// on untraced. The hold cannot be had with Pdeathsig, which fires when the
// forking thread ends: a cmd with Pdeathsig set is refused.
//
// cmd's SysProcAttr is kept (Setsid, Setctty), but for UseCgroupFD:
// the filter refuses clone3, so that no member of the tree can clone into
// another cgroup, and so the child is forked with clone into the host's
// cgroup and moved into the cgroup CgroupFD names while it is held at its
// exec stop, through that cgroup's cgroup.procs opened before the thread
// was restricted: it runs no code of its own outside it. Ptrace is set.
// cmd's standard streams should be *os.File (or nil): os/exec's copying
// goroutines are not restricted, but files it opens on the thread are.
//
// fork starts cmd (it is cmd.Start: the caller's one fork site decides
// how a child is started, Start only on which thread it runs).
//
// On success the caller must call [Held.Release] exactly once, after
// registering the child wherever it must be (with p.ExitKill the thread
// waits for it, unless p.Register registered the child on the thread),
// and [Held.Stop] once the tree is gone or released. On error cmd did not
// start, or was started, killed and reaped, and cmd.Process is nil.
func Start(cmd *exec.Cmd, fork func() error, p Policy, sup Support) (*Held, error) {
	return start(cmd, fork, p, sup, true)
}

// Held is a child started by [Start], held at its exec until the
// restricted thread ends, and the host's half of its tree's routed calls.
type Held struct {
	release  chan struct{} // closed by Release
	notifier *notifier
}

// Stop ends the host's service of the tree's routed calls (changes of
// mode, owner and times, calls naming another process): calls not
// answered yet fail with EPERM, later ones with ENOSYS. It returns once
// the service ended; without Stop it ends when the last member of the
// tree has exited. Safe to call more than once.
func (h *Held) Stop() { h.notifier.Stop() }

// Release lets the restricted thread end (it was waiting only with
// Policy.ExitKill, after clearing that): the kernel then resumes the
// child. It must be called once; the child may be dead already.
func (h *Held) Release() { close(h.release) }

// start is Start; hold false starts the child without the hold (for the
// test that shows the hold is what closes the window).
func start(cmd *exec.Cmd, fork func() error, p Policy, sup Support, hold bool) (*Held, error) {
	if sup.ABI < MinABI {
		return nil, xerrors.New("sandbox: start without a successful Probe")
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if cmd.SysProcAttr.Pdeathsig != 0 {
		return nil, xerrors.New("sandbox: Pdeathsig fires when the restricted thread ends: it cannot be combined with the sandbox")
	}
	cmd.SysProcAttr.Ptrace = hold
	lay, err := layers(p, sup.ABI, sup.Reads)
	if err != nil {
		return nil, xerrors.Errorf("sandbox: %w", err)
	}
	defer lay.release()
	prog, err := filter(p)
	if err != nil {
		return nil, xerrors.Errorf("sandbox: %w", err)
	}
	procs := -1
	if attr := cmd.SysProcAttr; attr.UseCgroupFD {
		if !hold {
			return nil, xerrors.New("sandbox: a child can be placed in its cgroup only while it is held")
		}
		if procs, err = unix.Openat(attr.CgroupFD, "cgroup.procs", unix.O_WRONLY|unix.O_CLOEXEC, 0); err != nil {
			return nil, xerrors.Errorf("sandbox: open the cgroup's cgroup.procs: %w", err)
		}
		defer unix.Close(procs)
		attr.UseCgroupFD, attr.CgroupFD = false, 0
	}
	h := &Held{release: make(chan struct{})}
	type outcome struct {
		listener int
		err      error
	}
	started := make(chan outcome, 1) // buffered: the thread never blocks on it
	onOwnThread(func() {
		// The write layer first: each layer enforced copies the rules of
		// those before it, and the write layer has few. The kernel
		// intersects the layers, in any order.
		listener, err := restrictThread([]int{lay.write, lay.read}, prog)
		if err != nil {
			started <- outcome{-1, xerrors.Errorf("sandbox: restrict the thread: %w", err)}
			return
		}
		if err := fork(); err != nil {
			started <- outcome{listener, err}
			return
		}
		pid := cmd.Process.Pid
		held := hold && awaitExecStop(pid)
		if held && procs >= 0 {
			if err := place(procs, pid); err != nil {
				// Killed while stopped: it ran nothing of its own.
				_ = unix.Kill(pid, unix.SIGKILL)
				started <- outcome{listener, &killedError{"move the child into its cgroup", err}}
				return
			}
		}
		exitKill := held && p.ExitKill && unix.PtraceSetOptions(pid, unix.PTRACE_O_EXITKILL) == nil
		registered := held && p.Register != nil
		if registered {
			// Registered here, the child needs no hand-off back to this
			// thread: the caller's goroutine is woken once, by started.
			if err := p.Register(pid); err != nil {
				_ = unix.Kill(pid, unix.SIGKILL)
				started <- outcome{listener, &killedError{"register the child", err}}
				return
			}
		}
		started <- outcome{listener, nil}
		if exitKill {
			// The host's death now kills the child until it is
			// registered (here, or by the caller before its release);
			// then the option goes, so that this thread's end does not
			// kill it.
			if !registered {
				<-h.release
			}
			_ = unix.PtraceSetOptions(pid, 0)
		}
		// Returning while locked ends the thread: the kernel detaches the
		// child, which resumes without the SIGTRAP its exec raised.
	})
	o := <-started
	if o.err != nil {
		if o.listener >= 0 {
			unix.Close(o.listener)
		}
		var ke *killedError
		if errors.As(o.err, &ke) {
			_ = cmd.Wait()
			cmd.Process = nil
		}
		return nil, o.err
	}
	member := sameCgroup
	if procs < 0 {
		member = sessionMember(cmd.Process.Pid)
	}
	n, err := newNotifier(o.listener, p.WritableRoots, member, sup.Reads.watcher())
	if err != nil {
		close(h.release)
		killStarted(cmd)
		return nil, xerrors.Errorf("sandbox: %w", err)
	}
	h.notifier = n
	return h, nil
}

// killStarted kills and reaps the child of cmd, held or not, and leaves
// cmd.Process nil: a start that failed after the fork.
func killStarted(cmd *exec.Cmd) {
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	cmd.Process = nil
}

// killedError is a held child killed because a step at its exec stop
// failed: it could not be moved into its cgroup (the cgroup was removed
// from outside, say), or Policy.Register failed.
type killedError struct {
	step string
	err  error
}

func (e *killedError) Error() string { return "sandbox: " + e.step + ": " + e.err.Error() }
func (e *killedError) Unwrap() error { return e.err }

// place moves pid into the cgroup whose cgroup.procs is open as procs.
func place(procs, pid int) error {
	_, err := unix.Write(procs, []byte(strconv.Itoa(pid)))
	return err
}

// sameCgroup reports whether pid is in caller's cgroup: in cgroup mode
// the tree's, which no member can leave.
func sameCgroup(caller, pid int) bool {
	want, err := os.ReadFile("/proc/" + strconv.Itoa(caller) + "/cgroup")
	if err != nil || len(want) == 0 {
		return false
	}
	got, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	return err == nil && bytes.Equal(got, want)
}

// sessionMember reports whether a process is in the session that leader
// leads (the tree's, in group mode).
func sessionMember(leader int) func(caller, pid int) bool {
	return func(_, pid int) bool {
		st, ok := procfs.ReadStat(pid)
		return ok && st.Session == leader
	}
}

// onOwnThread runs f on a goroutine locked to an OS thread other than the
// main one, and returns at once; the goroutine returns while still
// locked, so that Go ends the thread with it (except the main thread,
// which Go keeps: there the restrictions would stay, so it is avoided).
//
// A goroutine that lands on the main thread starts f on another one and
// returns while locked to the main thread, which Go then parks for good
// (it never ends it): neither that goroutine nor any later one can land
// there, so only the first start that lands there pays for moving off
// it (released, the main thread would take its share of later starts,
// each paying two more hand-offs between threads). The main thread is
// never restricted.
func onOwnThread(f func()) {
	// Stopped when f returns (its thread ends with it).
	go func() {
		runtime.LockOSThread()
		if !onMainThread() {
			f()
			return
		}
		movedOffMain.Add(1)
		// Stopped when f returns (its thread ends with it).
		go func() {
			runtime.LockOSThread()
			f()
		}()
	}()
}

// movedOffMain counts the goroutines that landed on the main thread (for
// a test).
var movedOffMain atomic.Int32

// onMainThread reports whether the calling goroutine runs on the main
// thread; a variable so that a test can play that case.
var onMainThread = func() bool { return unix.Gettid() == processID }

// processID is this process's ID, the main thread's: it never changes.
var processID = unix.Getpid()

// restrictThread restricts the calling thread: no-new-privileges (which
// Landlock and seccomp need), no capabilities for a child (the bounding,
// ambient and inheritable sets emptied: a root child's exec then grants
// none), the seccomp filter, then the Landlock rulesets (layers) in
// order. It returns the filter's listener.
func restrictThread(rulesets []int, prog []unix.SockFilter) (listener int, err error) {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return -1, xerrors.Errorf("no-new-privileges: %w", err)
	}
	if err := dropCapabilities(); err != nil {
		return -1, err
	}
	if listener, err = installFilter(prog); err != nil {
		return -1, err
	}
	for _, r := range rulesets {
		if err := restrictSelf(r); err != nil {
			unix.Close(listener)
			return -1, err
		}
	}
	return listener, nil
}

// dropCapabilities empties the thread's bounding set (where it has
// CAP_SETPCAP: a root host), ambient set and inheritable set. Its own
// effective and permitted sets stay: the child loses them at its exec,
// and meanwhile they keep the child from reading this thread's memory
// (the kernel refuses /proc access to a task with more capabilities).
func dropCapabilities() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return xerrors.Errorf("capget: %w", err)
	}
	if data[unix.CAP_SETPCAP/32].Effective&(1<<(unix.CAP_SETPCAP%32)) != 0 {
		for c := 0; c <= lastCap(); c++ {
			err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
			if errors.Is(err, unix.EINVAL) {
				break // past the kernel's last capability
			}
			if err != nil {
				return xerrors.Errorf("drop capability %d from the bounding set: %w", c, err)
			}
		}
	} else if unix.Getuid() == 0 || unix.Geteuid() == 0 {
		return xerrors.New("a root host without CAP_SETPCAP cannot empty the bounding set")
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return xerrors.Errorf("clear the ambient capabilities: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return xerrors.Errorf("clear the inheritable capabilities: %w", err)
	}
	return nil
}

// lastCap is the kernel's highest capability number, read once from
// /proc/sys/kernel/cap_last_cap; 63 (the most a bounding set holds) where
// it cannot be read, and dropCapabilities then stops at the first
// capability the kernel does not know (EINVAL).
var lastCap = sync.OnceValue(func() int {
	data, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 63
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || n < 0 || n > 63 {
		return 63
	}
	return n
})

// si_code values of SIGCHLD (include/uapi/asm-generic/siginfo.h).
const (
	cldTrapped = 4
	cldStopped = 5
)

// chldInfo is the siginfo_t of SIGCHLD, as unix.Siginfo's padding holds
// it: pid, uid, status.
type chldInfo struct {
	Signo, Errno, Code, _ int32
	Pid, UID, Status      int32
	_                     [100]byte
}

// awaitExecStop waits, on the tracer thread, until the traced child pid
// stops at its exec or dies first, and reports whether it is held. The
// stop is consumed (a waitid without WNOWAIT): its signal, the exec's
// SIGTRAP, is then never delivered. A dead child is left unreaped, for
// its owner's Wait.
//
// A signal that reaches the child between its PTRACE_TRACEME and this
// stop would stop it first: before its exec, that would hold the forking
// thread in its vfork wait until someone kills the child; after it, the
// signal would be consumed instead and the SIGTRAP would end the child.
// Nobody can aim at it then — it leads a session of its own and its PID
// is not known until Start returns — but kill(-1, sig) by root reaches
// everything: a documented limit, never a leak.
func awaitExecStop(pid int) (held bool) {
	var info chldInfo
	si := (*unix.Siginfo)(unsafe.Pointer(&info))
	for {
		err := unix.Waitid(unix.P_PID, pid, si, unix.WSTOPPED|unix.WEXITED|unix.WNOWAIT, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || (info.Code != cldTrapped && info.Code != cldStopped) {
			return false // dead (or unwaitable): nothing to hold
		}
		break
	}
	for {
		// The child is stopped and stays so (only SIGKILL moves a traced,
		// stopped task): consume the stop. WNOHANG: had it been killed in
		// between, this finds nothing and leaves the corpse.
		info = chldInfo{}
		err := unix.Waitid(unix.P_PID, pid, si, unix.WSTOPPED|unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		return err == nil && info.Pid == int32(pid)
	}
}
