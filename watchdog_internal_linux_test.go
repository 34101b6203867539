//go:build linux

package proc

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
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
	setup, err := m.trees.setup(cmd, false, Limits{})
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
	if err := forkOn(setup)(cmd.Start); err != nil {
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
