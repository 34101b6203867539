//go:build unix

package proc_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procvisor/proc"
)

// Unix-only Manager tests: starts the OS refuses, Options.Shell, a
// draining record under MaxRunning, ClearEnv with nothing added, and the
// descriptors a child inherits.

// TestStartRefusedNoLeaks pins that starts the OS refuses leave no
// descriptor, goroutine or record behind (section 8). It runs isolated, so
// that the counts are its own.
func TestStartRefusedNoLeaks(t *testing.T) {
	t.Parallel()
	needProcFS(t)
	ctx := testCtx(t, 120*time.Second)
	if !isolated(ctx, t) {
		return
	}
	dir := t.TempDir()
	noexec := filepath.Join(dir, "noexec")
	if err := os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reqs := []proc.StartRequest{
		{Args: []string{"proc-test-no-such-program"}},
		{Args: []string{filepath.Join(dir, "missing")}, Stdin: true},
		{Args: []string{noexec}, Stdin: true, SeparateStderr: true},
		{Args: []string{noexec}, TTY: true},
	}
	// Each round refuses on both Managers; the second refuses on the
	// Command path (the shell itself missing).
	managers := func() (m, shellless *proc.Manager) {
		return newManager(t, proc.Options{}),
			newManager(t, proc.Options{Shell: []string{filepath.Join(dir, "no-shell"), "-c"}})
	}
	startAll := func(m, shellless *proc.Manager) {
		t.Helper()
		for _, req := range reqs {
			if p, err := m.Start(req); err == nil {
				t.Fatalf("Start(%q) succeeded: %s", req.Args, p.ID())
			} else if in := mgrSentinelsIn(err); len(in) != 0 {
				t.Fatalf("Start(%q) = %v; wraps %v, want an OS error", req.Args, err, in)
			}
		}
		if p, err := shellless.Start(proc.StartRequest{Command: "true"}); err == nil {
			t.Fatalf("Start with a missing shell succeeded: %s", p.ID())
		}
	}
	closeAll := func(ms ...*proc.Manager) {
		t.Helper()
		for _, m := range ms {
			if err := m.Close(); err != nil {
				t.Fatalf("Close() = %v", err)
			}
		}
	}
	// Warm up on Managers of their own: the runtime opens descriptors of
	// its own lazily (the network poller on the first pipe), once.
	warm, warmShellless := managers()
	startAll(warm, warmShellless)
	closeAll(warm, warmShellless)
	checkClosed := noLeaks(t)
	m, shellless := managers()
	startAll(m, shellless) // a Manager opens its cgroup and the like at its first start
	backgroundIdle(m)
	// While the Managers live, they keep record cgroups open, a cache
	// bounded by design: spares (more when a start found none) and, of a
	// cgroup readied for reuse, its cpu.stat and cgroup.events. How many
	// depends on how fast the worker readies refused starts' cgroups.
	// Close leaves none (checkClosed).
	// At most: the spares a start that finds none grows to (64), and the
	// files of 64 cgroups readied for reuse, far below one per refused
	// start (200 in 50 rounds).
	checkLive := noLeaksBut(t, isRecordCgroupFile, 64+2*64)
	for range 50 {
		startAll(m, shellless)
	}
	backgroundIdle(m)
	checkLive("after 50 rounds of refused starts")
	if n := len(m.List()) + len(shellless.List()); n != 0 {
		t.Errorf("List() holds %d records after refused starts", n)
	}
	closeAll(m, shellless)
	checkClosed("after 50 rounds of refused starts and Close")
}

// TestStartNoPermission pins that a program the OS refuses to execute is
// reported as fs.ErrPermission and none of our sentinels, and leaves no
// record, no reserved ID and no running slot behind.
func TestStartNoPermission(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho ran\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, prog := range []string{script, dir} {
		m := newManager(t, proc.Options{MaxRunning: 1})
		for range 3 {
			p, err := m.Start(proc.StartRequest{ID: "refused", Args: []string{prog}})
			if p != nil {
				t.Errorf("Start(%q) returned a process with its error", prog)
			}
			if !errors.Is(err, os.ErrPermission) {
				t.Errorf("Start(%q) = %v; want an error wrapping os.ErrPermission", prog, err)
			}
			if in := mgrSentinelsIn(err); len(in) != 0 {
				t.Errorf("Start(%q) = %v; wraps our sentinels %v, want none (an OS refusal)", prog, err, in)
			}
			if err != nil && !strings.Contains(err.Error(), prog) {
				t.Errorf("Start(%q) = %q; want the message to name the program", prog, err)
			}
		}
		if ids := mgrIDs(m.List()); len(ids) != 0 {
			t.Errorf("List() after refused starts of %q = %v; want empty", prog, ids)
		}
		good := mgrExitReq(0)
		good.ID = "refused"
		waitFinal(ctx, t, mustStart(t, m, good))
	}
}

// TestShellOption pins Options.Shell: commands run as Shell + [Command],
// and the CommandContext hook sees exactly that.
func TestShellOption(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	const command = "false; echo reached"

	def := newManager(t, proc.Options{})
	snap := waitFinal(ctx, t, mustStart(t, def, proc.StartRequest{Command: command}))
	if code := exitCode(t, snap.Info); code != 0 || snap.Output.Text != "reached\n" {
		t.Errorf("default shell: %q = exit %d, %q; want 0, %q", command, code, snap.Output.Text, "reached\n")
	}

	type callArgs struct {
		name string
		args []string
	}
	calls := make(chan callArgs, 1)
	m := newManager(t, proc.Options{
		Shell: []string{"sh", "-ec"},
		CommandContext: func(ctx context.Context, name string, args ...string) *exec.Cmd {
			calls <- callArgs{name, slices.Clone(args)}
			return exec.CommandContext(ctx, name, args...)
		},
	})
	snap = waitFinal(ctx, t, mustStart(t, m, proc.StartRequest{Command: command}))
	if code := exitCode(t, snap.Info); code != 1 || snap.Output.Text != "" {
		t.Errorf("Shell sh -ec: %q = exit %d, %q; want 1, \"\"", command, code, snap.Output.Text)
	}
	if snap.Info.Command != command || snap.Info.Args != nil {
		t.Errorf("Info.Command, Args = %q, %q; want the request's %q, nil", snap.Info.Command, snap.Info.Args, command)
	}
	select {
	case got := <-calls:
		if got.name != "sh" || !slices.Equal(got.args, []string{"-ec", command}) {
			t.Errorf("CommandContext(%q, %q); want (sh, [-ec %q])", got.name, got.args, command)
		}
	default:
		t.Errorf("CommandContext was not called")
	}
}

// TestMaxRunningCountsDraining pins that a record whose child exited but
// whose output is still draining (a background child holds stdout) is not
// final: it counts against MaxRunning and cannot be removed.
func TestMaxRunningCountsDraining(t *testing.T) {
	t.Parallel()
	ctx, mClock, m := testMockManager(t, proc.Options{MaxRunning: 1})
	trap := mClock.Trap().NewTimer("drain", "quiet")
	var closeTrap sync.Once
	defer closeTrap.Do(trap.Close)

	p := mustStart(t, m, proc.StartRequest{Command: "sleep 60 & echo started"})
	// The drain opens its quiet window once the shell was reaped; under the
	// mock clock it stays open until the test advances time.
	call := trap.MustWait(ctx)
	call.MustRelease(ctx)
	// Later drains (of q below) may open a window too, when their pump sees
	// EOF a moment after the exit: they must not be trapped.
	closeTrap.Do(trap.Close)
	if !p.Info().Running {
		t.Fatalf("record of an exited child still draining reports Running == false")
	}
	_, err := m.Start(mgrExitReq(0))
	mgrCheckErr(t, "Start() while the only record drains", err, proc.ErrLimit)
	mgrCheckErr(t, "Remove(draining)", m.Remove(p.ID()), proc.ErrRunning, p.ID())

	if err := p.Signal(proc.Kill); err != nil {
		t.Fatalf("Signal(Kill) to the group of a draining record = %v; want nil (the background child lives)", err)
	}
	waitFinal(ctx, t, p)
	q := mustStart(t, m, mgrExitReq(0))
	waitFinal(ctx, t, q)
}

// TestClearEnvEmpty pins that ClearEnv with no Env gives the child an empty
// environment, not the parent's (a nil exec.Cmd.Env inherits). Not
// parallel: see ecoSetSecret.
func TestClearEnvEmpty(t *testing.T) {
	ctx := testCtx(t)
	ecoSetSecret(t)
	m := newManager(t, proc.Options{})
	snap, err := m.Run(ctx, proc.StartRequest{Args: []string{"env"}, ClearEnv: true})
	if err != nil {
		t.Fatalf("Run(env) = %v", err)
	}
	if code := exitCode(t, snap.Info); code != 0 || snap.Output.Text != "" {
		t.Errorf("env with ClearEnv exited %d and printed %q; want an empty environment", code, snap.Output.Text)
	}
}

// TestChildInheritsNoDescriptor pins that a child sees only its own three
// standard descriptors, whatever the manager holds for other processes at
// that moment: a PTY master, stdin and output pipes, a log file, the
// pidfds of running children. Any of them leaking would keep a pipe open
// in an unrelated child (no EOF for its reader) or hand it a terminal.
// Not parallel: a parallel test's descriptors are none of this test's
// business.
func TestChildInheritsNoDescriptor(t *testing.T) {
	needProcFS(t)
	needTool(t, "ls")
	// Descriptors this test process inherited without close-on-exec (from
	// whatever started it) reach every child of it, os/exec's too; they
	// are the host's to mark, not the library's.
	hostInheritable := map[string]string{}
	for fd, target := range openFDs(t) {
		n, _ := strconv.Atoi(fd)
		if flags, err := unix.FcntlInt(uintptr(n), unix.F_GETFD, 0); n > 2 && err == nil && flags&unix.FD_CLOEXEC == 0 {
			hostInheritable[fd] = target
		}
	}

	ctx, m := testManager(t, proc.Options{})
	holders := []proc.StartRequest{
		{Args: []string{"cat"}, TTY: true},
		{Args: []string{"cat"}, Stdin: true, SeparateStderr: true},
		{Args: []string{"cat"}, Stdin: true, LogPath: filepath.Join(t.TempDir(), "log")},
	}
	var running []*proc.Process
	for _, req := range holders {
		running = append(running, mustStart(t, m, req))
	}

	snap := waitFinal(ctx, t, mustStart(t, m, proc.StartRequest{Args: []string{"ls", "-l", "/proc/self/fd/"}}))
	if code := exitCode(t, snap.Info); code != 0 {
		t.Fatalf("ls exit %d:\n%s", code, snap.Output.Text)
	}
	var seen []string
	for _, line := range strings.Split(snap.Output.Text, "\n") {
		fields := strings.Fields(line)
		i := slices.Index(fields, "->")
		if i < 1 || i+1 >= len(fields) {
			continue // the "total" line
		}
		fd, target := fields[i-1], fields[i+1]
		seen = append(seen, fd)
		switch {
		case fd == "0" || fd == "1" || fd == "2":
		case strings.HasPrefix(target, "/proc/") && strings.HasSuffix(target, "/fd"):
			// The directory ls itself is reading.
		case hostInheritable[fd] == target:
		default:
			t.Errorf("the child inherited descriptor %s -> %s", fd, target)
		}
	}
	if !slices.Contains(seen, "0") || !slices.Contains(seen, "1") || !slices.Contains(seen, "2") {
		t.Errorf("ls listed descriptors %v; want 0, 1 and 2 among them:\n%s", seen, snap.Output.Text)
	}

	for _, p := range running {
		if err := p.Signal(proc.Kill); err != nil {
			t.Errorf("Signal(Kill) on %s = %v", p.ID(), err)
		}
		waitFinal(ctx, t, p)
	}
}
