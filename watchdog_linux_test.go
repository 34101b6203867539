//go:build linux && !proc_otherunix

package proc_test

// The host-death watchdog (watchdog_unix.go, design section 14): the
// trees of a host killed without Close die with it, and nothing the host
// had seen empty does. Each test runs the test binary as the host.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procvisor/proc"
	"github.com/procvisor/proc/internal/procfs"
	"github.com/procvisor/proc/internal/sandbox"
	"golang.org/x/sys/unix"
)

// TestHostDeath pins section 14: when the host dies without Close
// (SIGKILL), every tree its Manager started dies with it, escapees
// included in cgroup mode (a setsid child and a double fork), every
// registered group in group mode; with KeepOnHostExit they live on. The
// watchdog that kills them may have been killed from outside while the
// host lived (an OOM kill, a `pkill sh`, a sweep of stray processes): the
// next Start replaces it, and the trees die with the host all the same.
// The host is the test binary, re-run as a helper; the bound asserted
// leaves headroom for a loaded machine running -race (the README quotes
// what a quiet one measures).
func TestHostDeath(t *testing.T) {
	t.Parallel()
	hostDeath(t, "", "keep", "watchdog-killed")
}

// hostDeath runs TestHostDeath's host in every tree mode, once per
// variant (limitsHost says what each means), and checks that its trees
// die with it within the bound, or with "keep" outlive it.
func hostDeath(t *testing.T, variants ...string) {
	for _, mode := range treeModes {
		for _, variant := range variants {
			t.Run(strings.TrimSuffix(mode.name+"/"+variant, "/"), func(t *testing.T) {
				t.Parallel()
				ctx := testCtx(t)
				keep := variant == "keep"
				parent := treeOptions(t, mode).CgroupParent
				host := startHost(t, helperCmd("limits-host", string(mode.containment), parent, variant))
				var pids []int
				for _, line := range host.linesUntil("ready") {
					pid, err := strconv.Atoi(line)
					if err != nil {
						host.fatalf(t, "host said %q", line)
					}
					pids = append(pids, pid)
				}
				if len(pids) == 0 {
					host.fatalf(t, "the host started nothing")
				}
				fds := make([]int, len(pids))
				for i, pid := range pids {
					fds[i] = treePidfd(t, pid)
				}
				// Kept members, and those a failed test leaves, die with it.
				t.Cleanup(func() {
					for _, fd := range fds {
						_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
					}
				})
				cgroups := map[string]bool{}
				for _, pid := range pids {
					if dir, ok := treeCgroupOf(t, pid); ok && parent != "" {
						cgroups[filepath.Dir(dir)] = true
					}
				}
				killed := time.Now()
				if err := host.kill(ctx, t); err == nil {
					t.Fatalf("the host exited 0; want it killed")
				}
				if keep {
					for i, fd := range fds {
						if treeExited(fd) {
							t.Errorf("with KeepOnHostExit, member %d died with the host", pids[i])
						}
						_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
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
				// The watchdog removes the dead host's cgroups once its kill
				// emptied them, within its 2 s (a kept one is the test's).
				for dir := range cgroups {
					if keep {
						treeClear(t, dir, treeCgroupsBelow(t, dir))
						continue
					}
					gone, cancel := context.WithTimeout(ctx, 10*watchdogRemovesWithin)
					if err := treeWaitGone(gone, filepath.Dir(dir), filepath.Base(dir)); err != nil {
						t.Errorf("the dead host's cgroup %s (below it: %q) was not removed by its watchdog: %v", dir, treeCgroupsBelow(t, dir), err)
					}
					cancel()
				}
				// A Manager on the same parent still starts (and would
				// remove what the watchdog left).
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

// watchdogRemovesWithin is how long the watchdog tries to remove the dead
// host's emptied cgroups (watchdogScript).
const watchdogRemovesWithin = 2 * time.Second

var _ = helper("limits-host", limitsHost)

// limitsHost is the host of TestHostDeath: args are the containment, the
// cgroup parent and the variant ("keep": KeepOnHostExit; "watchdog-killed":
// a first start brings up the watchdog, which the host then kills;
// "sandbox": the tree is sandboxed, TestSandboxHostDeath). It
// starts a tree with members that leave the child's process group in
// cgroup mode (setsid, a double fork), prints every member's PID, then
// "ready", and waits to be killed.
func limitsHost(args []string) int {
	opts := proc.Options{Containment: proc.Containment(args[0]), CgroupParent: args[1], KeepOnHostExit: args[2] == "keep"}
	if args[2] == "sandbox" {
		opts.Sandbox = &proc.Sandbox{}
	}
	m := proc.NewManager(opts)
	if args[2] == "watchdog-killed" {
		if _, err := m.Run(context.Background(), proc.StartRequest{Args: []string{"true"}}); err != nil {
			return hostFail(err)
		}
		wd := findWatchdog()
		fd, err := unix.PidfdOpen(wd, 0)
		if err != nil {
			return hostFail(fmt.Errorf("the watchdog (PID %d): %w", wd, err))
		}
		_ = unix.Kill(wd, unix.SIGKILL)
		treePollIn(fd, -1)
	}
	script := `sleep 600 & echo $!; (sleep 600 & echo $!) ; echo ready`
	if args[0] == string(proc.ContainCgroup) {
		script = `sleep 600 & echo $!; setsid sleep 600 & echo $!; (sleep 600 & echo $!) ; echo ready`
	}
	p, err := m.Start(proc.StartRequest{Command: script})
	if err != nil {
		return hostFail(fmt.Errorf("Start (variant %q) = %w; want the Manager to keep working", args[2], err))
	}
	if _, err := p.WaitFor(context.Background(), regexp.MustCompile(`^ready$`), true); err != nil {
		return hostFail(err)
	}
	fmt.Print(p.Output().Text)
	return hostWait()
}

// TestWatchdogSparesRecycledGroupID pins design section 14: the watchdog
// "must never kill a tree that was already seen empty (a group ID can be
// recycled)", here a group whose last members were zombies when its tree
// was settled. (Found by review: groupTree.alive decided "no live member"
// from the /proc scan without markGone, so the watchdog kept "+ PGID";
// once the zombie was reaped, a stranger that led a group with that ID
// was killed when the host died.)
//
// The host (a re-executed test binary) is a child subreaper, so the
// child's orphaned background member stays a zombie until the host reaps
// it; it then makes a stranger with the freed ID (ns_last_pid) and prints
// its PID and the watchdog's. The test SIGKILLs the host, waits for the
// watchdog to finish, and expects the stranger alive.
func TestWatchdogSparesRecycledGroupID(t *testing.T) {
	t.Parallel()
	host := startHost(t, helperCmd("review-recycle-host"))
	vals := hostReport(t, host)
	if vals["skip"] == 2 {
		t.Skipf("another process took the freed PID every time (%d tries)", recycleTries)
	}
	wantStrangerSpared(t, host, vals, "the record's group of that ID had been seen empty and released, but the watchdog was never told to forget it")
}

// hostReport reads a host's "name N" lines until "ready". A host whose
// output ends before "ready" gave up (hostFail): the test fails, with how
// the host ended and what it said on its stderr.
func hostReport(t *testing.T, host *testHost) map[string]int {
	t.Helper()
	vals := map[string]int{}
	for {
		line, ok := host.line()
		switch {
		case !ok:
			host.fatalf(t, "host's output ended before \"ready\", after %v", vals)
		case line == "ready":
			return vals
		}
		k, v, _ := strings.Cut(line, " ")
		n, err := strconv.Atoi(v)
		if err != nil {
			host.fatalf(t, "host said %q", line)
		}
		vals[k] = n
	}
}

// wantStrangerSpared kills the host and fails t if its watchdog then kills
// the process group of vals["stranger"], a process that took the ID of a
// group the host's Manager had seen empty (why says how).
func wantStrangerSpared(t *testing.T, host *testHost, vals map[string]int, why string) {
	t.Helper()
	ctx := testCtx(t)
	stranger, watchdog := vals["stranger"], vals["watchdog"]
	if stranger == 0 || watchdog == 0 {
		host.fatalf(t, "host said %v", vals)
	}
	defer func() { _ = syscall.Kill(-stranger, syscall.SIGKILL) }()
	strangerFD := treePidfd(t, stranger)
	watchdogFD := treePidfd(t, watchdog)
	_ = host.kill(ctx, t)
	treeWaitPidfd(ctx, t, watchdogFD, "the watchdog to act and exit")
	// SIGKILL is sent before the watchdog exits; the stranger may take a
	// moment to die. Give it two seconds to show.
	if diesWithin(strangerFD, 2*time.Second) {
		t.Errorf("the host-death watchdog killed process group %d, a stranger's: %s", stranger, why)
	}
}

var _ = helper("review-recycle-host", reviewRecycleHost, "review-zombie-leader")

// reviewRecycleHost is the host of TestWatchdogSparesRecycledGroupID.
func reviewRecycleHost([]string) int {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return hostFail(err)
	}
	m := proc.NewManager(proc.Options{Containment: proc.ContainGroup})
	// A member that has exited and stays a zombie, unreaped by its parent,
	// the leader, which then exits; the orphan comes to us. (Timed by
	// sleeps instead, `(exec sleep 0.05) & echo $!; exec sleep 0.3`, the
	// member could outlive the leader on a loaded machine: the record
	// was then final with a live member, Signal killed it, and the host
	// gave up.)
	p, err := m.Start(helperReq("review-zombie-leader"))
	if err != nil {
		return hostFail(err)
	}
	if err := p.Wait(context.Background()); err != nil {
		return hostFail(err)
	}
	leader := p.Info().PID
	bg, err := strconv.Atoi(strings.TrimSpace(p.Output().Text))
	if err != nil {
		return hostFail(fmt.Errorf("the member's PID: %w", err))
	}
	// The tree is settled: the Manager considers the group gone for good.
	if err := p.Signal(proc.Kill); !errors.Is(err, proc.ErrNotRunning) {
		return hostFail(fmt.Errorf("Signal after final = %v; want ErrNotRunning", err))
	}
	// Reap the zombie: the group ID is free.
	if _, err := unix.Wait4(bg, nil, 0, nil); err != nil {
		return hostFail(fmt.Errorf("reap %d: %w", bg, err))
	}
	return hostStranger(leader)
}

var _ = helper("review-zombie-leader", reviewZombieLeader)

// reviewZombieLeader leads the record's group in reviewRecycleHost: it
// starts a member in its group (true), waits until the member has exited
// without reaping it (WNOWAIT: it stays a zombie), prints the member's PID
// and exits.
func reviewZombieLeader([]string) int {
	member := exec.Command("true")
	if err := member.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "leader:", err)
		return 1
	}
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, member.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
	for errors.Is(err, unix.EINTR) {
		err = unix.Waitid(unix.P_PID, member.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "leader: wait for member %d: %v\n", member.Process.Pid, err)
		return 1
	}
	fmt.Println(member.Process.Pid)
	return 0
}

// hostStranger, in a host, has a stranger take the ID id and lead a group
// of its own, and prints its PID and the watchdog's ("skip 2" if another
// process took the ID every time), then "ready"; it then waits to be
// killed.
func hostStranger(id int) int {
	stranger, err := recycle(id, "exec sleep 600")
	switch {
	case errors.Is(err, errNoRecycle):
		fmt.Println("skip 2")
	case err != nil:
		return hostFail(err)
	default:
		fmt.Println("stranger", stranger.Process.Pid)
		fmt.Println("watchdog", findWatchdog())
	}
	fmt.Println("ready")
	return hostWait()
}

// TestHostDeathDuringStarts pins that a host killed while it starts
// children leaves none. In group mode a child is registered with the
// watchdog only after cmd.Start returned (treeSetup.started →
// newGroupTreeGuarded → guard). A host killed in between must not leave a
// child that runs, leads its own session, and was never told to the
// watchdog (design section 14: "every tree a Manager started is killed
// within 100 ms when the host process dies"); the start's pending mark
// covers it (a "p" mark: without it, or Pdeathsig before it, 3 runs of 3
// left children).
//
// Each round runs a host that starts `sleep 600` children from four
// goroutines without pause, and SIGKILLs it after a random number of
// starts. The children carry a marker in their environment; once the
// watchdog has exited, none may be left.
func TestHostDeathDuringStarts(t *testing.T) {
	t.Parallel()
	hostDeathDuringStarts(t, "")
}

// hostDeathDuringStarts is TestHostDeathDuringStarts with the host's
// children started with policy ("sandbox": sandboxed, a "w" mark, which
// the sweep matches only with no-new-privileges).
func hostDeathDuringStarts(t *testing.T, policy string) {
	ctx := testCtx(t, 120*time.Second)
	const rounds = 10
	escaped := 0
	parent := ""
	if policy == "sandbox-cgroup" {
		parent = treeCgroupParent(t)
	}
	for round := 0; round < rounds; round++ {
		mark := fmt.Sprintf("review-inflight-%d-%d", os.Getpid(), rand.Uint64())
		host := startHost(t, helperCmd("review-inflight-host", mark, policy, parent))
		line, _ := host.line()
		watchdog, _ := strconv.Atoi(strings.TrimPrefix(line, "watchdog "))
		if watchdog == 0 {
			host.fatalf(t, "host: no watchdog")
		}
		wfd := treePidfd(t, watchdog)
		killAt := 20 + rand.IntN(40)
		for n := 0; n < killAt; n++ {
			if _, ok := host.line(); !ok {
				break
			}
		}
		_ = host.kill(ctx, t)
		treeWaitPidfd(ctx, t, wfd, "the watchdog")
		// The watchdog's SIGKILLs may take a moment to end their targets.
		var left []int
		for _, pid := range reviewMarked(mark) {
			fd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				continue
			}
			if !diesWithin(fd, time.Second) {
				left = append(left, pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			_ = unix.Close(fd)
		}
		if len(left) > 0 {
			escaped++
			t.Logf("round %d: %d children outlived the host and its watchdog: %v", round, len(left), left)
		}
	}
	if escaped > 0 {
		t.Errorf("in %d of %d rounds a child started while the host was killed outlived it (group mode registers the group with the watchdog only after the child runs; a sandboxed child in cgroup mode enters its cgroup only at its exec stop)", escaped, rounds)
	}
}

// reviewMarked lists the live processes whose environment holds mark.
func reviewMarked(mark string) []int {
	var pids []int
	for _, pid := range procPIDs() {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !bytes.Contains(env, []byte("REVIEW_MARK="+mark)) {
			continue
		}
		if st, _ := procfs.ReadStat(pid); st.State == 'Z' {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

var _ = helper("review-inflight-host", reviewInflightHost)

// reviewInflightHost starts marked `sleep 600` children in group mode from
// four goroutines, printing a line per start, until it is killed; args[1]
// "sandbox" sandboxes them, and "sandbox-cgroup" sandboxes them in cgroup
// mode below the cgroup args[2].
func reviewInflightHost(args []string) int {
	opts := proc.Options{Containment: proc.ContainGroup}
	switch args[1] {
	case "sandbox":
		opts.Sandbox = &proc.Sandbox{}
	case "sandbox-cgroup":
		opts.Sandbox = &proc.Sandbox{}
		opts.Containment, opts.CgroupParent = proc.ContainCgroup, args[2]
	}
	m := proc.NewManager(opts)
	req := proc.StartRequest{Args: []string{"sleep", "600"}, Env: map[string]string{"REVIEW_MARK": args[0]}}
	if _, err := m.Start(req); err != nil {
		return hostFail(err)
	}
	fmt.Println("watchdog", findWatchdog())
	for range 4 {
		go func() {
			for {
				if _, err := m.Start(req); err != nil {
					hostFail(err)
					return
				}
				fmt.Println("started") // one write: lines do not interleave
			}
		}()
	}
	return hostWait()
}

// TestWatchdogPendingMark pins the watchdog's sweep for pending marks
// (watchdogScript): a host killed while a sandboxed start in group mode
// is under way leaves no child of that start, and the sweep kills nothing
// that differs from such a child in one respect. The host starts
// unregistered children of its own: target, a sandboxed session leader
// (what such a start forks); old, the same started a clock tick before
// the mark; plain, a session leader without no-new-privileges; member, a
// sandboxed group leader that is no session leader; nested, a sandboxed
// session leader whose parent (member) outlives the host. With the mark
// (at target's start time: the bound is inclusive) only target dies with
// the host; without it, none does.
//
// The host runs below a child subreaper of its own, which its orphans
// (and its watchdog) go to: the sweep of another host dying at the same
// moment (the other variant, TestSandboxHostDeathDuringStarts) matches
// only its own reaper's children, and so does this one's.
func TestWatchdogPendingMark(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	needTool(t, "setsid")
	for _, variant := range []string{"marked", "unmarked"} {
		t.Run(variant, func(t *testing.T) {
			t.Parallel()
			reaper := startHost(t, helperCmd("pending-mark-host", variant))
			checkPendingMark(t, reaper, variant == "marked", "target", "old", "plain", "member", "nested")
		})
	}
}

// TestWatchdogPendingMarkReaperReaps is TestWatchdogPendingMark's marked
// variant, with 15 more children like target (target2...), below a
// reaper that reaps a thousand zombies it adopted while the watchdog
// sweeps. The kernel lists a task's children in
// /proc/<pid>/task/<tid>/children by position, looked up afresh for each
// entry the sweep's shell reads (a byte at a time): each child reaped
// before the position read so far shifts the rest, and the read skips an
// entry for each. A reaper busy reaping is what a loaded test run has:
// PID 1 reaps the trees other tests kill, and
// TestSandboxHostDeathDuringStarts, run beside a loop that leaves short
// orphans to PID 1, left a child in 6 of 500 rounds (each one the
// sweep's read had skipped; a read with cat right after listed it). The
// reaper here reaps while the watchdog's read is past the middle of the
// zombies (reapDuringSweep): until the sweep checked that everything it
// listed still exists, this test failed 14 runs of 14, about half of the
// targets outliving the host.
func TestWatchdogPendingMarkReaperReaps(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	needTool(t, "setsid")
	reaper := startHost(t, helperCmd("pending-mark-host", "marked", "reaping"))
	names := []string{"target", "old", "plain", "member", "nested"}
	for i := 2; i <= 16; i++ {
		names = append(names, fmt.Sprint("target", i))
	}
	checkPendingMark(t, reaper, true, names...)
}

// TestWatchdogPlainPendingMark is TestWatchdogPendingMark for a start in
// group mode that is not sandboxed, which a pending mark covers too (no
// Pdeathsig: it fires when the forking thread ends, and its hop to a
// fresh goroutine cost 7% of a start of true). Its child has no
// no-new-privileges, and the sweep for a plain mark does not ask for it:
// with the mark only target, a plain session leader started at the mark's
// tick, dies with the host, not old (started a tick before), member (no
// session leader), nested (its parent outlives the host) or watchdog, a
// session leader started after target whose argv[0] is a watchdog's (the
// watchdog of another host that died in the same instant, which must go
// on to kill its own host's trees: TestSandboxHostDeathDuringStarts
// failed once, run beside TestHostDeathDuringStarts, before the sweep
// spared it); without the mark none dies. TestHostDeathDuringStarts
// kills hosts in the middle of such starts.
func TestWatchdogPlainPendingMark(t *testing.T) {
	t.Parallel()
	needTool(t, "setsid")
	for _, variant := range []string{"plain-marked", "plain-unmarked"} {
		t.Run(variant, func(t *testing.T) {
			t.Parallel()
			// elsewhere, a session leader started like target but in
			// another cgroup, must survive: the sweep looks only in the
			// host's cgroup.
			elsewhere := treeCgroupParent(t)
			reaper := startHost(t, helperCmd("pending-mark-host", variant, elsewhere))
			checkPendingMark(t, reaper, variant == "plain-marked", "target", "old", "member", "nested", "watchdog-like", "elsewhere")
		})
	}
}

// checkPendingMark kills the host below reaper (pendingMarkHost) once it
// is ready and checks, for each of the children it named, that it died
// with the host if and only if marked and it is "target".
func checkPendingMark(t *testing.T, reaper *testHost, marked bool, names ...string) {
	t.Helper()
	ctx := testCtx(t)
	vals := hostReport(t, reaper)
	fds := map[string]int{}
	for _, name := range names {
		if vals[name] == 0 || vals["host"] == 0 {
			reaper.fatalf(t, "host said %v", vals)
		}
		fds[name] = treePidfd(t, vals[name])
	}
	t.Cleanup(func() {
		for _, fd := range fds {
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		}
	})
	watchdogFD := treePidfd(t, vals["watchdog"])
	killed := time.Now()
	if err := unix.PidfdSendSignal(treePidfd(t, vals["host"]), unix.SIGKILL, nil, 0); err != nil {
		reaper.fatalf(t, "kill the host: %v", err)
	}
	treeWaitPidfd(ctx, t, watchdogFD, "the watchdog to act and exit")
	t.Logf("the watchdog exited %v after the host's SIGKILL", time.Since(killed))
	// The watchdog sent its SIGKILLs before it exited; give them two
	// seconds to show.
	shown, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, name := range names {
		want := marked && strings.HasPrefix(name, "target")
		if got := treeExitsBy(shown, fds[name]); got != want {
			t.Errorf("%s (PID %d): died with the host %v; want %v", name, vals[name], got, want)
		}
	}
}

var _ = helper("pending-mark-host", pendingMarkHost, "zombies-host")

// pendingMarkHost is the host of TestWatchdogPendingMark and
// TestWatchdogPlainPendingMark: args[0] "marked" writes a sandboxed
// start's pending mark, "plain-marked" a plain start's, and with
// "plain-marked" or "plain-unmarked" no child is sandboxed and there is
// no "plain" child but an "elsewhere" one, cloned into the cgroup
// args[1]. With "marked", args[1] "reaping" adds target2 to target16
// (TestWatchdogPendingMarkReaperReaps) and has the subreaper adopt a
// thousand zombies before the host and reap them once it died. Run
// without a last argument "host", it is the subreaper: it runs the host
// as its child and waits for the end of its stdin. The host
// prints its PID, the children's and the watchdog's, then "ready", and
// waits to be killed.
func pendingMarkHost(args []string) int {
	if args[len(args)-1] != "host" {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return hostFail(err)
		}
		var zombies []int
		if len(args) > 1 && args[1] == "reaping" {
			var err error
			if zombies, err = adoptZombies(1000); err != nil {
				return hostFail(err)
			}
		}
		host := helperCmd("pending-mark-host", append(args, "host")...)
		host.Stdin, host.Stdout, host.Stderr = os.Stdin, os.Stdout, os.Stderr
		reaped := make(chan struct{})
		if zombies == nil {
			close(reaped)
		} else {
			// The host's lines pass through, and its watchdog's PID to
			// reapDuringSweep.
			out, w, err := os.Pipe()
			if err != nil {
				return hostFail(err)
			}
			host.Stdout = w
			defer out.Close()
			watchdog := make(chan int, 1)
			// Stopped at the end of the host's output (its death).
			go func() {
				lines := bufio.NewScanner(out)
				for lines.Scan() {
					fmt.Println(lines.Text())
					if v, ok := strings.CutPrefix(lines.Text(), "watchdog "); ok {
						pid, _ := strconv.Atoi(v)
						watchdog <- pid
					}
				}
				close(watchdog)
			}()
			// Stopped once the zombies are reaped.
			go func() {
				reapDuringSweep(<-watchdog, zombies)
				close(reaped)
			}()
			err = host.Start()
			_ = w.Close()
			if err != nil {
				return hostFail(err)
			}
		}
		var err error
		if zombies == nil {
			err = host.Run()
		} else {
			err = host.Wait()
		}
		if err == nil {
			return hostFail(errors.New("the host exited 0; want it killed"))
		}
		<-reaped
		return hostWait()
	}
	plainStarts := strings.HasPrefix(args[0], "plain-")
	var sup sandbox.Support
	if !plainStarts {
		var err error
		if sup, err = sbSupport(); err != nil {
			return hostFail(err)
		}
	}
	m := proc.NewManager(proc.Options{Containment: proc.ContainGroup})
	if _, err := m.Run(context.Background(), proc.StartRequest{Args: []string{"true"}}); err != nil {
		return hostFail(err)
	}
	// Found before watchdog-like, which findWatchdog would take for it.
	watchdog := findWatchdog()
	// start starts an unregistered child, sandboxed or not, leading a
	// session of its own or only a process group.
	start := func(sandboxed, leader bool, stdout *os.File, args ...string) (int, error) {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdout = stdout
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: leader, Setpgid: !leader}
		if !sandboxed || plainStarts {
			err := cmd.Start()
			if err != nil {
				return 0, err
			}
			return cmd.Process.Pid, nil
		}
		h, err := sandbox.Start(cmd, cmd.Start, sandbox.Policy{}, sup)
		if err != nil {
			return 0, err
		}
		h.Release()
		return cmd.Process.Pid, nil
	}
	startTime := func(pid int) (int64, error) {
		st, ok := procfs.ReadStat(pid)
		if !ok {
			return 0, fmt.Errorf("no stat for %d", pid)
		}
		return int64(st.StartTime), nil
	}
	pids := map[string]int{}
	var err error
	if pids["old"], err = start(true, true, nil, "sleep", "600"); err != nil {
		return hostFail(err)
	}
	oldStart, err := startTime(pids["old"])
	if err != nil {
		return hostFail(err)
	}
	// The next children start at a later tick than old (a tick is 10 ms).
	for bootTicks() <= oldStart {
		runtime.Gosched()
	}
	if pids["target"], err = start(true, true, nil, "sleep", "600"); err != nil {
		return hostFail(err)
	}
	if len(args) > 1 && args[1] == "reaping" {
		// More children like target: the sweep must find every one.
		for i := 2; i <= 16; i++ {
			if pids[fmt.Sprint("target", i)], err = start(true, true, nil, "sleep", "600"); err != nil {
				return hostFail(err)
			}
		}
	}
	if !plainStarts {
		if pids["plain"], err = start(false, true, nil, "sleep", "600"); err != nil {
			return hostFail(err)
		}
	} else {
		like := exec.Command("sleep", "600")
		like.Args[0] = "proc-watchdog"
		like.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := like.Start(); err != nil {
			return hostFail(err)
		}
		pids["watchdog-like"] = like.Process.Pid
		dir, err := os.Open(args[1])
		if err != nil {
			return hostFail(err)
		}
		away := exec.Command("sleep", "600")
		away.SysProcAttr = &syscall.SysProcAttr{Setsid: true, UseCgroupFD: true, CgroupFD: int(dir.Fd())}
		err = away.Start()
		_ = dir.Close()
		if err != nil {
			return hostFail(err)
		}
		pids["elsewhere"] = away.Process.Pid
	}
	r, w, err := os.Pipe()
	if err != nil {
		return hostFail(err)
	}
	// nested says its PID once it leads its session.
	pids["member"], err = start(true, false, w, "sh", "-c", `setsid sh -c 'echo $$; exec sleep 600' & exec sleep 600`)
	_ = w.Close()
	if err != nil {
		return hostFail(err)
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if pids["nested"], _ = strconv.Atoi(strings.TrimSpace(line)); pids["nested"] == 0 {
		return hostFail(fmt.Errorf("nested said %q: %v", line, err))
	}
	if args[0] == "marked" || args[0] == "plain-marked" {
		at, err := startTime(pids["target"])
		if err == nil && plainStarts {
			err = proc.MarkPendingPlainStart(m, at)
		} else if err == nil {
			err = proc.MarkPendingStart(m, at)
		}
		if err != nil {
			return hostFail(err)
		}
	}
	for name, pid := range pids {
		fmt.Println(name, pid)
	}
	fmt.Println("host", os.Getpid())
	fmt.Println("watchdog", watchdog)
	fmt.Println("ready")
	return hostWait()
}

// reapDuringSweep reaps zombies (this process's adopted children, the
// first ones in its first thread's children list) while the watchdog
// (PID watchdog), which becomes this process's child with the host's
// other orphans when the host dies, reads that list, past the middle of
// the zombies and so before the orphans, which are put at the list's end.
// Reaped faster than the watchdog reads, they shift the entries after its
// position by more than are left to read: a read that looks each entry up
// by its index then ends without the orphans. It returns once the
// zombies are reaped.
func reapDuringSweep(watchdog int, zombies []int) {
	list := fmt.Sprintf("/proc/%d/task/%d/children", os.Getpid(), os.Getpid())
	// middle is the offset in the list's text of the middle zombie.
	middle := 0
	for _, pid := range zombies[:len(zombies)/2] {
		middle += len(strconv.Itoa(pid)) + 1
	}
	// Polled from the host's report (just before the test kills it) until
	// the watchdog's stdin, which the sweep's read redirects from the
	// list, is the list read past middle, or the watchdog is gone.
	for watchdog != 0 {
		fd0, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/0", watchdog))
		if fd0 == list {
			var pos int
			info := readFileString(fmt.Sprintf("/proc/%d/fdinfo/0", watchdog))
			if _, err := fmt.Sscanf(info, "pos: %d", &pos); err == nil && pos >= middle {
				break
			}
		}
		if st, ok := procfs.ReadStat(watchdog); !ok || st.State == 'Z' {
			break
		}
	}
	for _, pid := range zombies {
		_, _ = unix.Wait4(pid, nil, 0, nil)
	}
}

// readFileString is the content of the file name, "" if it cannot be
// read.
func readFileString(name string) string {
	b, _ := os.ReadFile(name)
	return string(b)
}

// adoptZombies has a child (zombiesHost) leave n zombies and exit, and
// returns their PIDs: this process, a subreaper, adopts them as it will
// adopt the host's orphans, into its first thread's children list, which
// is the list the watchdog reads (a child this process forks itself is on
// the list of the thread that forked it).
func adoptZombies(n int) ([]int, error) {
	cmd := helperCmd("zombies-host", strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("zombies-host: %w", err)
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("zombies-host said %q", f)
		}
		pids = append(pids, pid)
	}
	if len(pids) != n {
		return nil, fmt.Errorf("zombies-host left %d zombies; want %d", len(pids), n)
	}
	return pids, nil
}

var _ = helper("zombies-host", zombiesHost)

// zombiesHost starts args[0] children that exit at once, prints their
// PIDs once every one of them has exited (unreaped, a zombie), and exits,
// leaving them to its reaper.
func zombiesHost(args []string) int {
	n, _ := strconv.Atoi(args[0])
	path, err := exec.LookPath("true")
	if err != nil {
		return hostFail(err)
	}
	for range n {
		pid, err := syscall.ForkExec(path, []string{"true"}, &syscall.ProcAttr{})
		if err != nil {
			return hostFail(err)
		}
		var info unix.Siginfo
		err = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		for errors.Is(err, unix.EINTR) {
			err = unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		}
		if err != nil {
			return hostFail(fmt.Errorf("wait for %d: %w", pid, err))
		}
		fmt.Println(pid)
	}
	return 0
}

// bootTicks is the time since boot in the clock ticks of
// /proc/<pid>/stat (hundredths of a second).
func bootTicks() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts)
	return ts.Nano() / 1e7
}

// TestWatchdogPendingMarkRefused pins that a sandboxed start in group mode
// whose pending mark cannot be written fails before its fork (the host's
// death would leave its child running) and starts nothing, and that the
// next start replaces the watchdog and succeeds.
func TestWatchdogPendingMarkRefused(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	ctx, m := testManager(t, proc.Options{Containment: proc.ContainGroup, Sandbox: &proc.Sandbox{}})
	if _, err := m.Run(ctx, proc.StartRequest{Args: []string{"true"}}); err != nil {
		t.Fatalf("first Run: %v", err)
	}
	proc.BreakWatchdogFile(m)
	mark := fmt.Sprintf("mark-refused-%d-%d", os.Getpid(), rand.Uint64())
	p, err := m.Start(proc.StartRequest{Args: []string{"sleep", "60"}, Env: map[string]string{"REVIEW_MARK": mark}})
	if err == nil {
		_ = p.Signal(proc.Kill)
		t.Fatalf("Start with a groups file that cannot be written succeeded")
	}
	// "mark a start": the mark's own error, before the fork (a start
	// that forked without a mark fails later, at its group's registration,
	// also naming the host-death watchdog).
	if !strings.Contains(err.Error(), "host-death watchdog: mark a start") {
		t.Errorf("Start = %v; want it to say the host-death watchdog could not mark the start", err)
	}
	if pids := reviewMarked(mark); len(pids) > 0 {
		t.Errorf("the refused start left processes %v", pids)
	}
	// It registers its group with a new watchdog: the broken one is lost.
	if _, err := m.Run(ctx, proc.StartRequest{Args: []string{"true"}}); err != nil {
		t.Fatalf("Run after the refused start: %v", err)
	}
}

// TestWatchdogSparesGroupIDRegisteredTwice pins that a group ID registered
// twice is forgotten twice. A record's leader is reaped while a member of its group lives on; the
// member dies and is reaped before anything looks at the group again (here
// the record is not final yet: a member that left the group with setsid
// holds its stdout). The ID is free, and the next child the Manager starts
// may get it: guard(P) runs while the first group's slot still holds P.
// The watchdog kept one slot per ID, so the second registration orphaned
// the first slot, the first group's forget blanked the second group's
// slot, and the second group's forget found nothing: P stayed in the file
// after both groups were seen empty, and a stranger that later leads group
// P dies with the host (design section 14: never kill a tree already seen
// empty).
func TestWatchdogSparesGroupIDRegisteredTwice(t *testing.T) {
	t.Parallel()
	host := startHost(t, helperCmd("review-dup-host"))
	vals := hostReport(t, host)
	switch vals["skip"] {
	case 1:
		t.Skip("cannot write " + nsLastPID + " (needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE) to steer PIDs")
	case 2:
		t.Skipf("another process took the freed PID every time (%d tries)", recycleTries)
	}
	wantStrangerSpared(t, host, vals, "two records of the Manager had led a group of that ID in turn, and both were seen empty")
}

var _ = helper("review-dup-host", reviewDupHost)

// reviewDupHost is the host of TestWatchdogSparesGroupIDRegisteredTwice.
// It is a subreaper, so that it reaps the first record's member itself
// (and so decides when the ID is free). It prints "skip 1" where PIDs cannot be
// steered, "skip 2" where the ID could not be recycled, otherwise the
// stranger's PID and the watchdog's; then "ready".
func reviewDupHost([]string) int {
	cur, err := os.ReadFile(nsLastPID)
	if err == nil {
		err = os.WriteFile(nsLastPID, bytes.TrimSpace(cur), 0)
	}
	if errors.Is(err, os.ErrPermission) {
		fmt.Println("skip 1")
		fmt.Println("ready")
		return hostWait()
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return hostFail(err)
	}
	ctx := context.Background()
	// The first record's drain never ends on its own: it stays not final
	// until its stdout closes.
	m := proc.NewManager(proc.Options{Containment: proc.ContainGroup, DrainQuiet: time.Hour, DrainTimeout: time.Hour})
	// A holder out of the group (setsid) keeps stdout open; a member in
	// the group outlives the leader.
	p1, err := m.Start(proc.StartRequest{Command: `setsid sleep 600 & echo holder $!; sleep 600 & echo member $!; echo ok`})
	if err != nil {
		return hostFail(err)
	}
	if _, err := p1.WaitFor(ctx, regexp.MustCompile(`^ok$`), true); err != nil {
		return hostFail(err)
	}
	pids := map[string]int{}
	for _, line := range strings.Split(p1.Output().Text, "\n") {
		k, v, _ := strings.Cut(line, " ")
		pids[k], _ = strconv.Atoi(v)
	}
	leader, holder, member := p1.Info().PID, pids["holder"], pids["member"]
	if holder == 0 || member == 0 {
		return hostFail(fmt.Errorf("first record said %q", p1.Output().Text))
	}
	// The leader exits after "ok" and the exit goroutine reaps it (then
	// looks at the group once: the member lives). kill(leader, 0) fails
	// once it is reaped: its group still holds the ID, so nobody else has
	// it yet.
	for !errors.Is(unix.Kill(leader, 0), unix.ESRCH) {
		runtime.Gosched()
	}
	// The member dies; the host reaps it: group `leader` is gone, its ID
	// free, and nothing looked (the record is not final).
	_ = unix.Kill(member, unix.SIGKILL)
	if _, err := unix.Wait4(member, nil, 0, nil); err != nil {
		return hostFail(fmt.Errorf("reap member %d: %w", member, err))
	}
	// The Manager's next child takes the ID.
	var p2 *proc.Process
	for range recycleTries {
		if err := os.WriteFile(nsLastPID, []byte(strconv.Itoa(leader-1)), 0); err != nil {
			return hostFail(err)
		}
		p, err := m.Start(proc.StartRequest{Args: []string{"sleep", "600"}})
		if err != nil {
			return hostFail(err)
		}
		if p.Info().PID == leader {
			p2 = p
			break
		}
		_ = p.Signal(proc.Kill)
		_ = p.Wait(ctx)
	}
	if p2 == nil {
		fmt.Println("skip 2")
		fmt.Println("ready")
		return hostWait()
	}
	// The first record becomes final: its stdout closes. Its tree is
	// settled (the leader's PID names a newcomer: gone).
	_ = unix.Kill(holder, unix.SIGKILL)
	if _, err := unix.Wait4(holder, nil, 0, nil); err != nil {
		return hostFail(fmt.Errorf("reap holder %d: %w", holder, err))
	}
	if err := p1.Wait(ctx); err != nil {
		return hostFail(err)
	}
	// The second record's group dies and is seen empty.
	if err := p2.Signal(proc.Kill); err != nil {
		return hostFail(err)
	}
	if err := p2.Wait(ctx); err != nil {
		return hostFail(err)
	}
	if err := p2.Signal(proc.Kill); !errors.Is(err, proc.ErrNotRunning) {
		return hostFail(fmt.Errorf("Signal after final = %v; want ErrNotRunning", err))
	}
	return hostStranger(leader)
}
