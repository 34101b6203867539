//go:build unix

package proc_test

import (
	"context"
	"errors"
	"os/exec"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/procvisor/proc"
)

// These tests pin fixes found in review of Close and of the paths that
// race it: each would fail (some only with a probability per run) without
// its fix.

// TestCloseConcurrentCallsWait pins that a second Close, running while the
// first is still in KillGrace, returns only once everything is stopped.
func TestCloseConcurrentCallsWait(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	m := proc.NewManager(proc.Options{KillGrace: 300 * time.Millisecond})
	p := mustStart(t, m, proc.StartRequest{Command: "trap '' TERM; echo ready; sleep 30"})
	if _, err := p.WaitFor(ctx, regexp.MustCompile(`^ready$`), true); err != nil {
		t.Fatalf("WaitFor(ready) = %v", err)
	}

	var wg sync.WaitGroup
	running := make(chan bool, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.Close(); err != nil {
				t.Errorf("Close() = %v; want nil", err)
			}
			running <- p.Info().Running
		}()
	}
	wg.Wait()
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
	if live := faultLiveMembers(t, map[int]bool{p.Info().PID: true}); len(live) != 0 {
		t.Errorf("after Close, live members of the child's group: %v; want none", live)
	}
}

// TestStartHookPanicLeavesNoReservation pins that a CommandContext hook
// that panics gives the ID and the running slot back: Close does not hang
// on a start that never registered, and the ID can be used again.
func TestStartHookPanicLeavesNoReservation(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	var panicking sync.Mutex
	shouldPanic := true
	m := newManager(t, proc.Options{
		MaxRunning: 1,
		CommandContext: func(ctx context.Context, name string, args ...string) *exec.Cmd {
			panicking.Lock()
			defer panicking.Unlock()
			if shouldPanic {
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
	panicking.Lock()
	shouldPanic = false
	panicking.Unlock()

	// The slot (MaxRunning 1) and the ID are free again.
	p := mustStart(t, m, proc.StartRequest{ID: "x", Args: []string{"true"}})
	waitFinal(ctx, t, p)

	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	if err := recv(ctx, t, closed, "Close after a panicking hook"); err != nil {
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
	ctx := testCtx(t)
	rounds := 30
	if testing.Short() {
		rounds = 5
	}
	for range rounds {
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
		if live := faultLiveMembers(t, map[int]bool{p.Info().PID: true}); len(live) != 0 {
			t.Fatalf("after Close, live members of the removed record's group: %v; want none", live)
		}
	}
}

// TestLogPathTerminalRefused pins that a terminal is not accepted as a log
// file: a write to it can block for ever (a stopped terminal), and the log
// is written before the buffer.
func TestLogPathTerminalRefused(t *testing.T) {
	t.Parallel()
	master, slave, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer master.Close()
	defer slave.Close()
	m := newManager(t, proc.Options{})
	_, err = m.Start(proc.StartRequest{Args: []string{"true"}, LogPath: slave.Name()})
	if !errors.Is(err, proc.ErrInvalid) {
		t.Fatalf("Start(LogPath: %s) = %v; want ErrInvalid", slave.Name(), err)
	}
	if got := m.List(); len(got) != 0 {
		t.Errorf("List() after a refused start = %d records; want none", len(got))
	}
}
