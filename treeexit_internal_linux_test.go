//go:build linux && !proc_otherunix

package proc

import (
	"context"
	"os"
	"os/exec"
	"runtime/metrics"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// handoffManager returns a group-mode Manager closed when t ends.
func handoffManager(t *testing.T) *Manager {
	t.Helper()
	m := NewManager(Options{Containment: ContainGroup})
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// handoffStart starts req on a handoffManager: the test's context (a
// minute), the Manager and the record.
func handoffStart(t *testing.T, req StartRequest) (context.Context, *Manager, *Process) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	m := handoffManager(t)
	p, err := m.Start(req)
	if err != nil {
		t.Fatalf("Start(%+v) = %v", req, err)
	}
	return ctx, m, p
}

// wantSignalled fails t unless each of ps is final by a signal (Close
// stopped it).
func wantSignalled(t *testing.T, ps ...*Process) {
	t.Helper()
	for _, p := range ps {
		if info := p.Info(); info.Running || info.Signal == "" {
			t.Errorf("after Close: running %v, signal %q; want final by a signal", info.Running, info.Signal)
		}
	}
}

// closeStdinExits closes p's stdin, waits for the record to be final and
// fails t unless it exited with code.
func closeStdinExits(ctx context.Context, t *testing.T, p *Process, code int) {
	t.Helper()
	if err := p.CloseStdin(); err != nil {
		t.Fatalf("CloseStdin() = %v", err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	if got := p.Info().ExitCode; got == nil || *got != code {
		t.Errorf("exit %v; want %d", got, code)
	}
}

// handoffFinal starts req on m and waits until the record is final.
func handoffFinal(ctx context.Context, t *testing.T, m *Manager, req StartRequest) *Process {
	t.Helper()
	p, err := m.Start(req)
	if err != nil {
		t.Fatalf("Start(%+v) = %v", req, err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	return p
}

// TestEndHandoff pins who ends a record with one output pipe
// (endHandoff): the pump when its pipe ends with the child (the exit
// watch leaves a hung-up, empty pipe's end to it) or before the child
// exits (the pump then waits for the exit); an exit goroutine the exit
// watch makes when a grandchild holds the pipe past the exit, whose drain
// then ends the record. Each ends it once, with the exit code and output.
// Not parallel: a start of another test between its fork and its exec
// holds the write end of every pipe open then (close-on-exec closes it
// only at the exec), so that `true`'s pipe may end after its exit, and the
// exit goroutine rightly takes the end.
func TestEndHandoff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := handoffManager(t)

	p := handoffFinal(ctx, t, m, StartRequest{Args: []string{"true"}})
	if got := p.end.owner.Load(); got != endByPump {
		t.Errorf("true: ended by %d; want the pump (%d)", got, endByPump)
	}

	// The child closes its output and waits on stdin: the pump reaches EOF
	// first and takes the end, then waits for the exit.
	p, err := m.Start(StartRequest{Command: "echo out; exec >&- 2>&-; read x; exit 3", Stdin: true})
	if err != nil {
		t.Fatalf("Start = %v", err)
	}
	spinUntil(ctx, t, "the pump takes the end at its EOF", func() bool { return p.end.owner.Load() == endByPump })
	select {
	case <-p.Done():
		t.Fatal("final while the child waits on stdin")
	default:
	}
	if err := p.CloseStdin(); err != nil {
		t.Fatalf("CloseStdin() = %v", err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	if info := p.Info(); info.ExitCode == nil || *info.ExitCode != 3 || p.Output().Text != "out\n" {
		t.Errorf("closed output: exit %v, output %q; want 3, %q", info.ExitCode, p.Output().Text, "out\n")
	}

	// A grandchild holds the pipe past the exit: the exit watch makes the
	// exit goroutine, whose drain ends the record after the quiet window.
	p = handoffFinal(ctx, t, m, StartRequest{Command: "sleep 60 & echo hi; exit 5", DrainQuiet: 10 * time.Millisecond})
	if got := p.end.owner.Load(); got != endByExit {
		t.Errorf("grandchild: ended by %d; want the exit goroutine (%d)", got, endByExit)
	}
	if info := p.Info(); info.ExitCode == nil || *info.ExitCode != 5 || p.Output().Text != "hi\n" {
		t.Errorf("grandchild: exit %v, output %q; want 5, %q", info.ExitCode, p.Output().Text, "hi\n")
	}
}

// TestEndHandoffOneGoroutine pins that a start of `true` makes one
// goroutine (its pump, which ends the record) and a SeparateStderr start
// three (two pumps and the exit goroutine), counted by the runtime. The
// count is the whole process's, and the runtime makes goroutines of its
// own now and then (a GC's workers): a round of starts may count more,
// never fewer, so one round of the few must count exactly. Not parallel,
// for the same reason.
func TestEndHandoffOneGoroutine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := handoffManager(t)
	handoffFinal(ctx, t, m, StartRequest{Args: []string{"true"}}) // the exit watch's own goroutine
	sample := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	created := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	for _, tt := range []struct {
		req  StartRequest
		want uint64
	}{
		{StartRequest{Args: []string{"true"}}, 1},
		{StartRequest{Args: []string{"true"}, SeparateStderr: true}, 3},
	} {
		const starts, rounds = 20, 5
		var counts []uint64
		for range rounds {
			before := created()
			for range starts {
				handoffFinal(ctx, t, m, tt.req)
			}
			got := created() - before
			counts = append(counts, got)
			if got == starts*tt.want {
				break
			}
		}
		if got := slices.Min(counts); got != starts*tt.want {
			t.Errorf("rounds of %d starts of %v (SeparateStderr %v) made %v goroutines; want %d in one round (%d each)",
				starts, tt.req.Args, tt.req.SeparateStderr, counts, starts*tt.want, tt.want)
		}
	}
}

// TestExitWatchFailsOver pins that records still in the exit watch's set
// when its goroutine ends unexpectedly (here: its set closed under it)
// get a goroutine each that sees their exit, and that later starts are
// not handed over: every record still becomes final with its exit code.
func TestExitWatchFailsOver(t *testing.T) {
	t.Parallel()
	ctx, m, p := handoffStart(t, StartRequest{Command: "read x; exit 7", Stdin: true})
	w := &m.trees.exits
	// The pump puts the child in the set.
	inExitSet(ctx, t, w, p)
	w.mu.Lock()
	ep, done := w.ep, w.done
	w.mu.Unlock()
	_ = ep.Close()
	<-done
	w.mu.Lock()
	failed := w.failed
	w.mu.Unlock()
	if !failed {
		t.Error("exit watch ended: not marked failed")
	}
	closeStdinExits(ctx, t, p, 7) // in the set when the watch ended
	later := handoffFinal(ctx, t, m, StartRequest{Args: []string{"true"}})
	if later.end.owner.Load() != endOpen || later.Info().ExitCode == nil || *later.Info().ExitCode != 0 {
		t.Errorf("start after the watch ended: owner %d, exit %v; want not handed over (%d), 0", later.end.owner.Load(), later.Info().ExitCode, endOpen)
	}
}

// TestExitWatchSharesPidfd pins the facts the exit watch relies on to
// hold no descriptor of its own per child (watch): os.Process holds a
// pidfd (osHoldsPidfd: a change of package os's unexported handle fails
// here), a copy of the one the fork gave (osKeepsPidfd), so that an epoll
// entry made with it outlives the closing of the fork's descriptor and
// reports the exit; and that a handed-over record in the set keeps none.
func TestExitWatchSharesPidfd(t *testing.T) {
	t.Parallel()
	fd := -1
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{PidFD: &fd}
	if err := cmd.Start(); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if fd < 0 {
		t.Skip("the fork gave no pidfd (CLONE_PIDFD): the exit watch opens its own")
	}
	if _, _, errno := unix.Syscall6(unix.SYS_KCMP, uintptr(os.Getpid()), uintptr(os.Getpid()), kcmpFile, uintptr(fd), uintptr(fd), 0); errno != 0 {
		_ = unix.Close(fd)
		t.Skipf("kcmp: %v: the exit watch keeps its own pidfd", errno)
	}
	if !osHoldsPidfd(cmd.Process) {
		_ = unix.Close(fd)
		t.Fatal("osHoldsPidfd = false; want true (os.Process holds a pidfd where pidfds work)")
	}
	if !osKeepsPidfd(fd) {
		_ = unix.Close(fd)
		t.Fatal("osKeepsPidfd = false; want true (os.Process copies the pidfd it was given)")
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		t.Fatalf("epoll_create1: %v", err)
	}
	defer unix.Close(ep)
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLONESHOT, Fd: 42}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		t.Fatalf("epoll_ctl: %v", err)
	}
	_ = unix.Close(fd)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatalf("Kill() = %v", err)
	}
	events := make([]unix.EpollEvent, 1)
	n, err := unix.EpollWait(ep, events, int(time.Minute/time.Millisecond))
	for err == unix.EINTR {
		n, err = unix.EpollWait(ep, events, int(time.Minute/time.Millisecond))
	}
	if err != nil || n != 1 || events[0].Fd != 42 {
		t.Fatalf("epoll_wait after the kill = %d %v (fd %d); want the entry's event", n, err, events[0].Fd)
	}

	ctx, m, p := handoffStart(t, StartRequest{Args: []string{"sleep", "60"}})
	w := &m.trees.exits
	inExitSet(ctx, t, w, p)
	w.mu.Lock()
	pidfd := p.end.pidfd
	w.mu.Unlock()
	if pidfd != -1 {
		t.Errorf("a record in the set holds pidfd %d; want none (-1): os.Process's is watched", pidfd)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	wantSignalled(t, p)
}

// inExitSet waits until the pump put p's child in the exit watch w's set.
func inExitSet(ctx context.Context, t *testing.T, w *exitWatch, p *Process) {
	t.Helper()
	spinUntil(ctx, t, "the child in the exit watch's set", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.procs[p.end.token] == p && p.end.token != 0
	})
}
