//go:build linux

package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/procvisor/proc"
	"github.com/procvisor/proc/internal/sandbox"
)

// The sandbox's floor (issue 38): what the mechanism design section 17
// prescribes for a sandboxed start costs when os/exec does it with the
// least code, beside the library's sandboxed and unsandboxed starts in
// the same run, so that the row "a sandboxed start within 1.2× of an
// unsandboxed one, under +0.5 ms of host CPU" can be read against what
// the kernel and the runtime charge for the mechanism itself.

// floorStep is one step of a sandboxed start, as floorStart does it.
type floorStep uint

const (
	// stepThread: start the child from a new locked OS thread (never
	// the main one) whose goroutine returns while still locked, so that
	// the thread ends.
	stepThread floorStep = 1 << iota
	// stepNNP: no-new-privileges on that thread.
	stepNNP
	// stepBounding: the library's way to leave a root child without
	// capabilities: every capability dropped from the bounding set (one
	// prctl each), the ambient set cleared, the inheritable set emptied.
	stepBounding
	// stepCapset: the alternative: the ambient set cleared and the
	// thread's permitted, effective and inheritable sets emptied by one
	// capset (with no-new-privileges an exec never gives more than the
	// permitted set the task had).
	stepCapset
	// stepSeccomp: the library's own seccomp filter (sandbox.Filter of
	// the zero policy), installed with a listener as the library does;
	// the listener is closed once the child started (nobody serves the
	// routed calls: `true` makes none).
	stepSeccomp
	// stepLandlock: one Landlock ruleset, made once, enforced on the
	// thread: every filesystem right of the kernel's ABI handled, read
	// and execute allowed beneath /, /dev/null read-write.
	stepLandlock
	// stepHold: the child started traced (SysProcAttr.Ptrace); the
	// thread waits for its exec stop, consumes it and ends, and the
	// kernel detaches the child.
	stepHold
	// stepExitKill (group mode, as the library does it there): at the
	// exec stop the thread sets PTRACE_O_EXITKILL and waits until the
	// caller lets it go (at once here; the library registers the child's
	// group first), then clears the option and ends.
	stepExitKill
	// stepPlace (cgroup mode): the child forked into the host's cgroup
	// and moved into its own by a write to its cgroup.procs (opened
	// before the thread was restricted) at the exec stop; without it the
	// child is cloned into its cgroup (CLONE_INTO_CGROUP).
	stepPlace
	// stepKeepThread (not a step of the design: a measure of the
	// thread's part): the thread is unlocked before its goroutine
	// returns, so that it lives on and serves other goroutines.
	stepKeepThread
)

// sandboxFloorSteps are the steps in the library's order (restrictThread:
// no-new-privileges, capabilities, filter, Landlock; then the fork and
// the hold): each floor variant adds the next one.
var sandboxFloorSteps = []struct {
	name string
	step floorStep
}{
	{"thread", stepThread},
	{"nnp", stepNNP},
	{"bounding", stepBounding},
	{"seccomp", stepSeccomp},
	{"landlock", stepLandlock},
	{"hold", stepHold},
}

// floorAll is every step of a sandboxed start, the library's way.
const floorAll = stepThread | stepNNP | stepBounding | stepSeccomp | stepLandlock | stepHold

// sandboxFloor is what floorStart needs made once: the Landlock ruleset
// and the library's filter (the library keeps both), and the kernel's
// last capability.
type sandboxFloor struct {
	ruleset int
	prog    []unix.SockFilter
	lastCap int
}

// newSandboxFloor makes the floor's ruleset and takes the library's
// filter; it skips b where the sandbox cannot run.
func newSandboxFloor(b *testing.B) *sandboxFloor {
	b.Helper()
	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 || abi < 5 {
		b.Skipf("Landlock ABI 5 or newer is needed for the floor (abi %d, %v)", abi, errno)
	}
	handled := uint64(unix.LANDLOCK_ACCESS_FS_MAKE_SYM<<1-1) | unix.LANDLOCK_ACCESS_FS_REFER |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	attr := unix.LandlockRulesetAttr{Access_fs: handled}
	fd, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if errno != 0 {
		b.Fatalf("landlock_create_ruleset: %v", errno)
	}
	f := &sandboxFloor{ruleset: int(fd)}
	b.Cleanup(func() { unix.Close(f.ruleset) })
	read := uint64(unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_EXECUTE)
	dev := uint64(unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV)
	for _, r := range []struct {
		path   string
		access uint64
	}{{"/", read}, {"/dev/null", dev}} {
		pfd, err := unix.Open(r.path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			b.Fatal(err)
		}
		rule := unix.LandlockPathBeneathAttr{Allowed_access: r.access, Parent_fd: int32(pfd)}
		_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, unix.LANDLOCK_RULE_PATH_BENEATH,
			uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
		unix.Close(pfd)
		if errno != 0 {
			b.Fatalf("landlock_add_rule %s: %v", r.path, errno)
		}
	}
	var err error
	if f.prog, err = sandbox.Filter(sandbox.Policy{}); err != nil {
		b.Skipf("no seccomp filter here: %v", err)
	}
	f.lastCap = 63
	if data, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			f.lastCap = n
		}
	}
	return f
}

// start runs cmd (a session leader of its own, its streams nil) to its
// end with the steps given; cgroup >= 0 is the directory of the cgroup
// it must run in.
func (f *sandboxFloor) start(cmd *exec.Cmd, steps floorStep, cgroup int) error {
	if steps&stepKeepThread != 0 && steps&^(stepThread|stepKeepThread) != 0 {
		return errors.New("a kept thread must not be restricted: it would serve other goroutines")
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Ptrace: steps&stepHold != 0}
	procs := -1
	if cgroup >= 0 {
		if steps&stepPlace == 0 {
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, cgroup
		} else {
			var err error
			if procs, err = unix.Openat(cgroup, "cgroup.procs", unix.O_WRONLY|unix.O_CLOEXEC, 0); err != nil {
				return err
			}
			defer unix.Close(procs)
		}
	}
	if steps&stepThread == 0 {
		return cmd.Run()
	}
	started := make(chan error, 1)
	release := make(chan struct{})
	onFreshThread(func() {
		f.restrictAndStart(cmd, steps, procs, started, release)
		if steps&stepKeepThread != 0 {
			runtime.UnlockOSThread()
		}
	})
	err := <-started
	close(release)
	if err != nil {
		if cmd.Process != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		return err
	}
	return cmd.Wait()
}

// restrictAndStart runs on the fresh locked thread: its restrictions,
// the start, the hold and the placement; it sends their outcome on
// started (buffered), then with stepExitKill waits for release.
func (f *sandboxFloor) restrictAndStart(cmd *exec.Cmd, steps floorStep, procs int, started chan<- error, release <-chan struct{}) {
	err := f.restrictAndHold(cmd, steps, procs)
	if err != nil || steps&stepExitKill == 0 {
		started <- err
		return
	}
	pid := cmd.Process.Pid
	if err := unix.PtraceSetOptions(pid, unix.PTRACE_O_EXITKILL); err != nil {
		started <- fmt.Errorf("PTRACE_O_EXITKILL: %w", err)
		return
	}
	started <- nil
	<-release
	_ = unix.PtraceSetOptions(pid, 0)
}

// restrictAndHold is restrictAndStart's restrictions, start, hold and
// placement.
func (f *sandboxFloor) restrictAndHold(cmd *exec.Cmd, steps floorStep, procs int) error {
	if steps&stepNNP != 0 {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("no-new-privileges: %w", err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var caps [2]unix.CapUserData
	if steps&stepBounding != 0 {
		for c := 0; c <= f.lastCap; c++ {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
				return fmt.Errorf("drop capability %d: %w", c, err)
			}
		}
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
			return fmt.Errorf("clear ambient: %w", err)
		}
		if err := unix.Capget(&hdr, &caps[0]); err != nil {
			return fmt.Errorf("capget: %w", err)
		}
		caps[0].Inheritable, caps[1].Inheritable = 0, 0
		if err := unix.Capset(&hdr, &caps[0]); err != nil {
			return fmt.Errorf("capset: %w", err)
		}
	}
	if steps&stepCapset != 0 {
		if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
			return fmt.Errorf("clear ambient: %w", err)
		}
		if err := unix.Capset(&hdr, &caps[0]); err != nil { // all zero
			return fmt.Errorf("capset: %w", err)
		}
	}
	if steps&stepSeccomp != 0 {
		fprog := unix.SockFprog{Len: uint16(len(f.prog)), Filter: &f.prog[0]}
		listener, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
			unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&fprog)))
		if errno != 0 {
			return fmt.Errorf("seccomp: %w", errno)
		}
		defer unix.Close(int(listener))
	}
	if steps&stepLandlock != 0 {
		if _, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(f.ruleset), 0, 0); errno != 0 {
			return fmt.Errorf("landlock_restrict_self: %w", errno)
		}
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	if steps&stepHold == 0 {
		return nil
	}
	// The exec stop, consumed (its SIGTRAP is then never delivered).
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WSTOPPED|unix.WEXITED, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("wait for the exec stop: %w", err)
		}
		break
	}
	if procs >= 0 {
		if _, err := unix.Write(procs, []byte(strconv.Itoa(cmd.Process.Pid))); err != nil {
			return fmt.Errorf("write cgroup.procs: %w", err)
		}
	}
	return nil // the thread ends: the kernel detaches the child
}

// onFreshThread runs f on a goroutine locked to an OS thread other than
// the main one; the goroutine returns while still locked, so that its
// thread ends with it. On the main thread (which Go never ends) it keeps
// that thread until another goroutine locked one of its own.
func onFreshThread(f func()) {
	// Stopped when f returns.
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			f()
			return
		}
		locked := make(chan struct{})
		// Stopped when f returns.
		go func() {
			runtime.LockOSThread()
			close(locked)
			f()
		}()
		<-locked
		runtime.UnlockOSThread()
	}()
}

// BenchmarkSandboxFloor measures start to final of `true` by os/exec
// doing, with the least code, the steps design section 17 prescribes for
// a sandboxed start, one more step per variant, beside the library's
// starts, all in one run with the variants' order reversed every other
// round. Each variant makes one untimed start and then a timed block of
// sandboxBlock starts by sandboxWorkers goroutines (BenchmarkSandbox's
// shape). The floor's variants (sandboxFloor.start):
//
//   - "exec": exec.Command("true").Run(), a session of its own;
//   - "kept-thread": "thread" with its thread kept (stepKeepThread), to
//     tell the thread's end and a new one's making from the hand-offs;
//   - "thread", "nnp", "bounding", "seccomp", "landlock", "hold": the
//     steps of sandboxFloorSteps added one at a time, in the library's
//     order; "hold" is the whole floor of a sandboxed start;
//   - "exitkill": "hold" with the group mode's exit-kill (stepExitKill);
//   - "capset": "hold" with the capset alternative instead of the
//     bounding-set drops;
//   - "exec-cgroup": "exec" cloned into a cgroup (CLONE_INTO_CGROUP; one
//     cgroup per goroutine, reused);
//   - "hold-cgroup", "capset-cgroup": "hold" and "capset" with the child
//     placed at its exec stop through cgroup.procs, as the library does;
//
// and the library's, as BenchmarkSandbox: "lib", "lib-sandbox",
// "lib-cgroup", "lib-sandbox-cgroup".
//
// Reported, medians over the rounds: "x-<variant>", the variant's block
// time over its base's in the same round (the floor's over "exec" or
// "exec-cgroup", the library's over "lib" or "lib-cgroup");
// "cpu-us-extra-<variant>", this process's CPU per start above its
// base's in the same round; "cpu-us-step-<step>", the CPU a step adds to
// the floor variant before it; "ns-<variant>", "cpu-us-<variant>", per
// start; "csw-<variant>", this process's context switches (voluntary and
// not) per start. With -v the same as a table. ns/op is a round.
func BenchmarkSandboxFloor(b *testing.B) {
	floor := newSandboxFloor(b)
	parent := benchCgroup(b, "bench-sandbox-floor")
	cgroups := make([]int, sandboxWorkers)
	for i := range cgroups {
		cgroups[i] = childCgroup(b, filepath.Join(parent, "w"+strconv.Itoa(i)))
		dir := filepath.Join(parent, "w"+strconv.Itoa(i))
		fd := cgroups[i]
		b.Cleanup(func() {
			unix.Close(fd)
			_ = unix.Rmdir(dir)
		})
	}
	type variant struct {
		name, base string
		run        func(worker int) error
	}
	onFloor := func(steps floorStep, inCgroup bool) func(int) error {
		return func(w int) error {
			cg := -1
			if inCgroup {
				cg = cgroups[w]
			}
			return floor.start(exec.Command("true"), steps, cg)
		}
	}
	variants := []variant{{"exec", "exec", onFloor(0, false)}, {"kept-thread", "exec", onFloor(stepThread|stepKeepThread, false)}}
	var steps floorStep
	for _, s := range sandboxFloorSteps {
		steps |= s.step
		variants = append(variants, variant{s.name, "exec", onFloor(steps, false)})
	}
	capset := floorAll&^stepBounding | stepCapset
	variants = append(variants,
		variant{"exitkill", "exec", onFloor(floorAll|stepExitKill, false)},
		variant{"capset", "exec", onFloor(capset, false)},
		variant{"exec-cgroup", "exec-cgroup", onFloor(0, true)},
		variant{"hold-cgroup", "exec-cgroup", onFloor(floorAll|stepPlace, true)},
		variant{"capset-cgroup", "exec-cgroup", onFloor(capset|stepPlace, true)})
	checkFloorCaps(b, floor, floorAll)
	checkFloorCaps(b, floor, capset)
	for _, mode := range []proc.Containment{proc.ContainGroup, proc.ContainCgroup} {
		m := containManager(b, mode)
		fillManager(b, m)
		p, err := m.Start(proc.StartRequest{Args: []string{"true"}, Sandbox: &proc.Sandbox{}})
		if errors.Is(err, proc.ErrUnsupported) {
			b.Skipf("the sandbox cannot run here: %v", err)
		}
		if err != nil {
			b.Fatalf("sandboxed Start(true) = %v", err)
		}
		<-p.Done()
		checkFinal(b, p, 0)
		onLib := func(sb *proc.Sandbox) func(int) error {
			return func(int) error {
				checkFinal(b, procRun(b, m, proc.StartRequest{Args: []string{"true"}, Sandbox: sb}), 0)
				return nil
			}
		}
		suffix := ""
		if mode == proc.ContainCgroup {
			suffix = "-cgroup"
		}
		variants = append(variants,
			variant{"lib" + suffix, "lib" + suffix, onLib(nil)},
			variant{"lib-sandbox" + suffix, "lib" + suffix, onLib(&proc.Sandbox{})})
	}
	wall, cpu, csw := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	order := slices.Clone(variants)
	b.ReportAllocs()
	for round := 0; b.Loop(); round++ {
		copy(order, variants)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, v := range order {
			if err := v.run(0); err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
			used, switches := readCPU(b), contextSwitches(b)
			start := time.Now()
			var wg sync.WaitGroup
			errs := make(chan error, sandboxWorkers)
			for w := range sandboxWorkers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range sandboxBlock / sandboxWorkers {
						if err := v.run(w); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			d := time.Since(start)
			self := readCPU(b).self - used.self
			switches = contextSwitches(b) - switches
			close(errs)
			if err := <-errs; err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
			wall[v.name] = append(wall[v.name], float64(d)/sandboxBlock)
			cpu[v.name] = append(cpu[v.name], float64(self)/sandboxBlock/1e3)
			csw[v.name] = append(csw[v.name], float64(switches)/sandboxBlock)
		}
	}
	if b.N == 0 {
		return
	}
	diffs := func(a, base []float64) []float64 {
		d := make([]float64, len(a))
		for i := range a {
			d[i] = a[i] - base[i]
		}
		return d
	}
	var table strings.Builder
	fmt.Fprintf(&table, "%-20s %9s %9s %7s %10s %10s %6s\n", "variant", "ns", "cpu-us", "x wall", "cpu extra", "spread x", "csw")
	for _, v := range variants {
		x := ratios(wall[v.name], wall[v.base])
		extra := diffs(cpu[v.name], cpu[v.base])
		b.ReportMetric(medianOf(wall[v.name]), "ns-"+v.name)
		b.ReportMetric(medianOf(cpu[v.name]), "cpu-us-"+v.name)
		b.ReportMetric(medianOf(csw[v.name]), "csw-"+v.name)
		if v.base != v.name {
			b.ReportMetric(medianOf(x), "x-"+v.name)
			b.ReportMetric(medianOf(extra), "cpu-us-extra-"+v.name)
		}
		fmt.Fprintf(&table, "%-20s %9.0f %9.1f %7.2f %10.1f %4.2f-%4.2f %6.1f\n", v.name, medianOf(wall[v.name]),
			medianOf(cpu[v.name]), medianOf(x), medianOf(extra), slices.Min(x), slices.Max(x), medianOf(csw[v.name]))
	}
	prev := "exec"
	for _, s := range sandboxFloorSteps {
		d := diffs(cpu[s.name], cpu[prev])
		w := diffs(wall[s.name], wall[prev])
		b.ReportMetric(medianOf(d), "cpu-us-step-"+s.name)
		fmt.Fprintf(&table, "step %-15s cpu %+7.1f us, wall %+8.0f ns\n", s.name, medianOf(d), medianOf(w))
		prev = s.name
	}
	b.Logf("medians over %d rounds:\n%s", len(wall["exec"]), table.String())
}

// contextSwitches is the number of context switches of this process's
// threads so far, those that ended included.
func contextSwitches(b *testing.B) int64 {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage(self) = %v; want nil", err)
	}
	return ru.Nvcsw + ru.Nivcsw
}

// checkFloorCaps fails b unless a child started with steps has no
// capabilities: none permitted, effective, inheritable or ambient, and
// with stepBounding an empty bounding set.
func checkFloorCaps(b *testing.B, floor *sandboxFloor, steps floorStep) {
	b.Helper()
	cmd := exec.Command("grep", "^Cap", "/proc/self/status")
	var out strings.Builder
	cmd.Stdout = &out
	if err := floor.start(cmd, steps, -1); err != nil {
		b.Fatalf("grep Cap with steps %#x: %v", steps, err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		name, value, _ := strings.Cut(line, ":")
		if name == "CapBnd" && steps&stepBounding == 0 {
			continue // the capset way leaves it
		}
		if strings.Trim(strings.TrimSpace(value), "0") != "" {
			b.Fatalf("steps %#x: %s is %s; want none", steps, name, strings.TrimSpace(value))
		}
	}
}
