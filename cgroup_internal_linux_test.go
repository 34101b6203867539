//go:build linux && !proc_otherunix

package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/procvisor/proc/internal/testkit"
)

// CgroupWorkerIdle waits until the exit goroutines of m's final records
// have returned and m's cgroup worker, if m has cgroups, is idle. Both
// ready a done record's cgroup for reuse off the record's path, reading
// its files after Done closed (the exit goroutine after publishing the
// end, settleOwn; the worker otherwise): a test that counts the process's
// descriptors waits for them first, so that those reads are not counted
// as its own. Nothing may start meanwhile, and no final record may have
// been dropped from m's list (by retention or Remove) just before: its
// exit goroutine, which this does not find, may still be readying its
// cgroup.
func CgroupWorkerIdle(m *Manager) {
	var final []*Process
	m.mu.Lock()
	for _, p := range m.order {
		select {
		case <-p.Done():
			final = append(final, p)
		default:
		}
	}
	m.mu.Unlock()
	m.waitEnded(final)
	m.trees.contain.mu.Lock()
	h := m.trees.contain.host
	m.trees.contain.mu.Unlock()
	if h != nil {
		h.wg.Wait()
	}
}

// ranCgroupHost runs args on m, a cgroup-mode Manager, waits until its
// cgroup worker is idle (CgroupWorkerIdle) and returns its cgroup host;
// the test skips where cgroups cannot be used.
func ranCgroupHost(ctx context.Context, t *testing.T, m *Manager, args ...string) *cgroupHost {
	t.Helper()
	if _, err := m.Run(ctx, StartRequest{Args: args}); errors.Is(err, ErrUnsupported) {
		t.Skipf("no cgroups here (%v): this test runs where cgroup v2 is writable", err)
	} else if err != nil {
		t.Fatalf("Run(%q) = %v", args, err)
	}
	CgroupWorkerIdle(m)
	m.trees.contain.mu.Lock()
	defer m.trees.contain.mu.Unlock()
	return m.trees.contain.host
}

// TestCgroupTriesRunOut: a start whose every try took a spare removed
// from outside fails after cgroupTries, saying so, and its error does not
// read as a missing program (the clone's ENOENT is not unwrapped).
func TestCgroupTriesRunOut(t *testing.T) {
	t.Parallel()
	ctx, m := internalManager(t, 30*time.Second, Options{Containment: ContainCgroup})
	poolOnMock(t, m) // the spares stay while the test looks
	h := ranCgroupHost(ctx, t, m, "true")
	removeNextSpares(t, h, cgroupTries)
	_, err := m.Start(StartRequest{Args: []string{"true"}})
	if err == nil || !strings.Contains(err.Error(), "removed from outside") || errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Start after its %d cgroups were removed from outside = %v; want an error saying so, not os.ErrNotExist", cgroupTries, err)
	}
	if _, err := m.Run(ctx, StartRequest{Args: []string{"true"}}); err != nil {
		t.Errorf("Run(true) after the removed cgroups were discarded = %v; want nil", err)
	}
}

// TestRetryHookPanicDiscardsLog: a start made again because its spare
// cgroup was removed from outside calls Options.CommandContext again; a
// hook that panics then leaves no log file the start created, as a hook
// that panics at the first call does (the log is opened after it).
func TestRetryHookPanicDiscardsLog(t *testing.T) {
	t.Parallel()
	ctx := testkit.Ctx(t, 30*time.Second)
	var calls atomic.Int32
	m := NewManager(Options{Containment: ContainCgroup, CommandContext: func(ctx context.Context, name string, args ...string) *exec.Cmd {
		if calls.Add(1) == 3 {
			panic("hook panics at the retry")
		}
		return exec.CommandContext(ctx, name, args...)
	}})
	defer m.Close()
	h := ranCgroupHost(ctx, t, m, "true") // call 1
	removeNextSpares(t, h, 1)
	log := filepath.Join(t.TempDir(), "out.log")
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Errorf("Start with a hook that panics at its retry returned; want the panic")
			}
		}()
		_, _ = m.Start(StartRequest{Args: []string{"true"}, LogPath: log}) // calls 2 and 3
	}()
	if _, err := os.Stat(log); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("log file after the hook panicked at the retry: stat = %v; want it removed", err)
	}
	if got := calls.Load(); got != 3 {
		t.Errorf("CommandContext called %d times; want 3 (the first Run, the start and its retry)", got)
	}
}
