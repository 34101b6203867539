//go:build unix

package proc_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/procvisor/proc"
)

// Tests of issue 10 that hold on every Unix: the one owner of a tree's end
// seen through the lifecycle (the timeout decided with the exit, a write
// racing the exit, records answering after Close), in every containment
// mode the OS has. The Linux-only ones (cgroups, escapees, sessions seen
// through /proc) are in tree_linux_test.go.

// treeExitAfter is a child that exits 3 by itself after d. It is sh, not
// the test binary: its SIGTERM must keep the kernel's default action, and
// the Go runtime catches TERM and re-raises it from a handler, which can
// lose it to the child's own exit (or to an exec).
func treeExitAfter(d time.Duration) []string {
	return []string{"/bin/sh", "-c", `sleep "$0"; exit 3`, fmt.Sprintf("%.6f", max(d, 0).Seconds())}
}

// treeExitOnByte is a child that reads one byte of stdin and exits 3 (also
// at end-of-file); sh, for the reason treeExitAfter gives.
var treeExitOnByte = []string{"/bin/sh", "-c", "head -c 1 >/dev/null; exit 3"}

// treeMode is a containment mode the tests run in.
type treeMode struct {
	name        string
	containment proc.Containment
	want        string // Info.Containment of its records
}

// treeModes are the modes every tree test runs in: group everywhere, and
// cgroup where the OS has it (treeOptions skips it where the hierarchy is
// not writable).
var treeModes = []treeMode{
	{"group", proc.ContainGroup, "group"},
	{"cgroup", proc.ContainCgroup, "cgroup"},
}

// treeEachMode runs test as a parallel subtest in each of treeModes.
func treeEachMode(t *testing.T, test func(t *testing.T, mode treeMode)) {
	t.Helper()
	for _, mode := range treeModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			test(t, mode)
		})
	}
}

// treeOptions returns the Options of mode. In cgroup mode the Manager gets
// a parent cgroup of this test's own (treeCgroupParent), which is checked
// empty and removed when the test ends; call it before newManager, so that
// the check runs after the Manager's Close.
func treeOptions(t testing.TB, mode treeMode) proc.Options {
	t.Helper()
	opts := proc.Options{Containment: mode.containment}
	if mode.containment == proc.ContainCgroup {
		opts.CgroupParent = treeCgroupParent(t)
	}
	return opts
}

// treeFinal is what a final record reports about its end.
type treeFinal struct {
	code     int
	sig      string
	timedOut bool
}

func treeFinalOf(t testing.TB, info proc.Info) treeFinal {
	t.Helper()
	return treeFinal{exitCode(t, info), info.Signal, info.TimedOut}
}

// treeUnchanged checks that each record in seen still reports the final
// it reported at Done: a final record never changes.
func treeUnchanged(t *testing.T, seen map[*proc.Process]treeFinal) {
	t.Helper()
	for p, final := range seen {
		if got := treeFinalOf(t, p.Info()); got != final {
			t.Errorf("%s: final %+v at Done, %+v later; a final record never changes", p.ID(), final, got)
		}
	}
}

// TestTreeRunningNeverTimedOut pins that TimedOut is decided with the
// exit: a child that ignores SIGTERM, whose timeout fired and whose
// kill-grace timer has not, runs on and reports TimedOut false; only the
// final record says it timed out (124, SIGKILL), and that never changes.
func TestTreeRunningNeverTimedOut(t *testing.T) {
	t.Parallel()
	const (
		timeout = 10 * time.Second
		grace   = time.Hour
	)
	treeEachMode(t, func(t *testing.T, mode treeMode) {
		ctx := testCtx(t)
		opts := treeOptions(t, mode)
		opts.KillGrace = grace
		mClock := quartz.NewMock(t)
		m := mockManager(t, mClock, opts)
		timeoutTrap := mClock.Trap().AfterFunc("process", "timeout")
		defer timeoutTrap.Close()
		graceTrap := mClock.Trap().NewTimer("process", "kill-grace")
		defer graceTrap.Close()

		req := helperReq("lc-ignore-term")
		req.Stdin = true
		req.Timeout = timeout
		p := startTrapped(ctx, t, m, req, timeoutTrap, timeout)
		waitText(ctx, t, p, "ready\n")

		w := mClock.Advance(timeout)
		graceTrap.MustWait(ctx).MustRelease(ctx)
		w.MustWait(ctx)
		// SIGTERM was sent and ignored: the child echoes still.
		if _, err := p.WriteContext(ctx, []byte("ping\n")); err != nil {
			t.Fatalf("WriteContext() after the timeout fired = %v", err)
		}
		waitText(ctx, t, p, "ping\n")
		if info := p.Info(); !info.Running || info.TimedOut {
			t.Errorf("Info() after the timeout fired, before the kill = running %v, timed out %v; want true, false (a running record is never TimedOut)", info.Running, info.TimedOut)
		}
		if s := p.Snapshot(); s.Info.Running && s.Info.TimedOut {
			t.Errorf("Snapshot() of a running record has TimedOut")
		}
		for _, info := range m.List() {
			if info.Running && info.TimedOut {
				t.Errorf("List() holds running %s with TimedOut", info.ID)
			}
		}

		mClock.Advance(grace).MustWait(ctx)
		s := waitFinal(ctx, t, p)
		want := treeFinal{proc.ExitTimedOut, "SIGKILL", true}
		if got := treeFinalOf(t, s.Info); got != want {
			t.Errorf("final (code, signal, timed out) = %+v; want %+v", got, want)
		}
		treeUnchanged(t, map[*proc.Process]treeFinal{p: want})
	})
}

// treeHammer is how many times each window is hammered per mode.
const treeHammer = 300

// treeHammerOn runs one(i) for each i below treeHammer on workers
// goroutines (one must report with Errorf, not Fatalf); it fails the test
// if ctx ends before all are handed out.
func treeHammerOn(ctx context.Context, t *testing.T, workers int, one func(i int)) {
	t.Helper()
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				one(i)
			}
		}()
	}
feed:
	for i := range treeHammer {
		select {
		case next <- i:
		case <-ctx.Done():
			t.Errorf("after %d of %d: %v", i, treeHammer, ctx.Err())
			break feed
		}
	}
	close(next)
	wg.Wait()
}

// TestTreeTimeoutVersusExitMock places the deadline of a mock clock
// around the moment a child exits by itself (it exits 3 once it reads a
// byte; SIGTERM kills it), treeHammer times per mode in several workers:
//
//   - "before": the deadline fires while the child waits for its byte: it
//     timed out (124, SIGTERM);
//   - "racing": the byte is written and the deadline fires at once: either
//     end is right, but only as a whole — 124 with SIGTERM and TimedOut,
//     or 3 without a signal and not TimedOut (a child that exited by
//     itself is never reported timed out);
//   - "after-exit": the deadline fires once the child's pidfd says it
//     exited (reaped or not): it exited by itself, 3, not timed out.
//
// After the deadline fired, a running record is not TimedOut; and at the
// end every final record still reports what it reported at Done.
func TestTreeTimeoutVersusExitMock(t *testing.T) {
	exitRaceTest(t)
	const (
		workers = 6
		timeout = 10 * time.Second
	)
	phases := []string{"before", "racing", "after-exit", "racing"}
	treeEachMode(t, func(t *testing.T, mode treeMode) {
		opts := treeOptions(t, mode)
		for w := range workers {
			t.Run(fmt.Sprintf("worker-%d", w), func(t *testing.T) {
				t.Parallel()
				ctx := testCtx(t, 3*time.Minute)
				o := opts
				// No timer but the timeout may come due: the clock
				// moves only by whole timeouts.
				o.KillGrace = 100 * time.Hour
				o.RetainExited = 100 * time.Hour
				mClock := quartz.NewMock(t).WithLogger(quartz.NoOpLogger)
				m := mockManager(t, mClock, o)
				trap := mClock.Trap().AfterFunc("process", "timeout")
				defer trap.Close()

				seen := map[*proc.Process]treeFinal{}
				var racedTimedOut, racedExited int
				for i := range treeHammer / workers {
					phase := phases[i%len(phases)]
					req := proc.StartRequest{Args: treeExitOnByte}
					req.Stdin = true
					req.Timeout = timeout
					req.DrainQuiet, req.DrainTimeout = 200*time.Hour, 200*time.Hour
					p := startTrapped(ctx, t, m, req, trap, timeout)
					pidfd := treePidfd(t, p.Info().PID)

					if phase == "before" {
						mClock.Advance(timeout).MustWait(ctx)
						if info := p.Info(); info.Running && info.TimedOut {
							t.Errorf("%s (%s): running record with TimedOut", p.ID(), phase)
						}
					}
					if _, err := p.WriteContext(ctx, []byte("x")); err != nil && !errors.Is(err, proc.ErrNotRunning) {
						t.Fatalf("%s (%s): WriteContext = %v", p.ID(), phase, err)
					}
					switch phase {
					case "racing":
						mClock.Advance(timeout).MustWait(ctx)
					case "after-exit":
						treeWaitPidfd(ctx, t, pidfd, "the child's exit")
						mClock.Advance(timeout).MustWait(ctx)
					}
					if info := p.Info(); info.Running && info.TimedOut {
						t.Errorf("%s (%s): running record with TimedOut", p.ID(), phase)
					}
					s := waitFinal(ctx, t, p)
					got := treeFinalOf(t, s.Info)
					timedOut := treeFinal{proc.ExitTimedOut, "SIGTERM", true}
					exited := treeFinal{3, "", false}
					switch {
					case phase == "before" && got != timedOut:
						t.Errorf("%s: deadline before the exit: final %+v; want %+v", p.ID(), got, timedOut)
					case phase == "after-exit" && got != exited:
						t.Errorf("%s: deadline after the child exited by itself: final %+v; want %+v", p.ID(), got, exited)
					case phase == "racing" && got != timedOut && got != exited:
						t.Errorf("%s: deadline racing the exit: final %+v; want %+v or %+v", p.ID(), got, timedOut, exited)
					case phase == "racing" && got == timedOut:
						racedTimedOut++
					case phase == "racing":
						racedExited++
					}
					seen[p] = got
				}
				treeUnchanged(t, seen)
				t.Logf("racing deadlines: %d timed out, %d exited by themselves", racedTimedOut, racedExited)
			})
		}
	})
}

// TestTreeTimeoutVersusExitReal hammers the real window: treeHammer
// children per mode, a few at a time, each exiting by itself (code 3) a
// moment before or after its deadline on the real clock. Each must end
// whole: timed out (124, SIGTERM, TimedOut) or exited by itself (3, no
// signal, not TimedOut) — never 124 without the signal that ended it, nor
// 3 with TimedOut; and what a final record reports never changes.
func TestTreeTimeoutVersusExitReal(t *testing.T) {
	exitRaceTest(t)
	const (
		workers = 8
		timeout = 100 * time.Millisecond
	)
	treeEachMode(t, func(t *testing.T, mode treeMode) {
		ctx := testCtx(t, 3*time.Minute)
		opts := treeOptions(t, mode)
		opts.KillGrace = time.Minute // SIGTERM ends these children
		m := newManager(t, opts)

		var (
			mu                  sync.Mutex
			seen                = map[*proc.Process]treeFinal{}
			timedOut, byItself  int
			wantTimedOut, wantE = treeFinal{proc.ExitTimedOut, "SIGTERM", true}, treeFinal{3, "", false}
		)
		treeHammerOn(ctx, t, workers, func(i int) {
			// From 4 ms before the deadline to 2 ms after.
			offset := time.Duration(i%300)*20*time.Microsecond - 4*time.Millisecond
			p, err := m.Start(proc.StartRequest{Args: treeExitAfter(timeout + offset), Timeout: timeout})
			if err != nil {
				t.Errorf("Start = %v", err)
				return
			}
			if err := p.Wait(ctx); err != nil {
				t.Errorf("%s: Wait = %v", p.ID(), err)
				return
			}
			info := p.Info()
			if info.ExitCode == nil {
				t.Errorf("%s: final without exit code", p.ID())
				return
			}
			got := treeFinal{*info.ExitCode, info.Signal, info.TimedOut}
			mu.Lock()
			defer mu.Unlock()
			switch got {
			case wantTimedOut:
				timedOut++
			case wantE:
				byItself++
			default:
				t.Errorf("%s: exit %v from its deadline: final %+v; want %+v or %+v",
					p.ID(), offset, got, wantTimedOut, wantE)
			}
			seen[p] = got
		})
		treeUnchanged(t, seen)
		t.Logf("%d timed out, %d exited by themselves", timedOut, byItself)
	})
}

// TestTreeWriteVersusExit hammers a write racing the child's exit: `head
// -c 1` reads one byte and exits while the test keeps writing single
// bytes. Every write returns nil or ErrNotRunning, never a bare broken
// pipe, treeHammer times per mode.
func TestTreeWriteVersusExit(t *testing.T) {
	exitRaceTest(t)
	const workers = 6
	treeEachMode(t, func(t *testing.T, mode treeMode) {
		ctx := testCtx(t, 3*time.Minute)
		m := newManager(t, treeOptions(t, mode))
		treeHammerOn(ctx, t, workers, func(int) {
			p, err := m.Start(proc.StartRequest{Args: []string{"head", "-c", "1"}, Stdin: true})
			if err != nil {
				t.Errorf("Start = %v", err)
				return
			}
			writes := 0
			for {
				_, err := p.WriteContext(ctx, []byte("x"))
				if err == nil {
					writes++
					continue
				}
				if !errors.Is(err, proc.ErrNotRunning) {
					t.Errorf("%s: write %d racing the exit of head -c 1 = %v (EPIPE %v); want nil or ErrNotRunning",
						p.ID(), writes+1, err, errors.Is(err, syscall.EPIPE))
				}
				break
			}
			// On a worker goroutine: Errorf, never Fatalf.
			if err := p.Wait(ctx); err != nil {
				t.Errorf("%s: Wait = %v", p.ID(), err)
				return
			}
			if s := p.Snapshot(); s.Info.ExitCode == nil || *s.Info.ExitCode != 0 || s.Output.Text != "x" {
				t.Errorf("%s: exit code %v, output %q; want 0, %q", p.ID(), s.Info.ExitCode, s.Output.Text, "x")
			}
		})
	})
}

// TestTreeWriteToClosedStdinLives pins, in every mode, the one write
// failure that is not ErrNotRunning: a child that closed its stdin and
// lives on gives an error wrapping EPIPE.
func TestTreeWriteToClosedStdinLives(t *testing.T) {
	t.Parallel()
	treeEachMode(t, func(t *testing.T, mode treeMode) {
		ctx, m := testManager(t, treeOptions(t, mode))
		p := mustStart(t, m, proc.StartRequest{Command: "exec 0<&-; echo closed; exec sleep 600", Stdin: true})
		waitText(ctx, t, p, "closed\n")
		// A process this test binary forks meanwhile (another test's
		// child, between its fork and its exec) holds every descriptor
		// for a moment, the read end too: a write then lands in the
		// pipe. Write until the pipe says it has no reader.
		var err error
		for writes := 0; err == nil && writes < 32<<10; writes++ {
			_, err = p.Write([]byte("x"))
		}
		if !errors.Is(err, syscall.EPIPE) || errors.Is(err, proc.ErrNotRunning) {
			t.Errorf("Write to a live child that closed its stdin = %v; want EPIPE and not ErrNotRunning", err)
		}
		if !p.Info().Running {
			t.Errorf("Info().Running = false; want true")
		}
		mgrKill(ctx, t, p)
	})
}

// TestTreeRecordsAfterClose pins section 8 after Close: the retained
// records — one that exited, one that Close ended, one of a scope — answer
// Get, List, Snapshot, Output, ReadSince and Wait as they did, Remove
// forgets one, and whatever starts or controls a process is ErrClosed.
func TestTreeRecordsAfterClose(t *testing.T) {
	t.Parallel()
	treeEachMode(t, func(t *testing.T, mode treeMode) {
		ctx := testCtx(t)
		opts := treeOptions(t, mode)
		opts.KillGrace = 10 * time.Second
		m := proc.NewManager(opts)
		t.Cleanup(func() { _ = m.Close() }) // on failure paths
		s := m.Scope("alice")

		exited := mustStart(t, m, proc.StartRequest{Command: "echo exited; exit 3"})
		waitFinal(ctx, t, exited)
		running := mustStart(t, m, proc.StartRequest{Command: "echo running; exec sleep 600", Stdin: true})
		waitText(ctx, t, running, "running\n")
		scoped := mustStart(t, s, proc.StartRequest{Command: "echo scoped"})
		waitFinal(ctx, t, scoped)
		if err := m.Close(); err != nil {
			t.Fatalf("Close() = %v", err)
		}

		want := map[string]struct {
			p    *proc.Process
			code int
			out  string
		}{
			exited.ID():  {exited, 3, "exited\n"},
			running.ID(): {running, 143, "running\n"},
			scoped.ID():  {scoped, 0, "scoped\n"},
		}
		for id, w := range want {
			got, err := m.Get(id)
			if err != nil || got != w.p {
				t.Errorf("Get(%s) after Close = %v, %v; want the record", id, got, err)
			}
			if err := w.p.Wait(ctx); err != nil {
				t.Errorf("%s: Wait after Close = %v; want nil", id, err)
			}
			snap := w.p.Snapshot()
			if snap.Info.Running || snap.Info.ExitCode == nil || *snap.Info.ExitCode != w.code || snap.Output.Text != w.out {
				t.Errorf("%s: Snapshot after Close = running %v, exit %v, output %q; want final, %d, %q",
					id, snap.Info.Running, snap.Info.ExitCode, snap.Output.Text, w.code, w.out)
			}
			if out := w.p.Output().Text; out != w.out {
				t.Errorf("%s: Output after Close = %q; want %q", id, out, w.out)
			}
			if c := w.p.ReadSince(0, 1<<20); string(c.Data) != w.out || !c.EOF {
				t.Errorf("%s: ReadSince(0) after Close = %q, EOF %v; want %q, EOF", id, c.Data, c.EOF, w.out)
			}
			if err := m.Signal(id, proc.Kill); !errors.Is(err, proc.ErrClosed) {
				t.Errorf("Signal(%s) after Close = %v; want ErrClosed", id, err)
			}
			if err := w.p.Signal(proc.Terminate); !errors.Is(err, proc.ErrClosed) {
				t.Errorf("%s: Process.Signal after Close = %v; want ErrClosed", id, err)
			}
		}
		listed := map[string]bool{}
		for _, info := range m.List() {
			listed[info.ID] = true
			if info.Running {
				t.Errorf("List() after Close holds running %s", info.ID)
			}
		}
		for id := range want {
			if !listed[id] {
				t.Errorf("List() after Close = %v; want it to hold %s", mgrIDs(m.List()), id)
			}
		}
		if ids := mgrIDs(s.List()); len(ids) != 1 || ids[0] != scoped.ID() {
			t.Errorf("Scope.List() after Close = %v; want [%s]", ids, scoped.ID())
		}
		if got, err := s.Get(scoped.ID()); err != nil || got != scoped {
			t.Errorf("Scope.Get(%s) after Close = %v, %v; want the record", scoped.ID(), got, err)
		}
		if err := s.Signal(scoped.ID(), proc.Kill); !errors.Is(err, proc.ErrClosed) {
			t.Errorf("Scope.Signal after Close = %v; want ErrClosed", err)
		}
		if _, err := running.Write([]byte("x")); !errors.Is(err, proc.ErrClosed) {
			t.Errorf("Write after Close = %v; want ErrClosed", err)
		}
		if _, err := m.Start(proc.StartRequest{Command: "true"}); !errors.Is(err, proc.ErrClosed) {
			t.Errorf("Start after Close = %v; want ErrClosed", err)
		}
		if _, err := s.Start(proc.StartRequest{Command: "true"}); !errors.Is(err, proc.ErrClosed) {
			t.Errorf("Scope.Start after Close = %v; want ErrClosed", err)
		}
		if err := m.Remove(exited.ID()); err != nil {
			t.Errorf("Remove(%s) after Close = %v; want nil", exited.ID(), err)
		}
		if _, err := m.Get(exited.ID()); !errors.Is(err, proc.ErrNotFound) {
			t.Errorf("Get(%s) after Remove = %v; want ErrNotFound", exited.ID(), err)
		}
	})
}

// TestTreeCloseHonoursKillGrace pins Close's stop (treeKeeper.stopAll) in
// each mode: in cgroup mode it waits for every tree with one watch of the
// Manager's cgroup, in group mode for each tree in turn, and either way a
// member that ignores SIGTERM gets SIGKILL only once KillGrace is over on
// Options.Clock, while one that obeys dies of the SIGTERM. A stop that
// killed at once, took another grace, or whose wait outlived the grace
// fails it.
func TestTreeCloseHonoursKillGrace(t *testing.T) {
	t.Parallel()
	treeEachMode(t, func(t *testing.T, mode treeMode) {
		const grace = 5 * time.Second
		ctx := testCtx(t)
		opts := treeOptions(t, mode)
		opts.KillGrace = grace
		mClock := quartz.NewMock(t)
		m := mockManager(t, mClock, opts)
		ignoring := mustStart(t, m, helperReq("lc-ignore-term"))
		obeying := mustStart(t, m, helperReq("lc-ready-sleep"))
		for _, p := range []*proc.Process{ignoring, obeying} {
			if got := p.Info().Containment; got != mode.want {
				t.Fatalf("Info().Containment = %q; want %q", got, mode.want)
			}
			waitText(ctx, t, p, "ready\n")
		}
		graceTrap := mClock.Trap().NewTimer("manager", "kill-grace")
		defer graceTrap.Close()
		closed := goClose(m)
		// The grace timer is made after SIGTERM went out.
		releaseTrapped(ctx, t, graceTrap, grace, "Close's kill-grace timer")
		if s := waitFinal(ctx, t, obeying); treeFinalOf(t, s.Info) != (treeFinal{143, "SIGTERM", false}) {
			t.Errorf("obeying child final %+v; want 143, SIGTERM", treeFinalOf(t, s.Info))
		}
		mClock.Advance(grace - time.Nanosecond).MustWait(ctx)
		select {
		case err := <-closed:
			t.Fatalf("Close() = %v a nanosecond before the grace was over; want it to wait", err)
		default:
		}
		if !ignoring.Info().Running {
			t.Fatal("the child that ignores SIGTERM is final before the grace was over")
		}
		mClock.Advance(time.Nanosecond).MustWait(ctx)
		// Once the grace is over, Close needs no more clock time.
		if err := recv(ctx, t, closed, "Close after the grace"); err != nil {
			t.Errorf("Close() = %v", err)
		}
		if !isDone(ignoring) || treeFinalOf(t, ignoring.Info()) != (treeFinal{137, "SIGKILL", false}) {
			t.Errorf("after Close, the child that ignores SIGTERM: done %v, final %+v; want 137, SIGKILL", isDone(ignoring), treeFinalOf(t, ignoring.Info()))
		}
	})
}
