//go:build unix

package proc

import (
	"errors"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/procvisor/proc/internal/testkit"
)

// Retention tests that start echo, cat, sleep and true by name, so Unix only
// (they run on Linux in CI); those of retention_internal_test.go start
// nothing and run everywhere, Wine included.

// TestFinalRecordKeepsOneStatus pins what a final record holds: its final
// status, made once, is what every final Info (Info, List, the final and
// removed events) is composed from and points into, so that repeated
// reads return equal values (I1); and its tree, seen empty, is forgotten
// (a signal is ErrNotRunning).
func TestFinalRecordKeepsOneStatus(t *testing.T) {
	t.Parallel()
	ctx, m := internalManager(t, 30*time.Second, Options{})
	p, err := m.Start(StartRequest{Args: []string{"echo", "hello"}})
	if err != nil {
		t.Fatalf("Start(echo) = %v", err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	info := p.Info()
	if info.Running || info.ExitCode == nil || *info.ExitCode != 0 || info.OutputBytes != 6 {
		t.Fatalf("Info() = %+v; want final, exit code 0, 6 bytes", info)
	}
	if info.ExitCode != &p.fin.code || info.Usage != &p.fin.usage {
		t.Errorf("Info() points to %p and %p; want the final status's %p and %p", info.ExitCode, info.Usage, &p.fin.code, &p.fin.usage)
	}
	if again := p.Info(); !reflect.DeepEqual(again, info) || again.ExitCode != info.ExitCode || again.Usage != info.Usage {
		t.Errorf("Info() again = %+v; want %+v, pointing to the same status", again, info)
	}
	if list := m.List(); len(list) != 1 || !reflect.DeepEqual(list[0], info) {
		t.Errorf("List() = %+v; want [%+v]", list, info)
	}
	if err := m.Remove(p.ID()); err != nil {
		t.Fatalf("Remove() = %v", err)
	}
	evs, _, _ := m.Events(0, 0)
	var kinds []EventKind
	for _, ev := range evs {
		if ev.ID != p.ID() {
			continue
		}
		kinds = append(kinds, ev.Kind)
		switch ev.Kind {
		case EventStarted:
			// A copy of the record's static Info: a caller that changes
			// it must not change the record (Info, List, Scopes).
			if ev.Info == p.info || ev.Info == nil || !reflect.DeepEqual(*ev.Info, *p.info) {
				t.Errorf("the started event's Info is %p %+v; want a copy of the record's static Info %p %+v", ev.Info, ev.Info, p.info, *p.info)
			} else if ev.Info.Owner = "changed by a reader"; p.Info().Owner == ev.Info.Owner {
				t.Errorf("changing the started event's Info changed the record's")
			}
		case EventFinal, EventRemoved:
			if ev.Info == nil || !reflect.DeepEqual(*ev.Info, info) || ev.Info.ExitCode != info.ExitCode || ev.Info.Usage != info.Usage {
				t.Errorf("the %s event's Info is %+v; want %+v, pointing to the final status", ev.Kind, ev.Info, info)
			}
		}
	}
	if want := []EventKind{EventStarted, EventFinal, EventRemoved}; !slices.Equal(kinds, want) {
		t.Errorf("events of the record: %q; want %q", kinds, want)
	}
	if got := p.tree(); got != goneTree {
		t.Errorf("a final record's tree is %+v; want it forgotten (goneTree)", got)
	}
	if err := p.Signal(Kill); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Signal(Kill) of a final record = %v; want ErrNotRunning", err)
	}
}

// TestStdinPublishesExit pins that the exit goroutine publishes the
// child's reaping through the stdin pipe (a write that met the exit waits
// for it), and that a record without Stdin keeps no pipe.
func TestStdinPublishesExit(t *testing.T) {
	t.Parallel()
	ctx, m := internalManager(t, 30*time.Second, Options{})
	p, err := m.Start(StartRequest{Args: []string{"cat"}, Stdin: true})
	if err != nil {
		t.Fatalf("Start(cat) = %v", err)
	}
	if p.in.hasExited() {
		t.Error("the stdin pipe says the child exited while cat waits for input")
	}
	if err := p.CloseStdin(); err != nil {
		t.Fatalf("CloseStdin() = %v", err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	if !p.in.hasExited() {
		t.Error("the stdin pipe does not say the child exited once the record is final")
	}
	q, err := m.Start(StartRequest{Args: []string{"true"}})
	if err != nil {
		t.Fatalf("Start(true) = %v", err)
	}
	if q.in != nil {
		t.Errorf("a record without Stdin has a stdin pipe %+v", q.in)
	}
}

// TestScopeCloseWaitsForFinal pins Scope.Close's wait (waitEnded): it
// returns only once its owner's records are final, not when their trees
// are empty. The exit goroutine of the record is held in its clock call
// after the reap (a trap on Now "process", "exit"), its tree empty: Scope.Close
// must be waiting for it then, and return once it is let go.
func TestScopeCloseWaitsForFinal(t *testing.T) {
	t.Parallel()
	ctx := testkit.Ctx(t, 30*time.Second)
	mClock := quartz.NewMock(t)
	trap := mClock.Trap().Now("process", "exit")
	defer trap.Close()
	m := NewManager(Options{Clock: mClock})
	t.Cleanup(func() { _ = m.Close() })
	s := m.Scope("a")
	p, err := s.Start(StartRequest{Args: []string{"sleep", "600"}})
	if err != nil {
		t.Fatalf("Start(sleep) = %v", err)
	}
	returned := make(chan error, 1)
	// Ends when Scope.Close returns: once the record is final, or at once
	// if Scope.Close does not wait for it.
	go func() { returned <- s.Close() }()
	call := trap.MustWait(ctx) // the child died of SIGTERM and was reaped
	// Let go on every path: the Manager's Close waits for it too.
	release := sync.OnceFunc(func() { call.MustRelease(ctx) })
	defer release()
	for !endsWaited(m) {
		select {
		case err := <-returned:
			t.Fatalf("Scope.Close() = %v while its record's exit goroutine was held before the record was final; want it to wait", err)
		case <-ctx.Done():
			t.Fatal("Scope.Close never waited for its record")
		default:
		}
		runtime.Gosched()
	}
	if p.isFinal() {
		t.Fatal("the record is final while its exit goroutine is held before finishing it")
	}
	release()
	select {
	case err := <-returned:
		if err != nil {
			t.Errorf("Scope.Close() = %v; want nil", err)
		}
	case <-ctx.Done():
		t.Fatal("Scope.Close did not return once the record was final")
	}
	if !p.isFinal() || p.Info().Running {
		t.Errorf("after Scope.Close: final %v, running %v; want a final record", p.isFinal(), p.Info().Running)
	}
}
