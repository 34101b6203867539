//go:build linux

package proc_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procvisor/proc"
)

// Limits, whole-tree usage, leftovers and host death (design sections 13
// and 14). These machines mount cgroup v2 without controllers, so limits
// take the ErrUnsupported path here; TestLimitsEnforced runs where the
// controllers are delegated.

func init() {
	helpers["limits-host"] = limitsHost
}

// TestLimitsRefused pins the bad input of limits: a negative (or not
// finite) limit is ErrInvalid, in the request or in Options, and starts
// nothing; a limit that cannot be enforced is ErrUnsupported, naming what
// is missing: in group mode, and in cgroup mode without the controller.
func TestLimitsRefused(t *testing.T) {
	t.Parallel()
	m := newManager(t, proc.Options{Containment: proc.ContainGroup})
	for name, l := range map[string]proc.Limits{
		"memory": {MemoryBytes: -1}, "pids": {Pids: -2}, "cpus": {CPUs: -0.5},
		"cpus-nan": {CPUs: math.NaN()}, "cpus-inf": {CPUs: math.Inf(1)},
	} {
		req := mgrExitReq(0)
		req.Limits = l
		_, err := m.Start(req)
		mgrCheckErr(t, "Start with negative "+name+" limit", err, proc.ErrInvalid, "StartRequest.Limits")
		bad := newManager(t, proc.Options{Limits: l})
		_, err = bad.Start(mgrExitReq(0))
		mgrCheckErr(t, "Start with negative "+name+" in Options.Limits", err, proc.ErrInvalid, "Options.Limits")
	}
	if n := len(m.List()); n != 0 {
		t.Errorf("refused starts left %d records", n)
	}

	req := mgrExitReq(0)
	req.Limits = proc.Limits{Pids: 16}
	_, err := m.Start(req)
	mgrCheckErr(t, "Start with a pids limit in group mode", err, proc.ErrUnsupported, "group")
	// Options.Limits are the defaults, refused the same way.
	dm := newManager(t, proc.Options{Containment: proc.ContainGroup, Limits: proc.Limits{MemoryBytes: 1 << 30}})
	_, err = dm.Start(mgrExitReq(0))
	mgrCheckErr(t, "Start with Options.Limits in group mode", err, proc.ErrUnsupported, "group")

	t.Run("cgroup-without-controller", func(t *testing.T) {
		t.Parallel()
		mode := treeModes[1]
		opts := treeOptions(t, mode)
		if limitsControllers(t, opts.CgroupParent) {
			t.Skip("the parent delegates the memory, pids and cpu controllers: TestLimitsEnforced runs instead")
		}
		cm := newManager(t, opts)
		for _, tc := range []struct {
			limits     proc.Limits
			controller string
		}{
			{proc.Limits{MemoryBytes: 64 << 20}, "memory controller"},
			{proc.Limits{Pids: 8}, "pids controller"},
			{proc.Limits{CPUs: 0.5}, "cpu controller"},
		} {
			req := mgrExitReq(0)
			req.Limits = tc.limits
			_, err := cm.Start(req)
			mgrCheckErr(t, fmt.Sprintf("Start with %+v and no controllers", tc.limits), err, proc.ErrUnsupported, tc.controller)
		}
		// Without limits the same Manager starts, and reports none.
		snap, err := cm.Run(testCtx(t), mgrExitReq(0))
		if err != nil || snap.Info.Limits != (proc.Limits{}) || snap.Info.Containment != "cgroup" {
			t.Errorf("Run without limits = %v, limits %+v, containment %q; want nil, none, cgroup", err, snap.Info.Limits, snap.Info.Containment)
		}
	})
}

// limitsControllers reports whether the cgroup parent delegates every
// controller that Limits need.
func limitsControllers(t testing.TB, parent string) bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(parent, "cgroup.controllers"))
	if err != nil {
		t.Fatalf("read controllers of %s: %v", parent, err)
	}
	have := strings.Fields(string(data))
	for _, c := range []string{"memory", "pids", "cpu"} {
		if !strings.Contains(" "+strings.Join(have, " ")+" ", " "+c+" ") {
			return false
		}
	}
	return true
}

// TestLimitsEnforced runs where the parent cgroup delegates the memory,
// pids and cpu controllers (a systemd host with delegation, for one); it
// skips on these machines, whose cgroup v2 mount has no controllers. An
// allocation past MemoryBytes is OOM-killed (137, SIGKILL, OOMKills > 0);
// a fork past Pids fails inside the tree and kills nothing.
func TestLimitsEnforced(t *testing.T) {
	t.Parallel()
	opts := treeOptions(t, treeModes[1])
	if !limitsControllers(t, opts.CgroupParent) {
		t.Skipf("cgroup v2 here delegates no memory/pids/cpu controller to %s; this runs on hosts that do", opts.CgroupParent)
	}
	ctx := testCtx(t)
	m := newManager(t, opts)

	req := proc.StartRequest{Args: []string{"python3", "-c", "b = bytearray(512 << 20); print(len(b))"}}
	req.Limits = proc.Limits{MemoryBytes: 64 << 20}
	snap, err := m.Run(ctx, req)
	if err != nil {
		t.Fatalf("Run(allocate 512 MiB under 64 MiB) = %v", err)
	}
	if snap.Info.Limits != req.Limits {
		t.Errorf("Info.Limits = %+v; want %+v", snap.Info.Limits, req.Limits)
	}
	if code := exitCode(t, snap.Info); code != 137 || snap.Info.Signal != "SIGKILL" || snap.Info.Usage.Tree == nil || snap.Info.Usage.Tree.OOMKills == 0 {
		t.Errorf("over the memory limit: exit %d, signal %q, usage %+v; want 137, SIGKILL, OOMKills > 0", code, snap.Info.Signal, snap.Info.Usage)
	}

	req = proc.StartRequest{Command: "for i in 1 2 3 4 5 6 7 8; do sleep 5 & done; wait; echo done"}
	req.Limits = proc.Limits{Pids: 4}
	snap, err = m.Run(ctx, req)
	if err != nil {
		t.Fatalf("Run(8 forks under 4 pids) = %v", err)
	}
	if !strings.Contains(snap.Output.Text, "done") || !strings.Contains(snap.Output.Text, "fork") {
		t.Errorf("over the pids limit: output %q; want the shell's fork failures and its \"done\"", snap.Output.Text)
	}
}

// TestTreeUsage pins Usage.Tree: in cgroup mode it counts the CPU of every
// member, dead ones too: a grandchild that spun and exited before the
// record was final, orphaned (a double fork) so that its usage never
// reaches the direct child through wait. The grandchild reports its own
// CPU time (the shell's times builtin) through a FIFO; the tree's must be
// at least that. In group mode Usage.Tree is nil.
func TestTreeUsage(t *testing.T) {
	t.Parallel()
	const busy = `mkfifo f; ( (i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; times >f) & ); read user sys <f; echo $user $sys`
	for _, mode := range treeModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			m := newManager(t, treeOptions(t, mode))
			snap, err := m.Run(ctx, proc.StartRequest{Command: busy, WorkDir: t.TempDir()})
			if err != nil {
				t.Fatalf("Run = %v", err)
			}
			// "0m0.190000s 0m0.000000s": the grandchild's user and system time.
			var spent time.Duration
			for _, f := range strings.Fields(snap.Output.Text) {
				d, err := time.ParseDuration(f)
				if err != nil {
					t.Fatalf("grandchild's times %q: %v", snap.Output.Text, err)
				}
				spent += d
			}
			u := snap.Info.Usage
			if mode.containment == proc.ContainGroup {
				if u.Tree != nil {
					t.Errorf("group mode: Usage.Tree = %+v; want nil (no OS accounts for a process group)", u.Tree)
				}
				return
			}
			if u.Tree == nil {
				t.Fatalf("cgroup mode: Usage.Tree is nil")
			}
			// The kernel's tick (10 ms) rounds each figure.
			direct, tree := u.User+u.System, u.Tree.User+u.Tree.System
			if spent < 20*time.Millisecond || tree < direct+spent-20*time.Millisecond {
				t.Errorf("tree CPU %v; want at least the direct child's %v plus the dead grandchild's %v", tree, direct, spent)
			}
		})
	}
}

// TestLeftovers pins what a Manager does with cgroups it finds in its
// parent: it removes a dead host's Manager cgroup (the host's PID with
// another start time), killing what is still inside first; it leaves alone
// a live host's, a KeepOnHostExit Manager's, and anything no Manager named.
func TestLeftovers(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	opts := treeOptions(t, treeModes[1])
	parent := opts.CgroupParent
	self := selfStartTime(t)
	ns := selfPIDNamespace(t)
	mk := func(name string) string {
		dir := filepath.Join(parent, name)
		if err := os.MkdirAll(filepath.Join(dir, "t1"), 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	dead := mk(fmt.Sprintf("procvisor-%s-%d-%d-1", ns, os.Getpid(), self+1))    // our PID, another start: a dead host
	live := mk(fmt.Sprintf("procvisor-%s-%d-%d-999999", ns, os.Getpid(), self)) // our own: a live host
	keep := mk(fmt.Sprintf("procvisor-keep-%s-%d-%d-1", ns, os.Getpid(), self+1))
	// Another PID namespace's host cannot be looked up: left alone.
	foreign := mk(fmt.Sprintf("procvisor-1-%d-%d-1", os.Getpid(), self+1))
	other := mk("not-a-manager")
	// Something still runs in the dead host's record cgroup, and in the kept one.
	inDead := sleepInCgroup(t, filepath.Join(dead, "t1"))
	inKeep := sleepInCgroup(t, filepath.Join(keep, "t1"))
	deadFD, keepFD := treePidfd(t, inDead), treePidfd(t, inKeep)

	m := newManager(t, opts)
	if _, err := m.Run(ctx, mgrExitReq(0)); err != nil {
		t.Fatalf("Run = %v", err)
	}
	treeWaitPidfd(ctx, t, deadFD, "the dead host's leftover process")
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dead host's cgroup %s: %v; want it removed", dead, err)
	}
	for _, dir := range []string{live, keep, other, foreign} {
		if _, err := os.Stat(filepath.Join(dir, "t1")); err != nil {
			t.Errorf("cgroup %s: %v; want it left exactly as it was", dir, err)
		}
	}
	if treeExited(keepFD) {
		t.Errorf("the process in a KeepOnHostExit Manager's cgroup was killed; want it left running")
	}
	// Clean up what the test made (the parent's check wants nothing left).
	for _, dir := range []string{keep, live, other, foreign} {
		_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
		treeRemoveCgroup(t, filepath.Join(dir, "t1"))
		treeRemoveCgroup(t, dir)
	}
}

// TestHostDeath pins section 14: when the host dies without Close
// (SIGKILL), every tree its Manager started dies with it, escapees
// included in cgroup mode (a setsid child and a double fork), every
// registered group in group mode; with KeepOnHostExit they live on. The
// host is the test binary, re-run as a helper; the bound asserted leaves
// headroom for a loaded machine running -race (the README quotes what a
// quiet one measures).
func TestHostDeath(t *testing.T) {
	t.Parallel()
	for _, mode := range treeModes {
		for _, keep := range []bool{false, true} {
			name := mode.name
			if keep {
				name += "/keep"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				ctx := testCtx(t)
				parent := treeOptions(t, mode).CgroupParent
				host := helperCmd("limits-host", string(mode.containment), parent, strconv.FormatBool(keep))
				host.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
				out, err := host.StdoutPipe()
				if err != nil {
					t.Fatal(err)
				}
				in, err := host.StdinPipe() // held open: the host waits on it
				if err != nil {
					t.Fatal(err)
				}
				defer in.Close()
				if err := host.Start(); err != nil {
					t.Fatal(err)
				}
				exited := make(chan error, 1)
				go func() { exited <- host.Wait() }()
				var pids []int
				sc := bufio.NewScanner(out)
				for sc.Scan() && sc.Text() != "ready" {
					pid, err := strconv.Atoi(sc.Text())
					if err != nil {
						t.Fatalf("host said %q", sc.Text())
					}
					pids = append(pids, pid)
				}
				if len(pids) == 0 {
					_ = host.Process.Kill()
					t.Fatalf("the host started nothing: %v", <-exited)
				}
				fds := make([]int, len(pids))
				for i, pid := range pids {
					fds[i] = treePidfd(t, pid)
				}
				cgroups := map[string]bool{}
				for _, pid := range pids {
					if dir, ok := treeCgroupOf(t, pid); ok && parent != "" {
						cgroups[filepath.Dir(dir)] = true
					}
				}
				killed := time.Now()
				_ = host.Process.Signal(syscall.SIGKILL)
				if err := recv(ctx, t, exited, "the host's end"); err == nil {
					t.Fatalf("the host exited 0; want it killed")
				}
				if keep {
					for i, fd := range fds {
						if treeExited(fd) {
							t.Errorf("with KeepOnHostExit, member %d died with the host", pids[i])
						}
					}
					for dir := range cgroups {
						_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
					}
					for _, pid := range pids {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
				// Design: within 100 ms. The test allows ten times that for a
				// loaded machine running -race; the README quotes a quiet one.
				bound, cancel := context.WithDeadline(ctx, killed.Add(10*hostDeathWithin))
				defer cancel()
				for i, fd := range fds {
					treeWaitPidfd(bound, t, fd, fmt.Sprintf("member %d after the host's death", pids[i]))
				}
				if d := time.Since(killed); !keep {
					t.Logf("%d members dead %v after the host's SIGKILL (design: within %v)", len(pids), d, hostDeathWithin)
				}
				// The dead host's cgroups are the next Manager's to remove
				// (a kept one, the test's).
				for dir := range cgroups {
					if keep {
						for _, rec := range treeCgroupsBelow(t, dir) {
							treeRemoveCgroup(t, rec)
						}
						treeRemoveCgroup(t, dir)
					}
				}
				if parent != "" && !keep {
					next := proc.NewManager(proc.Options{Containment: proc.ContainCgroup, CgroupParent: parent})
					if _, err := next.Run(ctx, mgrExitReq(0)); err != nil {
						t.Errorf("a Manager on the dead host's parent: Run = %v", err)
					}
					if err := next.Close(); err != nil {
						t.Errorf("Close = %v", err)
					}
				}
			})
		}
	}
}

// hostDeathWithin is design section 14's bound on killing the trees of a
// host that died without Close.
const hostDeathWithin = 100 * time.Millisecond

// limitsHost is the host of TestHostDeath: args are the containment, the
// cgroup parent and KeepOnHostExit. It starts a tree with members that
// leave the child's process group in cgroup mode (setsid, a double fork),
// prints every member's PID, then "ready", and waits to be killed.
func limitsHost(args []string) int {
	keep, _ := strconv.ParseBool(args[2])
	m := proc.NewManager(proc.Options{Containment: proc.Containment(args[0]), CgroupParent: args[1], KeepOnHostExit: keep})
	script := `sleep 600 & echo $!; (sleep 600 & echo $!) ; echo ready`
	if args[0] == string(proc.ContainCgroup) {
		script = `sleep 600 & echo $!; setsid sleep 600 & echo $!; (sleep 600 & echo $!) ; echo ready`
	}
	p, err := m.Start(proc.StartRequest{Command: script})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := p.WaitFor(context.Background(), regexp.MustCompile(`^ready$`), true); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Print(p.Output().Text)
	_, _ = io.Copy(io.Discard, os.Stdin) // until killed: the test holds stdin open
	return 0
}
