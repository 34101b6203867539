//go:build linux && !proc_otherunix

package proc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procvisor/proc/internal/procfs"
	"github.com/procvisor/proc/internal/sandbox"
)

// TestWatchdogBroken pins what happens when the host cannot write a slot
// of the watchdog's groups file (here: the file is closed under it): the
// watchdog counts as lost, so the Manager replaces it, and abandoning it
// kills nothing, though it still lists a live group. (An abandon that let
// the watchdog read end-of-file fails here; one that closed the pipe just
// before its SIGKILL would fail only when the watchdog outran the kill.)
func TestWatchdogBroken(t *testing.T) {
	t.Parallel()
	d, err := startWatchdog("")
	if err != nil {
		t.Fatalf("startWatchdog: %v", err)
	}
	member := exec.Command("sleep", "60")
	member.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := member.Start(); err != nil {
		t.Fatalf("start sleep: %v", err)
	}
	defer func() {
		_ = member.Process.Kill()
		_ = member.Wait()
	}()
	off, err := d.guard(member.Process.Pid, -1)
	if err != nil || d.lost() {
		t.Fatalf("guard = %d, %v; lost %v; want a slot, a watchdog not lost", off, err, d.lost())
	}
	_ = d.groups.Close() // every later write fails
	d.forget(off)
	if !d.lost() {
		t.Fatal("the watchdog is not lost after a slot could not be blanked")
	}
	d.abandon()
	// The watchdog is reaped: had it read end-of-file, its kill was sent.
	// The member is a child of this test: a zombie means killed.
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", member.Process.Pid))
	if i := bytes.LastIndexByte(stat, ')'); err != nil || i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
		t.Errorf("the group the old watchdog listed was killed by abandon (stat %q, %v)", stat, err)
	}
}

// TestWatchdogReplacedDuringStart pins that a start under way while the
// watchdog is replaced still ends registered with the new one: the
// replacement registers the trees of the registry, which the start's tree
// joins only afterwards (it had the old, abandoned watchdog).
func TestWatchdogReplacedDuringStart(t *testing.T) {
	t.Parallel()
	m := NewManager(Options{Containment: ContainGroup})
	defer m.Close()
	if _, err := m.Run(context.Background(), StartRequest{Args: []string{"true"}}); err != nil {
		t.Fatalf("first Run: %v", err)
	}
	// A start past the containment decision: it holds the first watchdog.
	cmd := exec.Command("sleep", "60")
	setup, err := m.trees.setup(cmd, false, false, Limits{})
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	old := setup.guard
	// The watchdog is killed from outside; the next Start replaces it.
	if err := old.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill the watchdog: %v", err)
	}
	for !old.lost() {
		runtime.Gosched()
	}
	if _, err := m.Run(context.Background(), StartRequest{Args: []string{"true"}}); err != nil {
		t.Fatalf("Run after the watchdog died: %v", err)
	}
	m.trees.contain.mu.Lock()
	cur := m.trees.contain.guard
	m.trees.contain.mu.Unlock()
	if cur == old || cur == nil {
		t.Fatalf("the watchdog was not replaced")
	}
	// The start goes on, as launchRegistered does it.
	if err := cmd.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	tr, err := setup.started(cmd, "")
	if err != nil {
		t.Fatalf("started: %v", err)
	}
	m.trees.register(tr)
	m.trees.recheck(tr)

	buf := make([]byte, cur.end)
	if _, err := cur.groups.ReadAt(buf, 0); err != nil {
		t.Fatalf("read the new watchdog's groups: %v", err)
	}
	if !slices.Contains(strings.Fields(string(buf)), strconv.Itoa(cmd.Process.Pid)) {
		t.Errorf("group %d, started while the watchdog was replaced, is not in the new watchdog's file %q", cmd.Process.Pid, buf)
	}
}

// TestWatchdogPendingMarkSettled pins that a sandboxed start in group mode
// leaves no pending mark behind in the watchdog's groups file: a start
// that forked puts its group ID into the slot of its mark (one slot per
// start, as without the sandbox), and one that failed after the mark (its
// exec refused) blanks the slot, which the next start reuses.
func TestWatchdogPendingMarkSettled(t *testing.T) {
	t.Parallel()
	if _, err := sandbox.Probe(sandbox.Steps{}); err != nil {
		t.Skipf("the sandbox cannot run here (CI runs it): %v", err)
	}
	ctx, m := internalManager(t, time.Minute, Options{Containment: ContainGroup, Sandbox: &Sandbox{}})
	notExec := filepath.Join(t.TempDir(), "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start(StartRequest{Args: []string{notExec}}); err == nil {
		t.Fatalf("Start of a file without the execute bit succeeded")
	}
	p, err := m.Start(StartRequest{Args: []string{"sleep", "60"}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer func() { _ = p.Signal(Kill); _ = p.Wait(ctx) }()
	m.trees.contain.mu.Lock()
	guard := m.trees.contain.guard
	m.trees.contain.mu.Unlock()
	guard.mu.Lock()
	buf := make([]byte, guard.end)
	_, err = guard.groups.ReadAt(buf, 0)
	guard.mu.Unlock()
	if err != nil {
		t.Fatalf("read the groups file: %v", err)
	}
	if want := []string{strconv.Itoa(p.Info().PID)}; !slices.Equal(strings.Fields(string(buf)), want) {
		t.Errorf("groups file %q; want only %v: a failed start's mark blanked, a started one's replaced by its group", buf, want)
	}
	if len(buf) != slotSize {
		t.Errorf("groups file of %d bytes; want one slot (%d): the failed start's slot reused", len(buf), slotSize)
	}
}

// TestBootTicksMatchStartTimes pins the unit and clock of a pending mark:
// bootTicks read before a fork is at most the child's start time in
// /proc/<pid>/stat, and bootTicks read after it at least that (a wrong
// divisor or clock would put the mark after the children it covers, and
// the sweep would spare them).
func TestBootTicksMatchStartTimes(t *testing.T) {
	t.Parallel()
	for range 20 {
		before, err := bootTicks()
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("true")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		st, ok := procfs.ReadStat(cmd.Process.Pid) // not reaped yet: ours
		ns, err := kernelBootTime()
		after := ns / (1e9 / userHZ)
		_ = cmd.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Fatalf("no stat for child %d", cmd.Process.Pid)
		}
		if start := int64(st.StartTime); start < before || start > after {
			t.Fatalf("child started at tick %d; want within the ticks read around its fork [%d, %d]", start, before, after)
		}
	}
}

// TestBootTicksKernelClock pins that bootTicks, which counts from a
// reading of the kernel's boot clock with the monotonic clock, is never
// after the kernel's clock read just after it, nor more than a tick
// before the one read just before it (this machine does not suspend),
// across the refresh of its reading.
func TestBootTicksKernelClock(t *testing.T) {
	t.Parallel()
	ticks := func() int64 {
		ns, err := kernelBootTime()
		if err != nil {
			t.Fatal(err)
		}
		return ns / (1e9 / userHZ)
	}
	check := func() {
		before := ticks()
		got, err := bootTicks()
		after := ticks()
		if err != nil || got > after || got < before-1 {
			t.Fatalf("bootTicks = %d, %v; want within [%d-1, %d], the kernel's around it", got, err, before, after)
		}
	}
	check()
	// A reading older than bootRefresh is taken again.
	old := &bootReading{ns: 0, at: time.Now().Add(-bootRefresh)}
	bootBase.Store(old)
	check()
	if bootBase.Load() == old {
		t.Fatal("a reading older than bootRefresh was kept")
	}
	for range 1000 {
		check()
	}
}

// TestWatchdogSlotContent pins the bytes of a slot of the groups file,
// which the watchdog script parses: a group ID or a pending mark
// right-aligned in blanks before the newline, all blanks when empty; and
// that making one allocates nothing (a start writes two or three).
// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
func TestWatchdogSlotContent(t *testing.T) {
	for _, tc := range []struct {
		got  [slotSize]byte
		want string
	}{
		{slot(0), "               \n"},
		{slot(1), "              1\n"},
		{slot(4194304), "        4194304\n"},
		{slotOf([]byte("p1234567890123")), " p1234567890123\n"},
		{slotOf(nil), "               \n"},
	} {
		if string(tc.got[:]) != tc.want {
			t.Errorf("slot = %q; want %q", tc.got[:], tc.want)
		}
	}
	var sink [slotSize]byte
	if n := testing.AllocsPerRun(100, func() { sink = slot(4194304) }); n != 0 {
		t.Errorf("slot(4194304) made %v allocations; want 0", n)
	}
	_ = sink
}
