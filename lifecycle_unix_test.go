//go:build unix

package proc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/procvisor/proc"
)

// The Unix lifecycle: exit statuses, signals to the group, timeouts and
// Close; at the end, races with Close found in review. (The drain after
// the child exits is in drain_unix_test.go; its helpers lc-spawn, lc-tail,
// lc-cat and lc-flood are here, beside the others.)

var _ = helper("lc-spawn", lcHelperSpawn)

// lcHelperSpawn starts the test binary as helper mode args[1] with
// args[2:], sharing this process's stdout and stderr (and its process
// group), waits until that grandchild is ready (it calls lcReady, or
// exits), and exits without waiting for it. With args[0] == "pid" it
// prints "spawned <pid>\n" just before it exits.
func lcHelperSpawn(args []string) int {
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cmd := exec.Command(os.Args[0], args[2:]...)
	cmd.Env = append(os.Environ(), helperEnv+"="+args[1], lcReadyEnv+"=3")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = w.Close()
	_, _ = io.Copy(io.Discard, r)
	if args[0] == "pid" {
		fmt.Printf("spawned %d\n", cmd.Process.Pid)
	}
	return 0
}

// lcReadyEnv names the descriptor a helper started by lc-spawn closes
// when it is ready.
const lcReadyEnv = "LC_READY_FD"

// lcReady tells the lc-spawn parent, if any, that this helper is ready.
func lcReady() {
	if fd, err := strconv.Atoi(os.Getenv(lcReadyEnv)); err == nil {
		_ = os.NewFile(uintptr(fd), "ready").Close()
		_ = os.Unsetenv(lcReadyEnv)
	}
}

var _ = helper("lc-tail", lcHelperTail)

// lcHelperTail is the grandchild of the issue: "ta" (and ready), 30 ms,
// "il", then it holds stdout for 30 s.
func lcHelperTail([]string) int {
	_, _ = os.Stdout.WriteString("ta")
	lcReady()
	time.Sleep(30 * time.Millisecond)
	_, _ = os.Stdout.WriteString("il")
	time.Sleep(30 * time.Second)
	return 0
}

var _ = helper("lc-cat", lcHelperCat)

// lcHelperCat copies the file (a FIFO) args[0] to stdout as it comes,
// until end-of-file; so the test decides what it writes and when. It is
// ready once the FIFO is open.
func lcHelperCat(args []string) int {
	f, err := os.Open(args[0])
	lcReady()
	if err == nil {
		_, err = io.Copy(os.Stdout, f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

var _ = helper("lc-flood", lcHelperFlood)

// lcHelperFlood writes to stdout without pause until a write fails.
func lcHelperFlood([]string) int {
	chunk := append(bytes.Repeat([]byte("f"), 1023), '\n')
	lcReady()
	for {
		if _, err := os.Stdout.Write(chunk); err != nil {
			return 0
		}
	}
}

var _ = helper("lc-ready-sleep", lcHelperReadySleep)

// lcHelperReadySleep prints "ready" and sleeps 30 s; a terminate signal
// ends it.
func lcHelperReadySleep([]string) int {
	fmt.Println("ready")
	lcReady()
	time.Sleep(30 * time.Second)
	return 0
}

var _ = helper("lc-ignore-term", lcHelperIgnoreTerm)

// lcHelperIgnoreTerm ignores SIGTERM, prints "ready", copies stdin to
// stdout until end-of-file, then sleeps 30 s. Only SIGKILL ends it early.
func lcHelperIgnoreTerm([]string) int {
	signal.Ignore(syscall.SIGTERM)
	fmt.Println("ready")
	lcReady()
	_, _ = io.Copy(os.Stdout, os.Stdin)
	time.Sleep(30 * time.Second)
	return 0
}

var _ = helper("lc-bg-leader", lcHelperBgLeader, "lc-watch")

// lcHelperBgLeader leaves a background member in its process group whose
// death the test can observe exactly. It starts a watcher (lc-watch) in a
// process group of its own, which starts the member (lc-hold) in this
// leader's group, holding this leader's stdout. The watcher is the
// member's parent: it reaps the member and exits, closing descriptor 3
// (the test's report pipe, passed through to it) only once the member is
// gone. The leader prints "background <pid>" on stderr, args[0] on
// stdout, and exits.
func lcHelperBgLeader(args []string) int {
	report := os.NewFile(3, "report")
	w := exec.Command(os.Args[0])
	w.Env = append(os.Environ(), helperEnv+"=lc-watch", "LC_PGID="+strconv.Itoa(syscall.Getpgrp()))
	w.ExtraFiles = []*os.File{report, os.Stdout}
	w.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := w.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := w.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The member must join this group while the leader is alive: the
	// watcher closes its stdout once the member runs.
	line, err := io.ReadAll(out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "watcher:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "background %s", line)
	fmt.Print(args[0])
	return 0
}

var _ = helper("lc-watch", lcHelperWatch, "lc-hold")

// lcHelperWatch: see lcHelperBgLeader. Descriptor 3 is the report pipe,
// descriptor 4 the leader's stdout, LC_PGID the leader's group.
func lcHelperWatch([]string) int {
	syscall.CloseOnExec(3) // the member must not hold the report pipe
	pgid, err := strconv.Atoi(os.Getenv("LC_PGID"))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	out := os.NewFile(4, "output")
	x := exec.Command(os.Args[0])
	x.Env = append(os.Environ(), helperEnv+"=lc-hold")
	x.Stdout = out
	x.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	if err := x.Start(); err != nil {
		fmt.Println("error", err)
		return 1
	}
	_ = out.Close()
	fmt.Println(x.Process.Pid)
	_ = os.Stdout.Close()
	_ = x.Wait()
	return 0
}

var _ = helper("lc-hold", lcHelperHold)

// lcHelperHold holds its stdout silently for 30 s.
func lcHelperHold([]string) int {
	time.Sleep(30 * time.Second)
	return 0
}

var _ = helper("lc-big", lcHelperBig)

// lcHelperBig ignores SIGTERM, touches args[0] MiB of memory, prints
// "ready", closes its output and sleeps 30 s: a process whose exit takes
// a while.
func lcHelperBig(args []string) int {
	signal.Ignore(syscall.SIGTERM)
	mib, err := strconv.Atoi(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	b := make([]byte, mib<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	fmt.Println("ready")
	_ = os.Stdout.Close()
	_ = os.Stderr.Close()
	lcReady()
	time.Sleep(30 * time.Second)
	runtime.KeepAlive(b)
	return 0
}

var lcPIDLine = regexp.MustCompile(`(?m)^(?:spawned |background )?(\d+)$`)

// lcParsePIDs returns the PIDs printed one per line in text.
func lcParsePIDs(t *testing.T, text string) []int {
	t.Helper()
	var pids []int
	for _, m := range lcPIDLine.FindAllStringSubmatch(text, -1) {
		pid, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatalf("parse PID %q: %v", m[1], err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// TestExitStatus pins exit codes and signals, and that the exit fields
// appear only with the final status.
func TestExitStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, action string
		code         int
		signal       string
	}{
		{"exit-0", "exit 0", 0, ""},
		{"exit-3", "exit 3", 3, ""},
		{"SIGKILL", "kill -9 $$", 137, "SIGKILL"},
		{"SIGTERM", "kill -TERM $$", 143, "SIGTERM"},
	} {
		withManager(t, tc.name, proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
			req := proc.StartRequest{Command: "read x; " + tc.action, Stdin: true}
			p := mustStart(t, m, req)
			// The child blocks reading stdin until we close it.
			lcCheckRunning(t, p.Info())
			if err := p.CloseStdin(); err != nil {
				t.Fatalf("CloseStdin() = %v", err)
			}
			s := waitFinal(ctx, t, p)
			lcCheckFinal(t, s.Info)
			if code := exitCode(t, s.Info); code != tc.code || s.Info.Signal != tc.signal {
				t.Errorf("Start(%q): exit code %d, signal %q; want %d, %q", req.Command, code, s.Info.Signal, tc.code, tc.signal)
			}
			if s.Info.TimedOut {
				t.Errorf("Start(%q): TimedOut = true; want false", req.Command)
			}
		})
	}
}

// TestSignalUntilGroupDead: after the record is final, Signal reaches the
// member its command left behind, and reports ErrNotRunning once the
// group has no live member. The member's parent lives outside the group
// and closes the report pipe only after reaping it, so the test knows
// exactly when the group died.
func TestSignalUntilGroupDead(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	// Group mode: the watcher lives outside the child's process group. A
	// cgroup would hold it too (the tree could not empty while it waits).
	m := newManager(t, proc.Options{Containment: proc.ContainGroup, CommandContext: withExtraFiles(w)})
	req := helperReq("lc-bg-leader", "hi\n")
	req.SeparateStderr = true
	start := time.Now()
	p := mustStart(t, m, req)
	_ = w.Close() // the leader and the watcher hold it now

	s := waitFinal(ctx, t, p)
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("final after %v; want about DrainQuiet (50ms) after the leader exits", elapsed)
	}
	if s.Output.Text != "hi\n" {
		t.Errorf("Output() = %q; want %q (stderr %q)", s.Output.Text, "hi\n", s.Stderr.Text)
	}
	if pids := lcParsePIDs(t, s.Stderr.Text); len(pids) != 1 {
		t.Fatalf("stderr %q; want %q", s.Stderr.Text, "background <pid>")
	}
	if err := p.Signal(proc.Kill); err != nil {
		t.Fatalf("Signal(Kill) after final, background member alive = %v; want nil", err)
	}
	// EOF on the report pipe: the watcher reaped the member and exited.
	if rest := readPipe(ctx, t, r, 1); rest != "" {
		t.Fatalf("read the report pipe to EOF: got %q", rest)
	}
	for _, sig := range []proc.Signal{proc.Kill, proc.Terminate} {
		if err := p.Signal(sig); !errors.Is(err, proc.ErrNotRunning) {
			t.Errorf("Signal(%q) with no member of the group left = %v; want an error wrapping ErrNotRunning", sig, err)
		}
	}
}

// lcFIFO creates a named pipe and opens it read-write (so that neither end
// blocks on open); a helper (lc-cat) reading it sees end-of-file when the
// returned file is closed.
func lcFIFO(t *testing.T) (string, *os.File) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatalf("Mkfifo(%q) = %v", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("open %q: %v", path, err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return path, f
}

// lcWrite writes s to the FIFO f.
func lcWrite(t *testing.T, f *os.File, s string) {
	t.Helper()
	if _, err := f.WriteString(s); err != nil {
		t.Fatalf("write %q to the FIFO: %v", s, err)
	}
}

// lcCheckPeek checks that the next timer of mClock fires in want.
func lcCheckPeek(t *testing.T, mClock *quartz.Mock, want time.Duration, when string) {
	t.Helper()
	if d, ok := mClock.Peek(); !ok || d != want {
		t.Errorf("%s: next timer in %v (%v); want %v", when, d, ok, want)
	}
}

// TestSignalKillsGroup: Kill reaches every member of the group, not only
// the shell. The drain windows are a minute long, so the record is final
// only once every holder of stdout (the shell and both sleeps) closed it
// in its exit.
func TestSignalKillsGroup(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	p := mustStart(t, m, proc.StartRequest{
		Command:      "sleep 60 & echo $!; sleep 60 & echo $!; wait",
		DrainQuiet:   time.Minute,
		DrainTimeout: time.Minute,
	})
	text := waitOutput(ctx, t, p, "two PIDs", func(s string) bool { return len(lcParsePIDs(t, s)) == 2 })
	if err := p.Signal(proc.Kill); err != nil {
		t.Fatalf("Signal(Kill) = %v; want nil", err)
	}
	s := waitFinal(ctx, t, p)
	if code := exitCode(t, s.Info); code != 137 || s.Info.Signal != "SIGKILL" {
		t.Errorf("exit code %d, signal %q; want 137, SIGKILL", code, s.Info.Signal)
	}
	if !hasProcFS() {
		t.Logf("no /proc: the children's state is not checked")
		return
	}
	for _, pid := range lcParsePIDs(t, text) {
		// Past closing its files, a process is dead or in its exit.
		st := readStat(t, pid)
		if !st.memberDead(p.Info().PID) && st.flags&pfExiting == 0 {
			t.Errorf("background child %d after the group was killed: state %c, flags %#x; want gone, zombie or exiting", pid, st.state, st.flags)
		}
	}
}

// TestTimeoutMockClock: on timeout the group is terminated, and killed
// after KillGrace if that was not enough; the record reports 124.
func TestTimeoutMockClock(t *testing.T) {
	t.Parallel()
	const (
		timeout = 10 * time.Second
		grace   = 3 * time.Second
	)
	for _, tc := range []struct {
		name, mode string
		signal     string
		after      time.Duration // from start to exit
	}{
		{"TERM-ignored", "lc-ignore-term", "SIGKILL", timeout + grace},
		{"TERM-obeyed", "lc-ready-sleep", "SIGTERM", timeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, mClock, m := testMockManager(t, proc.Options{KillGrace: grace})
			timeoutTrap := mClock.Trap().AfterFunc("process", "timeout")
			defer timeoutTrap.Close()
			graceTrap := mClock.Trap().NewTimer("process", "kill-grace")
			defer graceTrap.Close()

			req := helperReq(tc.mode)
			req.Timeout = timeout
			req.Stdin = true
			p := startTrapped(ctx, t, m, req, timeoutTrap, timeout)
			waitText(ctx, t, p, "ready\n")
			lcCheckRunning(t, p.Info())

			w := mClock.Advance(timeout)
			releaseTrapped(ctx, t, graceTrap, grace, "kill-grace timer")
			w.MustWait(ctx)

			if tc.signal == "SIGKILL" {
				// SIGTERM was sent and ignored: the child still echoes.
				if _, err := p.Write([]byte("ping\n")); err != nil {
					t.Fatalf("Write() after terminate = %v", err)
				}
				waitText(ctx, t, p, "ping\n")
				lcCheckRunning(t, p.Info())
				mClock.Advance(grace).MustWait(ctx)
			}
			s := waitFinal(ctx, t, p)
			lcCheckFinal(t, s.Info)
			if code := exitCode(t, s.Info); code != proc.ExitTimedOut || !s.Info.TimedOut || s.Info.Signal != tc.signal {
				t.Errorf("exit code %d, timed out %v, signal %q; want 124, true, %q", code, s.Info.TimedOut, s.Info.Signal, tc.signal)
			}
			if got := s.Info.ExitedAt.Sub(s.Info.StartedAt); got != tc.after {
				t.Errorf("ExitedAt - StartedAt = %v; want %v", got, tc.after)
			}
		})
	}
}

// TestCloseStopsEverything pins section 6 for Close: it terminates, kills
// after KillGrace and no earlier, needs no more time than that once the
// grace is over, leaves every record final (a child that ignores SIGTERM,
// one that obeys it, a grandchild that ignores it and holds stdout of a
// record already final, a shell whose background child ignores it and
// holds no output), refuses later starts, and is idempotent. The grace
// runs on a mock clock, so that the child that obeys SIGTERM is seen dead
// of it before the kill, however slow the machine.
// TestCloseKillsEveryMember checks the group members.
func TestCloseStopsEverything(t *testing.T) {
	t.Parallel()
	const (
		grace = 200 * time.Millisecond
		quiet = 50 * time.Millisecond
	)
	ctx, mClock, m := testMockManager(t, proc.Options{KillGrace: grace, DrainQuiet: quiet})

	// The spawner exits once its grandchild is ready; its record is final
	// one quiet window later, while the grandchild lives on. The trap is
	// set before it starts, so that its drain cannot make the timer first.
	quietTrap := mClock.Trap().NewTimer("drain", "quiet")
	ignoring := mustStart(t, m, helperReq("lc-ignore-term"))
	spawner := mustStart(t, m, helperReq("lc-spawn", "pid", "lc-ignore-term"))
	obeying := mustStart(t, m, helperReq("lc-ready-sleep"))
	shell := mustStart(t, m, proc.StartRequest{
		Command: `trap "" TERM; sleep 30 >/dev/null 2>&1 & echo "spawned $!"; echo ready; wait`,
	})
	procs := []*proc.Process{ignoring, spawner, obeying, shell}

	for _, p := range procs {
		waitText(ctx, t, p, "ready\n")
	}
	quietTrap.MustWait(ctx).MustRelease(ctx)
	quietTrap.Close()
	mClock.Advance(quiet).MustWait(ctx)
	waitFinal(ctx, t, spawner)

	graceTrap := mClock.Trap().NewTimer("manager", "kill-grace")
	defer graceTrap.Close()
	closed := goClose(m)
	releaseTrapped(ctx, t, graceTrap, grace, "Close's kill-grace timer")
	// SIGTERM went out before the grace timer was made: the obeying child
	// dies of it, the others ignore it, and Close waits for the grace.
	waitFinal(ctx, t, obeying)
	select {
	case err := <-closed:
		t.Fatalf("Close() = %v before the grace was over; want it to wait", err)
	default:
	}
	for _, p := range []*proc.Process{ignoring, shell} {
		if !p.Info().Running {
			t.Errorf("%v final during the grace; it ignores SIGTERM", p.Info().Args)
		}
	}
	mClock.Advance(grace).MustWait(ctx)
	// Once the grace is over, Close needs no more clock time and only
	// bounded real time: the kill, and waiting (at most ~2 s of pidfd
	// polls) for the killed members to die.
	bounded, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := recv(bounded, t, closed, "Close after the grace"); err != nil {
		t.Errorf("Close() = %v", err)
	}

	for _, p := range procs {
		if !isDone(p) {
			t.Errorf("after Close: %s (%v) is not final", p.ID(), p.Info().Args)
		} else if p.Info().Running {
			t.Errorf("after Close: Info(%s).Running = true", p.ID())
		}
	}
	for p, want := range map[*proc.Process]int{ignoring: 137, obeying: 143, shell: 137, spawner: 0} {
		if code := exitCode(t, p.Info()); code != want {
			t.Errorf("after Close: %v exit code %d; want %d", p.Info().Args, code, want)
		}
	}

	if _, err := m.Start(helperReq("lc-print", "x")); !errors.Is(err, proc.ErrClosed) {
		t.Errorf("Start() after Close = %v; want an error wrapping ErrClosed", err)
	}
	// The second Close has nothing to wait for, not even the clock.
	if err := recv(ctx, t, goClose(m), "the second Close"); err != nil {
		t.Errorf("second Close() = %v; want nil", err)
	}
}

// TestCloseKillsEveryMember pins I4 for process groups: when Close
// returns, no member of a group it stopped is alive (by the library's own
// measure: not a zombie). Each record here is final already, its leader
// gone, leaving children that ignore SIGTERM, so only Close's kill can end
// them and nothing else waits for their death: background sleeps that
// hold no output, and grandchildren that hold a few hundred MiB (so that
// their exit takes a while).
func TestCloseKillsEveryMember(t *testing.T) {
	t.Parallel()
	if !hasProcFS() {
		t.Skip("no /proc to read group members from")
	}
	ctx := testCtx(t)
	m := proc.NewManager(proc.Options{KillGrace: 100 * time.Millisecond})
	t.Cleanup(func() { _ = m.Close() })

	const children = 10
	members := map[int]int{}
	p := mustStart(t, m, proc.StartRequest{
		Command: fmt.Sprintf(`trap "" TERM; for i in $(seq %d); do sleep 30 >/dev/null 2>&1 & echo $!; done`, children),
	})
	s := waitFinal(ctx, t, p)
	pids := lcParsePIDs(t, s.Output.Text)
	if len(pids) != children {
		t.Fatalf("output %q; want %d PIDs", s.Output.Text, children)
	}
	for _, pid := range pids {
		members[pid] = s.Info.PID
	}

	// Two, so that the group Close kills last has one; started together,
	// since each starts the test binary twice, which under -race on a
	// loaded machine takes seconds.
	var big [2]*proc.Process
	for i := range big {
		big[i] = mustStart(t, m, helperReq("lc-spawn", "pid", "lc-big", "256"))
	}
	for _, p := range big {
		s := waitFinal(ctx, t, p)
		pids := lcParsePIDs(t, s.Output.Text)
		if !strings.Contains(s.Output.Text, "ready\n") || len(pids) != 1 {
			t.Fatalf("output %q; want ready and a PID", s.Output.Text)
		}
		members[pids[0]] = s.Info.PID
	}

	if err := m.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	for pid, pgid := range members {
		if st := readStat(t, pid); !st.memberDead(pgid) {
			t.Errorf("after Close: PID %d of group %d is alive: state %c, flags %#x; want gone or zombie (I4)", pid, pgid, st.state, st.flags)
		}
	}
}

// The tests below pin fixes found in review of Close and of the paths
// that race it: each would fail (some only with a probability per run)
// without its fix.

// TestCloseConcurrentCallsWait pins that a second Close, running while the
// first is still in KillGrace, returns only once everything is stopped.
func TestCloseConcurrentCallsWait(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	m := proc.NewManager(proc.Options{KillGrace: 300 * time.Millisecond})
	p := mustStart(t, m, proc.StartRequest{Command: "trap '' TERM; echo ready; sleep 30"})
	waitText(ctx, t, p, "ready\n")

	running := make(chan bool, 2)
	proc.InParallel(2, func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close() = %v; want nil", err)
		}
		running <- p.Info().Running
	})
	for range 2 {
		if recv(ctx, t, running, "a Close result") {
			t.Errorf("a Close returned while the SIGTERM-ignoring process was still running")
		}
	}
	if err := p.Signal(proc.Kill); !errors.Is(err, proc.ErrClosed) {
		t.Errorf("Signal(kill) after Close = %v; want ErrClosed", err)
	}
	// The child led its own session and process group: no live member is
	// left (zombies are dead; PID 1 reaps them when it gets to it).
	if live := liveMembers(t, p.Info().PID); len(live) != 0 {
		t.Errorf("after Close, live members of the child's group: %v; want none", live)
	}
}

// TestStartHookPanicLeavesNoReservation pins that a CommandContext hook
// that panics gives the ID and the running slot back: Close does not hang
// on a start that never registered, and the ID can be used again.
func TestStartHookPanicLeavesNoReservation(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	var shouldPanic atomic.Bool
	shouldPanic.Store(true)
	m := newManager(t, proc.Options{
		MaxRunning: 1,
		CommandContext: func(ctx context.Context, name string, args ...string) *exec.Cmd {
			if shouldPanic.Load() {
				panic("hook failed")
			}
			return exec.CommandContext(ctx, name, args...)
		},
	})
	func() {
		defer func() {
			if r := recover(); r != "hook failed" {
				t.Fatalf("Start with a panicking hook: recovered %v; want the hook's panic", r)
			}
		}()
		_, _ = m.Start(proc.StartRequest{ID: "x", Args: []string{"true"}})
	}()
	shouldPanic.Store(false)

	// The slot (MaxRunning 1) and the ID are free again.
	p := mustStart(t, m, proc.StartRequest{ID: "x", Args: []string{"true"}})
	waitFinal(ctx, t, p)

	if err := recv(ctx, t, goClose(m), "Close after a panicking hook"); err != nil {
		t.Errorf("Close() = %v; want nil", err)
	}
}

// TestScopeCloseStopsRemovedRecords pins that Scope.Close also stops what
// is left of the owner's records that were already removed: a background
// child whose group lives on.
func TestScopeCloseStopsRemovedRecords(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{KillGrace: 200 * time.Millisecond})
	s := m.Scope("alice")
	p := mustStart(t, s, proc.StartRequest{Command: "sleep 60 & echo started"})
	waitFinal(ctx, t, p) // final after the quiet window; the sleep lives on
	if err := m.Remove(p.ID()); err != nil {
		t.Fatalf("Remove(%s) = %v; want nil", p.ID(), err)
	}
	other := mustStart(t, m.Scope("bob"), proc.StartRequest{Command: "sleep 60"})

	if err := s.Close(); err != nil {
		t.Fatalf("Scope.Close() = %v; want nil", err)
	}
	if err := p.Signal(proc.Kill); !errors.Is(err, proc.ErrNotRunning) {
		t.Errorf("Signal(kill) to the removed record's group after Scope.Close = %v; want ErrNotRunning", err)
	}
	if !other.Info().Running {
		t.Errorf("another owner's process was stopped by alice's Scope.Close")
	}
}

// TestRemoveRacingClose pins that a record removed while Close runs cannot
// leave its process group behind: the group is handed over in the same
// critical section as the drop. The race is narrow, so it runs many rounds.
func TestRemoveRacingClose(t *testing.T) {
	t.Parallel()
	rounds := 30
	if testing.Short() {
		rounds = 5
	}
	for range rounds {
		// Each round's waits have the whole budget: on a loaded machine
		// thirty rounds can take longer than one budget.
		ctx := testCtx(t)
		m := proc.NewManager(proc.Options{KillGrace: 100 * time.Millisecond})
		p := mustStart(t, m, proc.StartRequest{Command: "sleep 60 & echo started"})
		waitFinal(ctx, t, p)
		removed := make(chan error, 1)
		go func() { removed <- m.Remove(p.ID()) }()
		if err := m.Close(); err != nil {
			t.Fatalf("Close() = %v; want nil", err)
		}
		if err := recv(ctx, t, removed, "Remove"); err != nil {
			t.Fatalf("Remove racing Close = %v; want nil (Remove works after Close too)", err)
		}
		// Close stopped the removed record's tree: its background sleep
		// (the child's process group) is gone.
		if live := liveMembers(t, p.Info().PID); len(live) != 0 {
			t.Fatalf("after Close, live members of the removed record's group: %v; want none", live)
		}
	}
}
