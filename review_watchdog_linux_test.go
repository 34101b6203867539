//go:build linux

package proc_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procvisor/proc"
)

func init() {
	helpers["review-recycle-host"] = reviewRecycleHost
}

// TestReviewWatchdogKillsRecycledGroup: design section 14 says the
// watchdog "must never kill a tree that was already seen empty (a group ID
// can be recycled)". A group tree is told to the watchdog to forget only
// through groupTree.markGone; but when the record becomes final and its
// tree is settled, tree.alive() → groupTree.alive() decides "no live
// member" from the /proc scan (only zombies left) and returns false
// WITHOUT markGone. The tree is marked gone and released, yet the watchdog
// keeps "+ PGID". Once the zombie is reaped the ID is free; a stranger
// that later leads a group with that ID is killed when the host dies.
//
// The host (a re-executed test binary) is a child subreaper, so the
// child's orphaned background member stays a zombie until the host reaps
// it; it then makes a stranger with the freed ID (ns_last_pid) and prints
// its PID and the watchdog's. The test SIGKILLs the host, waits for the
// watchdog to finish, and expects the stranger alive.
func TestReviewWatchdogKillsRecycledGroup(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	host := helperCmd("review-recycle-host")
	host.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	host.Stderr = os.Stderr
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := host.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- host.Wait() }()
	vals := map[string]int{}
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "ready" {
		k, v, _ := strings.Cut(sc.Text(), " ")
		n, err := strconv.Atoi(v)
		if err != nil {
			_ = host.Process.Kill()
			t.Fatalf("host said %q (%v)", sc.Text(), <-exited)
		}
		vals[k] = n
	}
	stranger, watchdog := vals["stranger"], vals["watchdog"]
	if stranger == 0 || watchdog == 0 {
		_ = host.Process.Kill()
		if skip, ok := vals["skip"]; ok {
			t.Skipf("could not make a process with the freed PID (%d tries)", skip)
		}
		t.Fatalf("host said %v (%v)", vals, <-exited)
	}
	defer func() { _ = syscall.Kill(-stranger, syscall.SIGKILL) }()
	strangerFD := treePidfd(t, stranger)
	watchdogFD := treePidfd(t, watchdog)
	t.Logf("the record's group %d was settled and its zombie reaped; stranger %d now leads group %d", stranger, stranger, stranger)

	_ = host.Process.Signal(syscall.SIGKILL)
	recv(ctx, t, exited, "the host's end")
	treeWaitPidfd(ctx, t, watchdogFD, "the watchdog to act and exit")
	// SIGKILL is sent before the watchdog exits; the stranger may take a
	// moment to die. Give it two seconds to show.
	if diesWithin(strangerFD, 2*time.Second) {
		t.Errorf("the host-death watchdog killed process group %d, which belonged to a stranger: the record's group of that ID had been seen empty and released, but the watchdog was never told to forget it", stranger)
	}
}

// reviewRecycleHost is the host of TestReviewWatchdogKillsRecycledGroup.
func reviewRecycleHost([]string) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "host:", err); return 1 }
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail(err)
	}
	m := proc.NewManager(proc.Options{Containment: proc.ContainGroup})
	// A background member that exits at once and stays a zombie (its
	// parent execs sleep, then dies, and the orphan comes to us).
	p, err := m.Start(proc.StartRequest{Command: `(exec sleep 0.05) & echo "bg $!"; exec sleep 0.3`})
	if err != nil {
		return fail(err)
	}
	if err := p.Wait(context.Background()); err != nil {
		return fail(err)
	}
	leader := p.Info().PID
	line := regexp.MustCompile(`(?m)^bg (\d+)$`).FindStringSubmatch(p.Output().Text)
	if line == nil {
		return fail(fmt.Errorf("no bg line in %q", p.Output().Text))
	}
	bg, _ := strconv.Atoi(line[1])
	// The tree is settled: the Manager considers the group gone for good.
	if err := p.Signal(proc.Kill); !errors.Is(err, proc.ErrNotRunning) {
		return fail(fmt.Errorf("Signal after final = %v; want ErrNotRunning", err))
	}
	// Reap the zombie: the group ID is free.
	var ws unix.WaitStatus
	if _, err := unix.Wait4(bg, &ws, 0, nil); err != nil {
		return fail(fmt.Errorf("reap %d: %w", bg, err))
	}
	// A stranger takes the ID and leads a group of its own.
	var stranger *exec.Cmd
	for try := 0; try < 200 && stranger == nil; try++ {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(leader-1)), 0); err != nil {
			return fail(err)
		}
		c := exec.Command("sleep", "600")
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := c.Start(); err != nil {
			return fail(err)
		}
		if c.Process.Pid == leader {
			stranger = c
			break
		}
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	if stranger == nil {
		fmt.Println("skip 200")
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin)
		return 0
	}
	fmt.Println("stranger", stranger.Process.Pid)
	fmt.Println("watchdog", findWatchdog())
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // until killed
	return 0
}

func init() {
	helpers["review-watchdog-killed-host"] = reviewWatchdogKilledHost
}

// TestReviewWatchdogKilledFromOutside: nothing notices when the watchdog
// dies while the host lives (an OOM kill, a `pkill sh`, a sweep of stray
// processes). The Manager keeps the dead guard and never starts another:
//
//   - group mode: every later Start fails for good (the "+ PGID" write
//     meets EPIPE), with an error that wraps no sentinel, and the child it
//     had already started is killed with cmd.Process.Kill (its leader
//     only);
//   - cgroup mode: Start succeeds, but nothing kills the trees when the
//     host dies, silently breaking design section 14.
//
// The host kills its watchdog, starts a child after that, prints its PID,
// and is then SIGKILLed; the child must die with it.
func TestReviewWatchdogKilledFromOutside(t *testing.T) {
	t.Parallel()
	for _, mode := range treeModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			parent := treeOptions(t, mode).CgroupParent
			host := helperCmd("review-watchdog-killed-host", string(mode.containment), parent)
			host.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			host.Stderr = os.Stderr
			out, err := host.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			in, err := host.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			if err := host.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- host.Wait() }()
			sc := bufio.NewScanner(out)
			var child int
			for sc.Scan() && sc.Text() != "ready" {
				if rest, ok := strings.CutPrefix(sc.Text(), "start error: "); ok {
					t.Errorf("Start after the watchdog was killed from outside = %s; want the Manager to keep working (start a new watchdog)", rest)
					continue
				}
				child, _ = strconv.Atoi(strings.TrimPrefix(sc.Text(), "child "))
			}
			_ = host.Process.Signal(syscall.SIGKILL)
			recv(ctx, t, exited, "the host's end")
			if child == 0 {
				return
			}
			fd := treePidfd(t, child)
			defer func() {
				if dir, ok := treeCgroupOf(t, child); ok && parent != "" {
					_ = os.WriteFile(dir+"/cgroup.kill", []byte("1"), 0)
				}
				_ = syscall.Kill(-child, syscall.SIGKILL)
				if parent != "" {
					// The dead host's cgroups are the next Manager's to remove.
					next := proc.NewManager(proc.Options{Containment: proc.ContainCgroup, CgroupParent: parent})
					_, _ = next.Run(ctx, proc.StartRequest{Args: []string{"true"}})
					_ = next.Close()
				}
			}()
			if !diesWithin(fd, 10*hostDeathWithin) {
				t.Errorf("child %d started after the watchdog was killed outlived its host by %v: nothing guards the trees any more (design section 14)", child, 10*hostDeathWithin)
			}
		})
	}
}

// reviewWatchdogKilledHost: args are the containment and cgroup parent.
func reviewWatchdogKilledHost(args []string) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "host:", err); return 1 }
	m := proc.NewManager(proc.Options{Containment: proc.Containment(args[0]), CgroupParent: args[1]})
	p, err := m.Start(proc.StartRequest{Args: []string{"true"}})
	if err != nil {
		return fail(err)
	}
	_ = p.Wait(context.Background())
	wd := findWatchdog()
	if wd == 0 {
		return fail(errors.New("no watchdog"))
	}
	fd, err := unix.PidfdOpen(wd, 0)
	if err != nil {
		return fail(err)
	}
	_ = unix.Kill(wd, unix.SIGKILL)
	_, _ = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, -1)
	p, err = m.Start(proc.StartRequest{Args: []string{"sleep", "600"}})
	if err != nil {
		fmt.Println("start error:", err)
	} else {
		fmt.Println("child", p.Info().PID)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // until killed
	return 0
}
