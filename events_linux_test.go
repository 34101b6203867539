//go:build linux && !proc_otherunix

package proc_test

import (
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/quartz"
	"golang.org/x/sys/unix"

	"github.com/procvisor/proc"
	"github.com/procvisor/proc/proctest"
)

// watchActivityErr is what a start with WatchActivity returns here.
var watchActivityErr error

// activityWatch is a record started with WatchActivity on a mock clock,
// with traps that make each of its poller's looks a step of the test.
type activityWatch struct {
	m      *proc.Manager
	p      *proc.Process
	mClock *quartz.Mock
	tick   time.Duration // the poller's period
	looked *quartz.Trap  // Now("events", "activity"): a look succeeded
}

// startActivityWatch starts req with WatchActivity and waits for the
// poller's first look (which must succeed) and its ticker.
func startActivityWatch(ctx context.Context, t *testing.T, req proc.StartRequest) *activityWatch {
	t.Helper()
	mClock := quartz.NewMock(t)
	m := mockManager(t, mClock, proc.Options{Containment: proc.ContainGroup})
	ticker := mClock.Trap().NewTicker("events", "activity")
	defer ticker.Close()
	looked := mClock.Trap().Now("events", "activity")
	t.Cleanup(looked.Close) // before the Manager closes
	req.WatchActivity = true
	a := &activityWatch{m: m, p: mustStart(t, m, req), mClock: mClock, looked: looked}
	looked.MustWait(ctx).MustRelease(ctx)
	call := ticker.MustWait(ctx)
	a.tick = call.Duration
	call.MustRelease(ctx)
	if a.tick <= 0 || a.tick > 200*time.Millisecond {
		t.Errorf("WatchActivity polls every %v; want at most 200ms, so that 250ms holds", a.tick)
	}
	return a
}

// look makes the poller look once more and waits until it did.
func (a *activityWatch) look(ctx context.Context, t *testing.T) {
	t.Helper()
	a.mClock.Advance(a.tick).MustWait(ctx)
	a.looked.MustWait(ctx).MustRelease(ctx)
}

// kinds returns the kinds of p's events after its started event, waiting
// until there are want of them.
func (a *activityWatch) kinds(ctx context.Context, t *testing.T, want int) []proc.Event {
	t.Helper()
	for {
		evs := eventsOf(allEvents(t, a.m), a.p.ID())[1:]
		if len(evs) >= want {
			return evs
		}
		_, last, _ := a.m.Events(0, 0)
		if err := a.m.WaitEvent(ctx, last); err != nil {
			t.Fatalf("waiting for %d events of %s (have %v): %v", want, a.p.ID(), evs, err)
		}
	}
}

// TestEventsActivityMock drives WatchActivity's poller on a mock clock:
// waiting_for_input each time the tree begins to wait for input (not at
// every look while it waits), listening once for a new listener, and the
// poller's ticker stopped when the record is final, so that no timer is
// left.
func TestEventsActivityMock(t *testing.T) {
	t.Parallel()
	t.Run("waiting-for-input", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		fifo := filepath.Join(t.TempDir(), "fifo")
		if err := unix.Mkfifo(fifo, 0o600); err != nil {
			t.Fatalf("mkfifo: %v", err)
		}
		// The shell waits for the test (opening the FIFO, no input wanted)
		// or for input on its stdin, by turns.
		a := startActivityWatch(ctx, t, proc.StartRequest{
			Command: `read x < "$FIFO"; echo one; read y; echo two; read z < "$FIFO"; echo three; read w`,
			Env:     map[string]string{"FIFO": fifo},
			Stdin:   true,
		})
		waiting := func(what string) {
			t.Helper()
			waitActivity(ctx, t, a.p, what, func(act proc.Activity) bool { return act.WaitingForInput })
		}
		feedFifo(t, fifo)
		waitLine(ctx, t, a.p, regexp.MustCompile("^one$"))
		waiting("the first read of stdin")
		if evs := eventsOf(allEvents(t, a.m), a.p.ID()); len(evs) != 1 {
			t.Fatalf("events before the poller looked again: %v; want started only", evs)
		}
		a.look(ctx, t)
		if evs := a.kinds(ctx, t, 1); evs[0].Kind != proc.EventWaitingForInput {
			t.Fatalf("events after a look at a waiting tree: %v; want waiting_for_input", evs)
		}
		a.look(ctx, t) // still waiting: nothing new
		if _, err := a.p.Write([]byte("y\n")); err != nil {
			t.Fatal(err)
		}
		waitLine(ctx, t, a.p, regexp.MustCompile("^two$"))
		a.look(ctx, t) // blocked opening the FIFO: not waiting
		feedFifo(t, fifo)
		waitLine(ctx, t, a.p, regexp.MustCompile("^three$"))
		waiting("the second read of stdin")
		a.look(ctx, t)
		stopped := a.mClock.Trap().TickerStop("events", "activity")
		defer stopped.Close()
		if _, err := a.p.Write([]byte("w\n")); err != nil {
			t.Fatal(err)
		}
		stopped.MustWait(ctx).MustRelease(ctx) // the record is final
		waitFinal(ctx, t, a.p)
		var kinds []string
		for _, ev := range a.kinds(ctx, t, 3) {
			kinds = append(kinds, string(ev.Kind))
		}
		if got := strings.Join(kinds, " "); got != "waiting_for_input waiting_for_input final" {
			t.Errorf("events of %s: %s; want waiting_for_input twice, then final", a.p.ID(), got)
		}
		if err := proctest.CloseOnMock(ctx, a.mClock, a.m); err != nil {
			t.Fatal(err)
		}
		if d, ok := a.mClock.Peek(); ok {
			t.Errorf("a timer or ticker is left after Close, due in %v", d)
		}
	})

	t.Run("listening", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		a := startActivityWatch(ctx, t, helperReq("activity-listen", "tcp", "127.0.0.1:0"))
		line := waitLine(ctx, t, a.p, regexp.MustCompile("^listening "))
		addr := strings.Fields(line)[2]
		a.look(ctx, t)
		a.look(ctx, t) // the same listener: nothing new
		evs := a.kinds(ctx, t, 1)
		if len(evs) != 1 || evs[0].Kind != proc.EventListening || evs[0].Listener == nil {
			t.Fatalf("events of %s: %v; want one listening event", a.p.ID(), evs)
		}
		l := evs[0].Listener
		if l.Network != "tcp" || l.Address != addr || strconv.Itoa(l.Port) != addr[strings.LastIndexByte(addr, ':')+1:] {
			t.Errorf("listening on %+v; want tcp %s", *l, addr)
		}
		if err := a.p.Signal(proc.Kill); err != nil {
			t.Fatal(err)
		}
		waitFinal(ctx, t, a.p)
	})
}

// TestEventsNoLeaks: records with watches and WatchActivity, a waiter and
// Close leave no goroutine and no descriptor behind. It runs isolated, so
// that the counts are its own.
func TestEventsNoLeaks(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 120*time.Second)
	if !isolated(ctx, t) {
		return
	}
	run := func() {
		m := proc.NewManager(proc.Options{})
		req := cvReq("out:ready\\n", "wait")
		req.Stdin = true
		req.WatchActivity = true
		req.Watch = []proc.Watch{{Name: "ready", Pattern: "^ready$"}}
		p := mustStart(t, m, req)
		waitLine(ctx, t, p, regexp.MustCompile("^ready$"))
		errc := make(chan error, 1)
		go func() { errc <- m.WaitEvent(ctx, 1<<40) }()
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if err := recv(ctx, t, errc, "WaitEvent"); err == nil {
			t.Errorf("WaitEvent past the end across Close = nil; want ErrClosed")
		}
	}
	run() // warm up: the runtime opens descriptors of its own lazily
	checkLeaks := noLeaks(t)
	for range 5 {
		run()
	}
	checkLeaks("after 5 Managers with watches closed")
}
