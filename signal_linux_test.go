package proc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/quartz"
	"golang.org/x/sys/unix"

	"github.com/procvisor/proc"
)

const nsLastPID = "/proc/sys/kernel/ns_last_pid"

func init() {
	// recycled-pgid hands the group ID of a final record to an unrelated
	// process group and checks that neither Signal nor Close reaches it.
	// It runs in a process of its own: it makes itself a subreaper and
	// reaps grandchildren, which must not touch other tests' children.
	helpers["recycled-pgid"] = recycledPGID
}

// TestSignalNeverReachesRecycledGroup pins section 6: a final record's
// group is signalled only while it still has live members, so that a
// recycled ID is never hit. The helper steers the kernel's next PID
// (ns_last_pid) to give a final record's group ID to a stranger, in two
// ways: a group that was empty when its leader was reaped (settled at
// once), and one that still had a member then, which died unobserved (the
// stranger then owns the PID, which proves the old group gone).
func TestSignalNeverReachesRecycledGroup(t *testing.T) {
	t.Parallel()
	f, err := os.OpenFile(nsLastPID, os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("cannot steer PIDs: %v", err)
	}
	_ = f.Close()
	ctx := testCtx(t, 60*time.Second)
	m := newManager(t, proc.Options{})
	snap := waitFinal(ctx, t, mustStart(t, m, helperReq("recycled-pgid")))
	switch code := exitCode(t, snap.Info); {
	case code == 3:
		t.Skipf("the helper could not recycle a PID:\n%s", snap.Output.Text)
	case code != 0 || !strings.Contains(snap.Output.Text, "ok"):
		t.Errorf("recycled-pgid exit %d:\n%s", code, snap.Output.Text)
	}
}

// errNoRecycle: another process took the PID every time (exit code 3).
var errNoRecycle = errors.New("could not recycle the PID")

func recycledPGID([]string) int {
	fail := func(format string, args ...any) int {
		fmt.Printf(format+"\n", args...)
		return 1
	}
	// Opening ns_last_pid works for anyone; writing needs a capability
	// (CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE). Write back what it holds.
	cur, err := os.ReadFile(nsLastPID)
	if err == nil {
		err = os.WriteFile(nsLastPID, bytes.TrimSpace(cur), 0)
	}
	if errors.Is(err, fs.ErrPermission) {
		fmt.Println("cannot steer PIDs:", err)
		return 3
	}
	// Orphaned grandchildren come to this process, which reaps them: the
	// test controls when a group's last member is gone.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail("PR_SET_CHILD_SUBREAPER: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	m := proc.NewManager(proc.Options{})
	closed := false
	defer func() {
		if !closed {
			_ = m.Close()
		}
	}()
	run := func(req proc.StartRequest) (*proc.Process, error) {
		p, err := m.Start(req)
		if err != nil {
			return nil, err
		}
		if err := p.Wait(ctx); err != nil {
			return nil, err
		}
		return p, nil
	}

	// A: the group is empty when its leader is reaped. The stranger's
	// leader exits at once and leaves a member, so no process has the PID.
	empty, err := run(proc.StartRequest{Args: []string{"true"}})
	if err != nil {
		return fail("true: %v", err)
	}
	pgidA := empty.Info().PID
	strangerA, err := recycle(pgidA, "sleep 30 & exit 0")
	if errors.Is(err, errNoRecycle) {
		fmt.Println(err)
		return 3
	}
	if err != nil {
		return fail("recycle %d: %v", pgidA, err)
	}
	defer killGroup(pgidA)
	if err := strangerA.Wait(); err != nil {
		return fail("stranger A's leader: %v", err)
	}

	// B: the group still has a member when its leader is reaped; the
	// member dies later, and nobody asks the library about it meanwhile.
	left, err := run(proc.StartRequest{Command: "sleep 30 & echo $!"})
	if err != nil {
		return fail("sleep & echo: %v", err)
	}
	pgidB := left.Info().PID
	member, err := strconv.Atoi(strings.TrimSpace(left.Output().Text))
	if err != nil {
		return fail("member PID %q: %v", left.Output().Text, err)
	}
	if err := unix.Kill(member, unix.SIGKILL); err != nil {
		return fail("kill member %d: %v", member, err)
	}
	if _, err := unix.Wait4(member, nil, 0, nil); err != nil {
		return fail("reap member %d: %v", member, err)
	}
	if err := unix.Kill(-pgidB, 0); !errors.Is(err, unix.ESRCH) {
		return fail("group %d still has members after its last died: kill = %v", pgidB, err)
	}
	_, err = recycle(pgidB, "sleep 30")
	if errors.Is(err, errNoRecycle) {
		fmt.Println(err)
		return 3
	}
	if err != nil {
		return fail("recycle %d: %v", pgidB, err)
	}
	defer killGroup(pgidB)

	for _, c := range []struct {
		name string
		p    *proc.Process
		pgid int
	}{{"A (empty at reap)", empty, pgidA}, {"B (member died later)", left, pgidB}} {
		if err := c.p.Signal(proc.Kill); !errors.Is(err, proc.ErrNotRunning) {
			return fail("%s: Signal(Kill) on the final record = %v; want ErrNotRunning", c.name, err)
		}
		if err := m.Signal(c.p.ID(), proc.Terminate); !errors.Is(err, proc.ErrNotRunning) {
			return fail("%s: Manager.Signal(Terminate) = %v; want ErrNotRunning", c.name, err)
		}
		if !groupAlive(c.pgid) {
			return fail("%s: the stranger's group %d was signalled", c.name, c.pgid)
		}
	}
	// Remove the records, so that their groups are the Manager's orphans,
	// which Close stops too.
	for _, p := range []*proc.Process{empty, left} {
		if err := m.Remove(p.ID()); err != nil {
			return fail("Remove(%s) = %v", p.ID(), err)
		}
	}
	closed = true
	if err := m.Close(); err != nil {
		return fail("Close() = %v", err)
	}
	for _, pgid := range []int{pgidA, pgidB} {
		if !groupAlive(pgid) {
			return fail("Close signalled the stranger's group %d", pgid)
		}
	}
	fmt.Println("ok")
	return 0
}

// recycle starts sh -c script as the leader of a new process group whose
// ID is pid, by setting the kernel's last PID to pid-1 first. Another
// process may take the PID first; it tries again a few times.
func recycle(pid int, script string) (*exec.Cmd, error) {
	for range 50 {
		if err := os.WriteFile(nsLastPID, []byte(strconv.Itoa(pid-1)), 0); err != nil {
			return nil, err
		}
		cmd := exec.Command("sh", "-c", script)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		if cmd.Process.Pid == pid {
			return cmd, nil
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		killGroup(cmd.Process.Pid)
	}
	return nil, fmt.Errorf("PID %d: %w", pid, errNoRecycle)
}

// groupAlive reports whether a process of group pgid is alive and not a
// zombie: the stranger's members are all this process's children or
// grandchildren, so a wait that finds none exited settles it.
func groupAlive(pgid int) bool {
	var status unix.WaitStatus
	pid, err := unix.Wait4(-pgid, &status, unix.WNOHANG, nil)
	return err == nil && pid == 0
}

// killGroup kills group pgid and reaps its members (this process is their
// parent or their subreaper).
func killGroup(pgid int) {
	_ = unix.Kill(-pgid, unix.SIGKILL)
	for {
		if _, err := unix.Wait4(-pgid, nil, 0, nil); err != nil {
			return
		}
	}
}

// TestTreeWatchedUntilEmpty pins the registry of trees: a tree that
// outlives its record (a background child) stays with the Manager after the
// record is dropped, so Signal still reaches it, and it is let go once it
// is empty without any timer: no reap timer stays armed for it, and in
// cgroup mode its cgroup directory is removed.
func TestTreeWatchedUntilEmpty(t *testing.T) {
	t.Parallel()
	for _, mode := range treeModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			const retain = time.Minute
			ctx := testCtx(t)
			mClock := quartz.NewMock(t)
			opts := treeOptions(t, mode)
			opts.RetainExited = retain
			m := mockManager(t, mClock, opts)
			p := mustStart(t, m, proc.StartRequest{Command: "sleep 30 >/dev/null 2>&1 & echo $!"})
			snap := waitFinal(ctx, t, p)
			member, err := strconv.Atoi(strings.TrimSpace(snap.Output.Text))
			if err != nil {
				t.Fatalf("member PID %q: %v", snap.Output.Text, err)
			}
			pidfd, err := unix.PidfdOpen(member, 0)
			if err != nil {
				t.Fatalf("pidfd_open(%d): %v", member, err)
			}
			defer unix.Close(pidfd)
			cgroupDir := ""
			if mode.containment == proc.ContainCgroup {
				cgroupDir, _ = treeCgroupOf(t, member)
			}
			if err := m.Remove(p.ID()); err != nil {
				t.Fatalf("Remove() = %v", err)
			}
			// The dropped record's tree is still the Manager's.
			if err := p.Signal(proc.Terminate); err != nil {
				t.Fatalf("Signal(Terminate) on the dropped record with a live member = %v; want nil", err)
			}
			fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
			for {
				if _, err := unix.Poll(fds, -1); err != unix.EINTR {
					break
				}
			}
			if cgroupDir != "" {
				// Removed by the Manager's own watch of cgroup.events; the
				// test can only look until it is gone.
				for {
					if _, err := os.Stat(cgroupDir); errors.Is(err, os.ErrNotExist) {
						break
					}
					if ctx.Err() != nil {
						t.Fatalf("cgroup %s of the empty tree still there: %v", cgroupDir, ctx.Err())
					}
					runtime.Gosched()
				}
			}
			if err := p.Signal(proc.Kill); !errors.Is(err, proc.ErrNotRunning) {
				t.Errorf("Signal(Kill) on the dropped record, tree empty = %v; want ErrNotRunning", err)
			}
			// The reap armed when the record became final fires, finds no
			// record, and arms nothing more: nothing polls the tree.
			mClock.Advance(retain).MustWait(ctx)
			if d, ok := mClock.Peek(); ok {
				t.Errorf("a timer is armed (due in %v) with no record and no live tree left", d)
			}
		})
	}
}

// mainThreadExitC is a program whose main thread exits (pthread_exit)
// while another thread runs on: /proc/<pid>/stat then says Z for a live
// process.
const mainThreadExitC = `#include <pthread.h>
#include <unistd.h>
static void *run(void *arg) { (void)arg; sleep(60); return 0; }
int main(void) { pthread_t t; pthread_create(&t, 0, run, 0); pthread_exit(0); }
`

// TestMainThreadExitedIsAlive pins that a process is judged by the kernel's
// view of the whole process, not by the state of its main thread: a child
// whose main thread exited still times out (it is not taken for exited),
// and a group member like it is still signalled (the group is not taken
// for dead).
func TestMainThreadExitedIsAlive(t *testing.T) {
	t.Parallel()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skipf("no C compiler: %v", err)
	}
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "mte.c"), filepath.Join(dir, "mte")
	if err := os.WriteFile(src, []byte(mainThreadExitC), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-o", bin, src, "-lpthread").CombinedOutput(); err != nil {
		t.Skipf("cannot build the C helper: %v\n%s", err, out)
	}

	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		const timeout = time.Minute
		ctx := testCtx(t)
		mClock := quartz.NewMock(t)
		m := mockManager(t, mClock, proc.Options{})
		trap := mClock.Trap().AfterFunc("process", "timeout")
		defer trap.Close()
		p := startTrapped(ctx, t, m, proc.StartRequest{Args: []string{bin}, Timeout: timeout}, trap, timeout)
		mteWaitMainThreadExited(ctx, t, p.Info().PID)
		mClock.Advance(timeout).MustWait(ctx)
		snap := waitFinal(ctx, t, p)
		if code := exitCode(t, snap.Info); code != proc.ExitTimedOut || !snap.Info.TimedOut || snap.Info.Signal != "SIGTERM" {
			t.Errorf("exit %d, timed out %v, signal %q; want 124, true, SIGTERM", code, snap.Info.TimedOut, snap.Info.Signal)
		}
	})

	t.Run("group-member", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
		p := mustStart(t, m, proc.StartRequest{
			Command: fmt.Sprintf("%s >/dev/null 2>&1 & echo $!", bin),
		})
		snap := waitFinal(ctx, t, p)
		member, err := strconv.Atoi(strings.TrimSpace(snap.Output.Text))
		if err != nil {
			t.Fatalf("member PID %q: %v", snap.Output.Text, err)
		}
		pidfd, err := unix.PidfdOpen(member, 0)
		if err != nil {
			t.Fatalf("pidfd_open(%d): %v", member, err)
		}
		defer unix.Close(pidfd)
		mteWaitMainThreadExited(ctx, t, member)
		if err := p.Signal(proc.Kill); err != nil {
			t.Fatalf("Signal(Kill) on the final record = %v; want nil: its group has a live member", err)
		}
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 10_000)
		if n != 1 || err != nil {
			t.Errorf("the member did not die of the signal: poll = %d, %v", n, err)
		}
	})
}

// mteWaitMainThreadExited waits until /proc says Z for pid while it still
// has two threads: the state the test is about.
func mteWaitMainThreadExited(ctx context.Context, t *testing.T, pid int) {
	t.Helper()
	stat, status := fmt.Sprintf("/proc/%d/stat", pid), fmt.Sprintf("/proc/%d/status", pid)
	for ctx.Err() == nil {
		s, err1 := os.ReadFile(stat)
		st, err2 := os.ReadFile(status)
		if err1 == nil && err2 == nil {
			fields := strings.Fields(string(s[strings.LastIndexByte(string(s), ')')+1:]))
			if len(fields) > 0 && fields[0] == "Z" && strings.Contains(string(st), "Threads:\t2") {
				return
			}
		}
		runtime.Gosched()
	}
	t.Fatalf("process %d: main thread never seen exited: %v", pid, ctx.Err())
}
