package cgroup2

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"

	"github.com/procvisor/proc/internal/testkit"
)

// testDir makes a cgroup for the test below this process's own cgroup, or
// skips where cgroup v2 cannot be written. It is named as package proc's
// test cgroups are ("proc-test-<pid>-..."), so that proc's sweep removes it
// if this process dies before its cleanup, which kills what is left in it
// and removes it, and fails the test if it cannot.
func testDir(t *testing.T) Dir {
	t.Helper()
	mount, root, err := Mount()
	if err != nil {
		t.Skipf("no cgroup v2 (%v): these tests run on the development machines and in CI, where it is writable", err)
	}
	self, err := Self()
	if err != nil {
		t.Skipf("no cgroup v2 (%v): these tests run where it is writable", err)
	}
	rel, ok := strings.CutPrefix(self, root)
	if !ok {
		t.Skipf("this process's cgroup %s is outside the mount's root %s", self, root)
	}
	name := fmt.Sprintf("proc-test-%d-cgroup2-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "_"))
	d := Dir{Path: filepath.Join(mount, rel, name), Rel: filepath.Join(self, name)}
	if err := os.Mkdir(d.Path, 0o755); err != nil {
		t.Skipf("cgroup v2 at %s is not writable (%v): these tests run where it is", filepath.Dir(d.Path), err)
	}
	t.Cleanup(func() {
		_ = d.Kill()
		ctx := testkit.Ctx(t, 10*time.Second)
		d.WaitEmpty(ctx)
		d.Remove()
		if _, err := os.Stat(d.Path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("test cgroup %s left behind (%v)", d.Path, err)
		}
	})
	return d
}

// heldParent is testDir held open (its At, closed when the test ends)
// with a child cgroup "c" made in it, which the test removes; pfd is At.
func heldParent(t *testing.T) (parent Dir, pfd int) {
	t.Helper()
	parent = testDir(t)
	pfd, err := unix.Open(parent.Path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Close(pfd) })
	parent.At = pfd
	if err := parent.MakeChild("c"); err != nil {
		t.Fatalf("MakeChild: %v", err)
	}
	return parent, pfd
}

// startIn starts argv cloned into d.
func startIn(t *testing.T, d Dir, argv ...string) *exec.Cmd {
	t.Helper()
	fd, err := unix.Open(d.Path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open %s: %v", d.Path, err)
	}
	defer unix.Close(fd)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %q in %s: %v", argv, d.Path, err)
	}
	return cmd
}

// TestDir drives a handle through a tree's life: probe, members,
// populated, signal, kill, wait until empty, usage, removal.
func TestDir(t *testing.T) {
	t.Parallel()
	ctx := testkit.Ctx(t, 20*time.Second)
	d := testDir(t)
	if err := d.ProbeClone(); err != nil {
		t.Fatalf("ProbeClone: %v", err)
	}
	if d.Populated() || len(d.Procs()) != 0 {
		t.Fatalf("after the probe: populated %v, procs %v; want an empty cgroup (the probe child is gone)", d.Populated(), d.Procs())
	}

	// Usage: a child that burns some CPU in the cgroup is accounted.
	burn := startIn(t, d, "sh", "-c", "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done")
	if err := burn.Wait(); err != nil {
		t.Fatalf("burn: %v", err)
	}
	if u := usageOf(t, d); u.User+u.System <= 0 || d.CPU() != (Usage{User: u.User, System: u.System}) {
		t.Errorf("Usage = %+v, CPU = %+v after a child burned CPU in the cgroup; want user+system > 0, the same in both", u, d.CPU())
	}

	sleeper := startIn(t, d, "sleep", "60")
	pid := sleeper.Process.Pid
	events, err := d.OpenEvents()
	if err != nil {
		t.Fatalf("OpenEvents: %v", err)
	}
	defer events.Close()
	if !d.Populated() || !events.Populated() {
		t.Errorf("populated %v (events file %v) with a member; want true", d.Populated(), events.Populated())
	}
	if got := d.Procs(); !slices.Equal(got, []int{pid}) {
		t.Errorf("Procs = %v; want [%d]", got, pid)
	}
	if !d.Holds(pid) || d.Holds(os.Getpid()) {
		t.Errorf("Holds(member) = %v, Holds(this process) = %v; want true, false", d.Holds(pid), d.Holds(os.Getpid()))
	}

	// WaitEmpty ends with its ctx while the cgroup is populated.
	short, stop := context.WithCancel(ctx)
	stop()
	d.WaitEmpty(short)
	if !d.Populated() {
		t.Fatal("the member is gone after WaitEmpty with an ended ctx")
	}

	if n := d.SignalAll(unix.SIGTERM, Leader{}); n != 1 {
		t.Errorf("SignalAll(SIGTERM) = %d; want 1", n)
	}
	err = sleeper.Wait()
	if st, ok := sleeper.ProcessState.Sys().(syscall.WaitStatus); !ok || st.Signal() != syscall.SIGTERM {
		t.Errorf("sleep ended %v; want SIGTERM", err)
	}

	// Kill, then wait until empty: the killed members are not reaped yet.
	killed := startIn(t, d, "sh", "-c", "sleep 60 & exec sleep 60")
	if err := d.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	d.WaitEmpty(ctx)
	if ctx.Err() != nil || d.Populated() || events.Populated() {
		t.Errorf("after Kill and WaitEmpty: ctx %v, populated %v; want an empty cgroup", ctx.Err(), d.Populated())
	}
	_ = killed.Wait()
	if st, ok := killed.ProcessState.Sys().(syscall.WaitStatus); !ok || st.Signal() != syscall.SIGKILL {
		t.Errorf("killed child ended %v; want SIGKILL", killed.ProcessState)
	}

	// Remove takes cgroups a member made below too.
	sub := filepath.Join(d.Path, "sub", "deeper")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatalf("make %s: %v", sub, err)
	}
	d.Remove()
	if _, err := os.Stat(d.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Remove, %s: %v; want it gone", d.Path, err)
	}
	if d.Populated() || d.Procs() != nil {
		t.Errorf("a removed cgroup reads populated %v, procs %v; want empty", d.Populated(), d.Procs())
	}
	d.WaitEmpty(ctx) // returns at once for a cgroup that is gone
}

// TestMountFindsThisProcess pins discovery against the running system:
// the mount holds this process's cgroup, and IsDir says so.
func TestMountFindsThisProcess(t *testing.T) {
	t.Parallel()
	d := testDir(t)
	if !IsDir(d.Path) || IsDir(t.TempDir()) {
		t.Errorf("IsDir(test cgroup) = %v, IsDir(temp dir) = %v; want true, false", IsDir(d.Path), IsDir(t.TempDir()))
	}
}

// TestSignalAllParentsFirst pins the order of SignalAll: members in the
// order cgroup.procs lists them, the leader before the children it
// forked. Each signalled member is waited for until it is dead before
// the next is signalled (the signaller held up, as under load), so a
// child signalled first would let the leader reap it and end on its own:
// `wait` returns and the shell exits 0 before its SIGTERM comes. It
// failed so while the pidfds of a pass were kept in a map (Go's random
// order): TestStress's victims `sleep 30 & echo ready; wait` ended 0
// instead of 143 after Scope.Close. With a Leader, the leader is
// signalled through it (SIGTERM, then SIGCONT), with no pidfd of
// SignalAll's own, and the others as before.
func TestSignalAllParentsFirst(t *testing.T) {
	t.Parallel()
	for _, withLeader := range []bool{false, true} {
		name := "pidfds"
		if withLeader {
			name = "leader"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			signalAllParentsFirst(t, withLeader)
		})
	}
}

func signalAllParentsFirst(t *testing.T, withLeader bool) {
	ctx := testkit.Ctx(t, 20*time.Second)
	d := testDir(t)
	const children = 7
	fd, err := unix.Open(d.Path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open %s: %v", d.Path, err)
	}
	defer unix.Close(fd)
	leader := exec.Command("sh", "-c", fmt.Sprintf("for i in $(seq %d); do sleep 60 & done; echo ready; wait", children))
	leader.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	out, err := leader.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Start(); err != nil {
		t.Fatalf("start the leader in %s: %v", d.Path, err)
	}
	ready := make([]byte, len("ready\n"))
	if _, err := io.ReadFull(out, ready); err != nil || string(ready) != "ready\n" {
		t.Fatalf("leader's first output %q, %v; want ready", ready, err)
	}
	listed := d.Procs()
	if len(listed) != children+1 || listed[0] != leader.Process.Pid {
		t.Fatalf("cgroup.procs lists %v; want the leader %d first, then its %d children", listed, leader.Process.Pid, children)
	}

	var sent []unix.Signal // through the Leader
	var lead Leader
	if withLeader {
		lead = Leader{PID: leader.Process.Pid, Signal: func(sig unix.Signal) bool {
			sent = append(sent, sig)
			return leader.Process.Signal(sig) == nil
		}}
	}
	var order []int
	n := d.signalAll(unix.SIGTERM, lead, func(pid, pidfd int) {
		order = append(order, pid)
		if (pidfd < 0) != (withLeader && pid == leader.Process.Pid) {
			t.Errorf("member %d signalled through pidfd %d; want -1 (the Leader) for the leader with a Leader, a pidfd otherwise", pid, pidfd)
		}
		if pidfd < 0 {
			fd, err := unix.PidfdOpen(pid, 0) // not reaped: it is ours
			if err != nil {
				t.Fatalf("pidfd_open(%d): %v", pid, err)
			}
			defer unix.Close(fd)
			pidfd = fd
		}
		// Held up until the member is dead: its parent, if not signalled
		// yet, has all the time it needs to see that.
		// Poll again after EINTR: Go's preemption signal interrupts it.
		deadline, _ := ctx.Deadline()
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
		for errors.Is(err, unix.EINTR) {
			n, err = unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
		}
		if n != 1 || err != nil {
			t.Errorf("member %d not dead after SIGTERM: poll = %d, %v", pid, n, err)
		}
	})
	if n != children+1 || !slices.Equal(order, listed) {
		t.Errorf("SignalAll signalled %d members in the order %v; want %d, in the order cgroup.procs lists them %v (the leader first)", n, order, children+1, listed)
	}
	if want := []unix.Signal{unix.SIGTERM, unix.SIGCONT}; withLeader && !slices.Equal(sent, want) {
		t.Errorf("the Leader was sent %v; want %v", sent, want)
	}
	_ = leader.Wait()
	if st, ok := leader.ProcessState.Sys().(syscall.WaitStatus); !ok || st.Signal() != syscall.SIGTERM {
		t.Errorf("the leader ended %v; want killed by SIGTERM (a leader that saw its child die first exits 0)", leader.ProcessState)
	}
	d.WaitEmpty(ctx)
	if d.Populated() {
		t.Errorf("members left after SignalAll(SIGTERM): %v", d.Procs())
	}
}

// TestSignalAllLeaderReaped pins that a listed member whose PID is the
// Leader's, when the Leader's Signal sends nothing (the leader was reaped
// and its PID reused by another member), is signalled like any other
// member. It was skipped, and got only the kill after KillGrace.
func TestSignalAllLeaderReaped(t *testing.T) {
	t.Parallel()
	ctx := testkit.Ctx(t, 20*time.Second)
	d := testDir(t)
	fd, err := unix.Open(d.Path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open %s: %v", d.Path, err)
	}
	defer unix.Close(fd)
	member := exec.Command("sleep", "60")
	member.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	if err := member.Start(); err != nil {
		t.Fatalf("start a member in %s: %v", d.Path, err)
	}
	reaped := Leader{PID: member.Process.Pid, Signal: func(unix.Signal) bool { return false }}
	if n := d.SignalAll(unix.SIGTERM, reaped); n != 1 {
		t.Errorf("SignalAll(SIGTERM) with a reaped Leader of the same PID signalled %d members; want 1", n)
	}
	_ = member.Wait()
	if st, ok := member.ProcessState.Sys().(syscall.WaitStatus); !ok || st.Signal() != syscall.SIGTERM {
		t.Errorf("the member ended %v; want killed by SIGTERM", member.ProcessState)
	}
	d.WaitEmpty(ctx)
}

// TestKillGone pins Kill on a cgroup that is gone: an error wrapping
// ErrGone (the tree's signal reports ErrNotRunning), never success and
// never a raw ENOENT or ENODEV. It returned nil when the missing
// cgroup.kill was taken for a kernel before 5.14; a cgroup removed while
// its cgroup.kill was written gave ENODEV (TestStress/cgroup's
// "Signal(kill-353)").
func TestKillGone(t *testing.T) {
	t.Parallel()
	d := testDir(t)
	gone := Dir{Path: filepath.Join(d.Path, "gone")}
	if err := os.Mkdir(gone.Path, 0o755); err != nil {
		t.Fatalf("make %s: %v", gone.Path, err)
	}
	gone.Remove()
	if err := gone.Kill(); !errors.Is(err, ErrGone) {
		t.Errorf("Kill of a removed cgroup = %v; want an error wrapping ErrGone", err)
	}
	for _, err := range []error{unix.ENODEV, xerrors.Errorf("open: %w", unix.ENODEV)} {
		if !d.goneBy(err) {
			t.Errorf("goneBy(%v) = false for a cgroup whose cgroup.kill was removed while written; want true", err)
		}
	}
	if err := d.Kill(); err != nil {
		t.Errorf("Kill of a live, empty cgroup = %v; want nil", err)
	}
}

// TestDirAt drives a child cgroup through a Dir that holds its directory
// open (At): made, opened and removed relative to its parent's
// descriptor, its files read and written relative to its own, and
// through a Dir that names it below its parent's descriptor (Name), with
// the same answers as by path.
func TestDirAt(t *testing.T) {
	t.Parallel()
	ctx := testkit.Ctx(t, 20*time.Second)
	parent, pfd := heldParent(t)
	fd, err := parent.OpenChild("c")
	if err != nil {
		t.Fatalf("OpenChild: %v", err)
	}
	defer unix.Close(fd)
	byPath := Dir{Path: filepath.Join(parent.Path, "c")}
	at := Dir{Path: byPath.Path, At: fd}
	named := Dir{Path: byPath.Path, At: pfd, Name: "c"}
	ways := []struct {
		name string
		d    Dir
	}{{"At", at}, {"At and Name", named}}

	burn := startIn(t, byPath, "sh", "-c", "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done")
	if err := burn.Wait(); err != nil {
		t.Fatalf("burn: %v", err)
	}
	for _, w := range ways {
		if u := w.d.CPU(); u.User+u.System <= 0 || u != byPath.CPU() || usageOf(t, w.d) != usageOf(t, byPath) {
			t.Errorf("through %s: CPU %+v, Usage %+v; by path: %+v, %+v; want the same, user+system > 0", w.name, u, usageOf(t, w.d), byPath.CPU(), usageOf(t, byPath))
		}
	}
	sleeper := startIn(t, byPath, "sleep", "60")
	for _, w := range ways {
		if !w.d.Populated() || !slices.Equal(w.d.Procs(), []int{sleeper.Process.Pid}) || w.d.Children() != 0 {
			t.Errorf("through %s: populated %v, procs %v, children %d; want true, [%d], 0", w.name, w.d.Populated(), w.d.Procs(), w.d.Children(), sleeper.Process.Pid)
		}
	}
	events, err := named.OpenEvents()
	if err != nil {
		t.Fatalf("OpenEvents through At and Name: %v", err)
	}
	defer events.Close()
	if !events.Populated() {
		t.Errorf("cgroup.events opened through At and Name: populated false; want true")
	}
	if err := named.Kill(); err != nil {
		t.Fatalf("Kill through At and Name: %v", err)
	}
	at.WaitEmpty(ctx)
	_ = sleeper.Wait()
	if st, ok := sleeper.ProcessState.Sys().(syscall.WaitStatus); !ok || st.Signal() != syscall.SIGKILL {
		t.Errorf("sleep ended %v; want SIGKILL (cgroup.kill written through At and Name)", sleeper.ProcessState)
	}
	if events.Populated() {
		t.Errorf("cgroup.events opened through At and Name: populated true after the kill; want false")
	}
	events.Close()
	if _, err := os.Stat(byPath.Path); err != nil || events.Populated() {
		t.Errorf("cgroup.events after Close: populated %v (cgroup there: %v); want false", events.Populated(), err)
	}
	parent.RemoveChild("c")
	if _, err := os.Stat(byPath.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after RemoveChild, %s: %v; want it gone", byPath.Path, err)
	}
}

// TestChildren pins Children (the link count of a cgroup's directory)
// against nr_descendants of its cgroup.stat, by path, through At and
// through At and Name: 0 for a new cgroup and for one with a member, 1
// with a child, still 1 with a grandchild below it (nr_descendants 2),
// and 0 again once both are removed. A cgroup's files are no children.
func TestChildren(t *testing.T) {
	t.Parallel()
	parent, pfd := heldParent(t)
	defer parent.RemoveChild("c")
	fd, err := parent.OpenChild("c")
	if err != nil {
		t.Fatalf("OpenChild: %v", err)
	}
	defer unix.Close(fd)
	byPath := Dir{Path: filepath.Join(parent.Path, "c")}
	ways := []struct {
		name string
		d    Dir
	}{{"path", byPath}, {"At", Dir{Path: byPath.Path, At: fd}}, {"At and Name", Dir{Path: byPath.Path, At: pfd, Name: "c"}}}
	check := func(when string, children, descendants int64) {
		t.Helper()
		data, err := os.ReadFile(byPath.file("cgroup.stat"))
		if err != nil {
			t.Fatal(err)
		}
		if n, ok := keyedValue(data, "nr_descendants"); !ok || n != descendants {
			t.Fatalf("%s: nr_descendants %d (%v); want %d", when, n, ok, descendants)
		}
		for _, w := range ways {
			if got := w.d.Children(); got != children {
				t.Errorf("%s: Children() through %s = %d; want %d (nr_descendants %d)", when, w.name, got, children, descendants)
			}
		}
	}
	check("new", 0, 0)
	sleeper := startIn(t, byPath, "sleep", "60")
	check("with a member", 0, 0)
	_ = sleeper.Process.Kill()
	_ = sleeper.Wait()
	child := Dir{Path: filepath.Join(byPath.Path, "a")}
	if err := os.Mkdir(child.Path, 0o755); err != nil {
		t.Fatal(err)
	}
	defer child.Remove()
	check("with a child", 1, 1)
	if err := os.Mkdir(filepath.Join(child.Path, "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	check("with a child and a grandchild", 1, 2)
	child.Remove()
	check("after both were removed", 0, 0)
	if got := (Dir{Path: filepath.Join(byPath.Path, "cgroup.procs")}).Children(); got != -1 {
		t.Errorf("Children() of a file = %d; want -1", got)
	}
}

// TestEventsReadErrorIsPopulated pins that a cgroup.events read that fails
// without saying the cgroup is gone counts as populated: a tree is
// released, and its cgroup reused, only on a read that said "populated 0"
// (or that the cgroup is gone, ENODEV). A pipe stands in for a file whose
// pread fails (ESPIPE). It failed while every failed read counted as
// empty.
func TestEventsReadErrorIsPopulated(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[1])
	e := &Events{heldFile{fd: p[0]}}
	if !e.Populated() {
		t.Errorf("Populated() = false after a read that failed with ESPIPE; want true")
	}
	e.Close()
	if e.Populated() {
		t.Errorf("Populated() = true after Close; want false")
	}
}

// TestCPUStatRereads pins that cpu.stat held open (OpenCPU) reads what the
// cgroup holds at every read, not what it held when opened or first read:
// a pread at offset 0 makes the file again. A read after Close, or of a
// removed cgroup, held or by path, is an error, never a zero Usage taken
// for a reading (a reused cgroup's baseline).
func TestCPUStatRereads(t *testing.T) {
	t.Parallel()
	d := testDir(t)
	stat, err := d.OpenCPU()
	if err != nil {
		t.Fatalf("OpenCPU: %v", err)
	}
	defer stat.Close()
	read := func(what string) Usage {
		t.Helper()
		u, err := stat.ReadCPU()
		if err != nil {
			t.Fatalf("held cpu.stat %s: %v", what, err)
		}
		return u
	}
	if u := read("of a new cgroup"); u != d.CPU() {
		t.Errorf("held cpu.stat of a new cgroup = %+v; want %+v, as read by path", u, d.CPU())
	}
	var last time.Duration
	for i := range 2 {
		burn := startIn(t, d, "sh", "-c", "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done")
		if err := burn.Wait(); err != nil {
			t.Fatalf("burn: %v", err)
		}
		u := read("after a burn")
		if u != d.CPU() || u.User+u.System <= last {
			t.Errorf("held cpu.stat after burn %d = %+v; want %+v, as read by path, above the last read's %v", i, u, d.CPU(), last)
		}
		last = u.User + u.System
	}
	stat.Close()
	if u, err := stat.ReadCPU(); err == nil {
		t.Errorf("cpu.stat after Close = %+v, nil; want an error", u)
	}

	parent, _ := heldParent(t)
	defer parent.RemoveChild("c") // removed below already, unless a check failed first
	child := Dir{Path: parent.Path + "/c"}
	held, err := child.OpenCPU()
	if err != nil {
		t.Fatalf("OpenCPU of a child cgroup: %v", err)
	}
	defer held.Close()
	parent.RemoveChild("c")
	if u, err := held.ReadCPU(); err == nil {
		t.Errorf("held cpu.stat of a removed cgroup = %+v, nil; want an error", u)
	}
	if u, err := child.ReadCPU(); err == nil {
		t.Errorf("cpu.stat of a removed cgroup by path = %+v, nil; want an error", u)
	}
	if u, err := child.ReadUsage(); err == nil {
		t.Errorf("ReadUsage of a removed cgroup = %+v, nil; want an error", u)
	}
}

// usageOf is d.ReadUsage, which must succeed.
func usageOf(t *testing.T, d Dir) Usage {
	t.Helper()
	u, err := d.ReadUsage()
	if err != nil {
		t.Fatalf("ReadUsage of %s: %v", d.Path, err)
	}
	return u
}
