// Package proctest helps test code that runs a [proc.Manager] on a mock
// clock (github.com/coder/quartz), as net/http/httptest helps test HTTP
// code.
//
// A Manager takes all its time from Options.Clock, so a test can drive
// timeouts, drain windows and retention with quartz.NewMock without
// sleeping. Closing such a Manager is the one step that needs to know
// which timers the library sets: Close may wait on a kill-grace timer, and
// a process still draining waits on its drain timers. [CloseOnMock] does
// that step, so a test need not know the library's timer tags.
// [NewManager] returns a Manager that is closed, that way or plainly, when
// the test ends.
package proctest

import (
	"context"
	"sync"

	"github.com/coder/quartz"
	"golang.org/x/xerrors"

	"github.com/procvisor/proc"
)

// TB is the part of testing.TB that NewManager uses.
type TB interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
}

// NewManager returns proc.NewManager(opts), closed when tb's test ends; a
// Close error fails the test. When opts.Clock is a *quartz.Mock the
// Manager is closed with CloseOnMock, so that a test on a mock clock need
// not advance it through Close itself. NewManager is safe to call from
// parallel tests.
func NewManager(tb TB, opts proc.Options) *proc.Manager {
	tb.Helper()
	m := proc.NewManager(opts)
	tb.Cleanup(func() {
		var err error
		if mClock, ok := opts.Clock.(*quartz.Mock); ok {
			err = CloseOnMock(context.Background(), mClock, m)
		} else {
			err = m.Close()
		}
		if err != nil {
			tb.Errorf("close the Manager: %v", err)
		}
	})
	return m
}

// CloseOnMock closes m, whose Options.Clock is mClock, and advances mClock
// whenever Close (or a drain it waits for) waits on a timer, until Close
// returns. It returns Close's error, or an error if ctx ends first (Close
// may then still be running).
//
// It traps every NewTimer and Timer.Reset call on mClock while it runs, so
// that it learns of each timer as it is set and no timer moves between the
// moment it looks and the moment it advances; a test must not hold traps of
// its own on those calls meanwhile (quartz requires every trap that catches
// a call to release it). Timers that fire by callback (AfterFunc) are not
// trapped, since their callbacks may set timers in turn; they fire when
// the clock passes them. Advancing moves mClock forward: a test that reads
// the time afterwards sees it moved. Every timed wait ends at once, in
// real time: a drain window does not wait for output still in flight, so
// output written while Close runs may be cut, as it would be after the
// window on a real clock.
//
// CloseOnMock starts goroutines and joins them all before it returns.
func CloseOnMock(ctx context.Context, mClock *quartz.Mock, m *proc.Manager) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	traps := []*quartz.Trap{mClock.Trap().NewTimer(), mClock.Trap().TimerReset()}
	defer func() {
		for _, trap := range traps {
			trap.Close()
		}
	}()

	// One forwarder per trap hands its calls to the loop below; cancel
	// stops them, and wg joins them before the traps close (so that no
	// call is left unreleased).
	calls := make(chan *quartz.Call)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for _, trap := range traps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			forward(ctx, trap, calls)
		}()
	}

	// Close returns once; the buffer lets its goroutine end even if this
	// function returned on ctx first.
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	for {
		select {
		case err := <-closed:
			return err
		default:
		}
		// A pending timer: move to it. Advance, not AdvanceNext: Close may
		// stop that timer meanwhile (a kill-grace, a reap), and then there
		// is no next timer to advance to; Advance only moves the time.
		if d, ok := mClock.Peek(); ok {
			if err := mClock.Advance(d).Wait(ctx); err != nil {
				return xerrors.Errorf("close on mock clock: advance %v: %w", d, err)
			}
			continue
		}
		// No timer: wait until Close returns or sets one.
		select {
		case err := <-closed:
			return err
		case call := <-calls:
			if err := call.Release(ctx); err != nil {
				return xerrors.Errorf("close on mock clock: release %v: %w", call.Tags, err)
			}
		case <-ctx.Done():
			return xerrors.Errorf("close on mock clock: Close did not return: %w", ctx.Err())
		}
	}
}

// forward hands each call trap catches to calls until ctx ends; a call it
// holds when ctx ends is released, so that the caller is not left parked.
func forward(ctx context.Context, trap *quartz.Trap, calls chan<- *quartz.Call) {
	for {
		call, err := trap.Wait(ctx)
		if err != nil {
			return
		}
		select {
		case calls <- call:
		case <-ctx.Done():
			_ = call.Release(context.Background())
			return
		}
	}
}
