package proc_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/procvisor/proc"
)

// Tests of the event stream (design section 19): lifecycle events and Seq,
// the bounded history, line watches through a real pump, scopes, and
// WaitEvent. The line rules across chunk cuts are pinned in
// events_internal_test.go; activity events on Linux in
// events_linux_test.go.

// evString is an event without its time and Info, for comparisons.
func evString(ev proc.Event) string {
	s := fmt.Sprintf("%d %s %s", ev.Seq, ev.ID, ev.Kind)
	if ev.Watch != "" {
		s += fmt.Sprintf(" %s=%q", ev.Watch, ev.Line)
	}
	return s
}

// eventsOf returns the events of record id among evs.
func eventsOf(evs []proc.Event, id string) []proc.Event {
	var of []proc.Event
	for _, ev := range evs {
		if ev.ID == id {
			of = append(of, ev)
		}
	}
	return of
}

// allEvents reads every event of m after 0, failing on a loss.
func allEvents(t testing.TB, m interface {
	Events(int64, int) ([]proc.Event, int64, int64)
}) []proc.Event {
	t.Helper()
	evs, _, lost := m.Events(0, 0)
	if lost != 0 {
		t.Fatalf("Events(0, 0) lost %d events; want none", lost)
	}
	return evs
}

// TestEventsLifecycle: a record emits started (its Info then, with the
// PID) and final (its final Info), Seq 1 and 2; Remove appends removed
// with the final Info, and so does retention dropping a record (as the
// next record is counted final, before that record's final event).
func TestEventsLifecycle(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{MaxRetained: 1})
	p := mustStart(t, m, mgrExitReq(3))
	snap := waitFinal(ctx, t, p)
	evs := allEvents(t, m)
	if len(evs) != 2 {
		t.Fatalf("events %v; want started and final", evs)
	}
	started, final := evs[0], evs[1]
	if started.Seq != 1 || started.Kind != proc.EventStarted || started.ID != p.ID() ||
		started.Info == nil || !started.Info.Running || started.Info.PID != snap.Info.PID || started.Info.PID <= 0 {
		t.Errorf("first event %s, Info %+v; want seq 1, started, running, PID %d", evString(started), started.Info, snap.Info.PID)
	}
	if !started.Time.Equal(snap.Info.StartedAt) {
		t.Errorf("started at %v; want Info.StartedAt %v", started.Time, snap.Info.StartedAt)
	}
	if final.Seq != 2 || final.Kind != proc.EventFinal || final.Info == nil || final.Info.Running ||
		final.Info.ExitCode == nil || *final.Info.ExitCode != 3 || final.Info.ExitedAt.IsZero() {
		t.Errorf("second event %s, Info %+v; want seq 2, final, exit code 3", evString(final), final.Info)
	}
	if final.Time.Before(started.Time) {
		t.Errorf("final at %v, before started at %v", final.Time, started.Time)
	}

	// Retention (MaxRetained 1) drops p when the next record is final.
	q := mustStart(t, m, mgrExitReq(0))
	waitFinal(ctx, t, q)
	evs, next, _ := m.Events(2, 0)
	var got []string
	for _, ev := range evs {
		got = append(got, evString(ev))
	}
	want := []string{
		"3 " + q.ID() + " started",
		"4 " + p.ID() + " removed",
		"5 " + q.ID() + " final",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") || next != 5 {
		t.Fatalf("Events(2, 0) = %q, next %d; want %q, next 5", got, next, want)
	}
	if info := evs[1].Info; info == nil || info.Running || *info.ExitCode != 3 {
		t.Errorf("removed event's Info %+v; want p's final Info", info)
	}

	if err := m.Remove(q.ID()); err != nil {
		t.Fatalf("Remove(%s) = %v", q.ID(), err)
	}
	evs, _, _ = m.Events(5, 0)
	if len(evs) != 1 || evString(evs[0]) != "6 "+q.ID()+" removed" || evs[0].Info == nil || evs[0].Info.Running {
		t.Fatalf("Events(5, 0) after Remove = %v; want 6 removed with the final Info", evs)
	}
}

// TestEventsConcurrentStarts: 64 starts at once give 128 events, Seq 1 to
// 128 without a gap or a loss under the default history, each record's
// started before its final.
func TestEventsConcurrentStarts(t *testing.T) {
	t.Parallel()
	const n = 64
	ctx, m := testManager(t, proc.Options{})
	procs := atOnce(ctx, t, n, func(int) *proc.Process { return mustStart(t, m, mgrExitReq(0)) })
	for _, p := range procs {
		waitFinal(ctx, t, p)
	}
	evs, next, lost := m.Events(0, 0)
	if len(evs) != 2*n || next != 2*n || lost != 0 {
		t.Fatalf("Events(0, 0) = %d events, next %d, lost %d; want %d, %d, 0", len(evs), next, lost, 2*n, 2*n)
	}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has Seq %d; want %d", i, ev.Seq, i+1)
		}
		if i > 0 && ev.Time.Before(evs[i-1].Time) {
			t.Errorf("event %d at %v, before event %d at %v", i, ev.Time, i-1, evs[i-1].Time)
		}
	}
	for _, p := range procs {
		of := eventsOf(evs, p.ID())
		if len(of) != 2 || of[0].Kind != proc.EventStarted || of[1].Kind != proc.EventFinal {
			t.Errorf("events of %s: %v; want started, then final", p.ID(), of)
		}
	}
}

// TestEventsHistory: with EventHistory 3, the oldest events are dropped
// and counted as lost, for the Manager and for a Scope (whose loss counts
// every dropped event, whoever's it was).
func TestEventsHistory(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{EventHistory: 3})
	var ids []string
	for i := range 3 {
		s := m.Scope([]string{"a", "b", "a"}[i])
		p := mustStart(t, s, mgrExitReq(0))
		waitFinal(ctx, t, p)
		ids = append(ids, p.ID())
	}
	// Events 1..6: a started/final, b started/final, a started/final.
	evs, next, lost := m.Events(0, 0)
	if lost != 3 || next != 6 || len(evs) != 3 || evs[0].Seq != 4 {
		t.Fatalf("Events(0, 0) = %v, next %d, lost %d; want seq 4..6, next 6, lost 3", evs, next, lost)
	}
	if evs, next, lost = m.Events(1, 1); lost != 2 || next != 4 || len(evs) != 1 || evs[0].Seq != 4 {
		t.Errorf("Events(1, 1) = %v, next %d, lost %d; want seq 4, next 4, lost 2", evs, next, lost)
	}
	if evs, next, lost = m.Events(4, 0); lost != 0 || next != 6 || len(evs) != 2 {
		t.Errorf("Events(4, 0) = %v, next %d, lost %d; want seq 5..6, next 6, lost 0", evs, next, lost)
	}
	if evs, next, lost = m.Events(6, 0); lost != 0 || next != 6 || len(evs) != 0 {
		t.Errorf("Events(6, 0) = %v, next %d, lost %d; want none, next 6, lost 0", evs, next, lost)
	}
	// Scope a: 5 and 6 are a's (ids[2]), 4 is b's.
	evs, next, lost = m.Scope("a").Events(0, 0)
	if lost != 3 || next != 6 || len(evs) != 2 || evs[0].Seq != 5 || evs[0].ID != ids[2] {
		t.Errorf("Scope(a).Events(0, 0) = %v, next %d, lost %d; want seq 5..6 of %s, next 6, lost 3", evs, next, lost, ids[2])
	}
	evs, next, lost = m.Scope("b").Events(0, 0)
	if lost != 3 || next != 6 || len(evs) != 1 || evs[0].Seq != 4 {
		t.Errorf("Scope(b).Events(0, 0) = %v, next %d, lost %d; want seq 4, next 6, lost 3", evs, next, lost)
	}
	// A Scope waiter whose events after the cursor were lost returns.
	if err := m.Scope("b").WaitEvent(ctx, 1); err != nil {
		t.Errorf("Scope(b).WaitEvent(1) = %v; want nil (events lost)", err)
	}
}

// TestEventsFromNow: a negative cursor means "now" (no events, the
// newest Seq as next, 0 lost), a cursor beyond the newest Seq returns
// nothing with itself as next, and lost is never negative, at the ends of
// int64 too; the same on a Scope, whose "now" is the Manager's newest
// Seq; WaitEvent with a negative cursor waits for the next event.
func TestEventsFromNow(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{EventHistory: 3})
	for _, cursor := range []int64{-1, math.MinInt64} {
		if evs, next, lost := m.Events(cursor, 0); evs != nil || next != 0 || lost != 0 {
			t.Errorf("Events(%d, 0) with no event yet = %v, next %d, lost %d; want none, 0, 0", cursor, evs, next, lost)
		}
	}
	for _, owner := range []string{"a", "b", "a"} {
		waitFinal(ctx, t, mustStart(t, m.Scope(owner), mgrExitReq(0)))
	}
	// Events 1..6 (1..3 no longer kept): a, b, a started/final.
	readers := []struct {
		name   string
		events func(int64, int) ([]proc.Event, int64, int64)
	}{{"Manager", m.Events}, {"Scope(a)", m.Scope("a").Events}, {"Scope(c)", m.Scope("c").Events}}
	for _, r := range readers {
		for _, tc := range []struct {
			cursor   int64
			max      int
			wantNext int64
		}{
			{-1, 0, 6}, {-1, 1, 6}, {-2, 0, 6}, {math.MinInt64, 0, 6}, {math.MinInt64 + 1, 0, 6},
			{6, 0, 6}, {7, 0, 7}, {1 << 40, 0, 1 << 40},
			{math.MaxInt64 - 1, 0, math.MaxInt64 - 1}, {math.MaxInt64, 0, math.MaxInt64}, {math.MaxInt64, 1, math.MaxInt64},
		} {
			if evs, next, lost := r.events(tc.cursor, tc.max); evs != nil || next != tc.wantNext || lost != 0 {
				t.Errorf("%s.Events(%d, %d) = %v, next %d, lost %d; want none, next %d, lost 0",
					r.name, tc.cursor, tc.max, evs, next, lost, tc.wantNext)
			}
		}
		for cursor := int64(0); cursor <= 6; cursor++ {
			if _, next, lost := r.events(cursor, 0); lost < 0 || lost != max(0, 3-cursor) || next != 6 {
				t.Errorf("%s.Events(%d, 0): next %d, lost %d; want next 6, lost %d", r.name, cursor, next, lost, max(0, 3-cursor))
			}
		}
	}

	// WaitEvent: "now" and beyond wait (an ended ctx says so at once).
	over, cancel := context.WithCancel(ctx)
	cancel()
	for _, cursor := range []int64{-1, math.MinInt64, 6, math.MaxInt64} {
		if err := m.WaitEvent(over, cursor); !errors.Is(err, context.Canceled) {
			t.Errorf("WaitEvent(ended ctx, %d) = %v; want context.Canceled (no event after now)", cursor, err)
		}
		if err := m.Scope("a").WaitEvent(over, cursor); !errors.Is(err, context.Canceled) {
			t.Errorf("Scope(a).WaitEvent(ended ctx, %d) = %v; want context.Canceled", cursor, err)
		}
	}
	if err := m.WaitEvent(over, 0); err != nil {
		t.Errorf("WaitEvent(ended ctx, 0) = %v; want nil (events after 0 exist)", err)
	}
	// WaitEvent(-1) wakes at the next event; the Scope's at its owner's.
	errc := make(chan error, 2)
	mctx, actx := newCVBlockedCtx(ctx), newCVBlockedCtx(ctx)
	// Each ends with the next event of a.
	go func() { errc <- m.WaitEvent(mctx, -1) }()
	go func() { errc <- m.Scope("a").WaitEvent(actx, -1) }()
	for _, bctx := range []*cvBlockedCtx{mctx, actx} {
		select {
		case <-bctx.waiting.Done():
		case err := <-errc:
			t.Fatalf("WaitEvent(-1) = %v before any new event; want it to wait", err)
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	p := mustStart(t, m.Scope("a"), mgrExitReq(0))
	for range 2 {
		if err := recv(ctx, t, errc, "WaitEvent(-1)"); err != nil {
			t.Errorf("WaitEvent(-1) = %v; want nil at the started event of %s", err, p.ID())
		}
	}
	waitFinal(ctx, t, p)
}

// TestEventsWatch runs watches on a real pump: a line written a byte at a
// time (one read each), a "\r\n" line, several watches matching one line
// in the request's order, Once, a line longer than MaxLineLength matched
// on its first MaxLineLength bytes, stderr under SeparateStderr not
// watched, and an unterminated last line; every matched event before
// final.
func TestEventsWatch(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	req := cvReq(
		"bytes:rea", "out:dy\\r\\nan error\\n",
		"err:error on stderr\\n",
		"out:error "+strings.Repeat("x", 40)+"\\n",
		"out:an error again\\nlast error")
	req.SeparateStderr = true
	req.MaxLineLength = 32
	req.Watch = []proc.Watch{
		{Name: "ready", Pattern: `^ready$`},
		{Name: "err", Pattern: `error`},
		{Name: "an", Pattern: `^an `, Once: true},
		{Name: "e", Pattern: `e`},
	}
	p := mustStart(t, m, req)
	waitFinal(ctx, t, p)
	long := "error " + strings.Repeat("x", 26)
	want := []string{
		"started",
		`matched ready="ready"`, `matched e="ready"`,
		`matched err="an error"`, `matched an="an error"`, `matched e="an error"`,
		fmt.Sprintf("matched err=%q", long), fmt.Sprintf("matched e=%q", long),
		`matched err="an error again"`, `matched e="an error again"`,
		`matched err="last error"`, `matched e="last error"`,
		"final",
	}
	var got []string
	for _, ev := range eventsOf(allEvents(t, m), p.ID()) {
		s := string(ev.Kind)
		if ev.Kind == proc.EventMatched {
			s += fmt.Sprintf(" %s=%q", ev.Watch, ev.Line)
		}
		got = append(got, s)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events of %s:\n%s\nwant:\n%s\n(output %q)", p.ID(), strings.Join(got, "\n"), strings.Join(want, "\n"), p.Output().Text)
	}
}

// TestEventsWatchInvalid: an empty or repeated name, a bad pattern and
// more than MaxWatches watches are ErrInvalid, and nothing starts; exactly
// MaxWatches start.
func TestEventsWatchInvalid(t *testing.T) {
	t.Parallel()
	_, m := testManager(t, proc.Options{})
	for name, watches := range map[string][]proc.Watch{
		"empty-name":  {{Pattern: "x"}},
		"duplicate":   {{Name: "a", Pattern: "x"}, {Name: "a", Pattern: "y"}},
		"bad-pattern": {{Name: "a", Pattern: "(x"}},
		"too-many":    manyWatches(proc.MaxWatches + 1),
	} {
		req := mgrExitReq(0)
		req.Watch = watches
		if p, err := m.Start(req); !errors.Is(err, proc.ErrInvalid) {
			t.Errorf("%s: Start(Watch %+v) = %v, %v; want ErrInvalid", name, watches, p, err)
		}
	}
	if evs, _, _ := m.Events(0, 0); len(evs) != 0 || len(m.List()) != 0 {
		t.Errorf("after refused starts: events %v, records %v; want none", evs, m.List())
	}
	req := mgrExitReq(0)
	req.Watch = manyWatches(proc.MaxWatches)
	if _, err := m.Start(req); err != nil {
		t.Errorf("Start with MaxWatches (%d) watches = %v; want it started", proc.MaxWatches, err)
	}
}

// manyWatches returns n watches, each its own literal.
func manyWatches(n int) []proc.Watch {
	watches := make([]proc.Watch, n)
	for i := range watches {
		watches[i] = proc.Watch{Name: fmt.Sprint("w", i), Pattern: fmt.Sprintf("token%03d", i), Once: true}
	}
	return watches
}

// TestEventsStartOrGet: StartOrGet compares Watch and WatchActivity like
// the other fields.
func TestEventsStartOrGet(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	req := mgrBlockReq()
	req.ID = "watched"
	req.Watch = []proc.Watch{{Name: "a", Pattern: "x", Once: true}}
	p, started, err := m.StartOrGet(req)
	if err != nil || !started {
		t.Fatalf("StartOrGet(%+v) = %v, %v", req, started, err)
	}
	same := withReq(req, func(r *proc.StartRequest) { r.Watch = []proc.Watch{{Name: "a", Pattern: "x", Once: true}} })
	if q, started, err := m.StartOrGet(same); err != nil || started || q != p {
		t.Errorf("StartOrGet(same watches) = %v, %v; want the record, not started", started, err)
	}
	for name, edit := range map[string]func(*proc.StartRequest){
		"no-watch":       func(r *proc.StartRequest) { r.Watch = nil },
		"other-pattern":  func(r *proc.StartRequest) { r.Watch = []proc.Watch{{Name: "a", Pattern: "y", Once: true}} },
		"not-once":       func(r *proc.StartRequest) { r.Watch = []proc.Watch{{Name: "a", Pattern: "x"}} },
		"watch-activity": func(r *proc.StartRequest) { r.WatchActivity = true },
	} {
		r := req
		r.Watch = append([]proc.Watch(nil), req.Watch...)
		edit(&r)
		if _, _, err := m.StartOrGet(r); !errors.Is(err, proc.ErrDuplicateID) {
			t.Errorf("%s: StartOrGet = %v; want ErrDuplicateID", name, err)
		}
	}
	if err := p.Signal(proc.Kill); err != nil {
		t.Fatal(err)
	}
	waitFinal(ctx, t, p)
}

// TestEventsScope: a Scope sees only its owner's events, with the
// Manager's Seq; its WaitEvent sleeps through other owners' events and
// returns ErrClosed once its Close returned, while another Scope's keeps
// waiting.
func TestEventsScope(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	a, b := m.Scope("a"), m.Scope("b")
	pa := mustStart(t, a, mgrExitReq(0))
	waitFinal(ctx, t, pa)
	pb := mustStart(t, b, mgrExitReq(0))
	waitFinal(ctx, t, pb)
	evsA, nextA, _ := a.Events(0, 0)
	evsB, nextB, _ := b.Events(0, 0)
	if len(evsA) != 2 || evsA[0].Seq != 1 || evsA[1].Seq != 2 || evsA[0].Owner != "a" || nextA != 4 {
		t.Errorf("a.Events(0, 0) = %v, next %d; want seq 1, 2 of a, next 4", evsA, nextA)
	}
	if len(evsB) != 2 || evsB[0].Seq != 3 || evsB[1].Seq != 4 || evsB[0].ID != pb.ID() || nextB != 4 {
		t.Errorf("b.Events(0, 0) = %v, next %d; want seq 3, 4 of %s, next 4", evsB, nextB, pb.ID())
	}
	if evs, next, _ := a.Events(0, 1); len(evs) != 1 || next != 1 {
		t.Errorf("a.Events(0, 1) = %v, next %d; want seq 1, next 1", evs, next)
	}

	// a's waiter sleeps through b's events, and wakes for a's.
	pb2 := mustStart(t, b, mgrExitReq(0))
	waitFinal(ctx, t, pb2)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := a.WaitEvent(short, 4); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a.WaitEvent(4) with only b's events after = %v; want the deadline", err)
	}
	// Ends with a's next event.
	errc := waitEventBlocked(ctx, a, 6)
	pa2 := mustStart(t, a, mgrExitReq(0))
	if err := recv(ctx, t, errc, "a.WaitEvent"); err != nil {
		t.Fatalf("a.WaitEvent(6) = %v; want nil once a started %s", err, pa2.ID())
	}
	waitFinal(ctx, t, pa2)

	// a's Close wakes a's waiter with ErrClosed; b's sleeps on.
	_, last, _ := m.Events(0, 0)
	// Ends when a closes.
	errc = waitEventBlocked(ctx, a, last)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := recv(ctx, t, errc, "a.WaitEvent"); !errors.Is(err, proc.ErrClosed) {
		t.Fatalf("a.WaitEvent after a.Close = %v; want ErrClosed", err)
	}
	short, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := b.WaitEvent(short, last); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("b.WaitEvent after a.Close = %v; want the deadline", err)
	}
	if err := a.WaitEvent(ctx, 0); err != nil {
		t.Errorf("a.WaitEvent(0) after a.Close = %v; want nil (a's events are there)", err)
	}
}

// TestWaitEvent: it returns at once when an event after the cursor
// exists (even with its ctx over, even after Close), honours ctx, wakes
// when an event is appended, and Close wakes it with ErrClosed once every
// record's final event is in; events stay readable after Close.
func TestWaitEvent(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	m := proc.NewManager(proc.Options{})
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = m.Close()
		}
	})
	over, cancel := context.WithCancel(ctx)
	cancel()
	if err := m.WaitEvent(over, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitEvent(ended ctx, 0) with no event = %v; want context.Canceled", err)
	}

	// Ends with the first event.
	errc := waitEventBlocked(ctx, m, 0)
	p := mustStart(t, m, mgrBlockReq())
	if err := recv(ctx, t, errc, "WaitEvent"); err != nil {
		t.Fatalf("WaitEvent(0) = %v; want nil at the started event", err)
	}
	if err := m.WaitEvent(over, 0); err != nil {
		t.Errorf("WaitEvent(ended ctx, 0) with an event = %v; want nil", err)
	}

	// Close stops the blocked record: its final event wakes the waiter
	// first, and ErrClosed comes only when Close has returned.
	// Ends with the final event.
	errc = waitEventBlocked(ctx, m, 1)
	closeErr := goClose(m)
	closed = true
	if err := recv(ctx, t, errc, "WaitEvent"); err != nil {
		t.Fatalf("WaitEvent(1) during Close = %v; want nil at the final event", err)
	}
	if evs, _, _ := m.Events(1, 0); len(evs) != 1 || evs[0].Kind != proc.EventFinal || evs[0].ID != p.ID() {
		t.Fatalf("Events(1, 0) = %v; want the final event of %s", evs, p.ID())
	}
	across := make(chan error, 1)
	bctx := newCVBlockedCtx(ctx)
	// Ends when Close has returned.
	go func() { across <- m.WaitEvent(bctx, 2) }()
	if err := recv(ctx, t, closeErr, "Close"); err != nil {
		t.Fatal(err)
	}
	if err := recv(ctx, t, across, "WaitEvent"); !errors.Is(err, proc.ErrClosed) {
		t.Fatalf("WaitEvent(2) across Close = %v; want ErrClosed", err)
	}
	if err := m.WaitEvent(ctx, 2); !errors.Is(err, proc.ErrClosed) {
		t.Errorf("WaitEvent(2) after Close = %v; want ErrClosed", err)
	}
	if err := m.WaitEvent(ctx, 1); err != nil {
		t.Errorf("WaitEvent(1) after Close = %v; want nil", err)
	}
	if evs, next, lost := m.Events(0, 0); len(evs) != 2 || next != 2 || lost != 0 {
		t.Errorf("Events(0, 0) after Close = %v, %d, %d; want started and final", evs, next, lost)
	}
	// Remove after Close still appends.
	if err := m.Remove(p.ID()); err != nil {
		t.Fatal(err)
	}
	if err := m.WaitEvent(ctx, 2); err != nil {
		t.Errorf("WaitEvent(2) after Remove = %v; want nil", err)
	}
}

// TestEventsFinalStep: the final event and the final status are one step,
// and a record's matched events all come before it. A hook in the final
// step, between the append of the final event and the close of Done,
// sees the record's events as the log holds them: started, every matched
// event (the last one from the unterminated line the output ended in,
// matched by the step itself), then final; Done still open; the log's
// lock held, so that no reader sees the one without the other. A reader
// in WaitEvent that finds a final event has read every matched event of
// that record before it and finds Info final and Done closed, and a
// caller whose Wait returned finds the final event.
func TestEventsFinalStep(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	const n = 10
	want := []string{"started", "matched", "matched", "matched", "final"}
	kinds := func(evs []proc.Event) string {
		var k []string
		for _, ev := range evs {
			k = append(k, string(ev.Kind))
		}
		return strings.Join(k, " ")
	}
	var mu sync.Mutex
	var stepErrs []string
	steps := 0
	proc.SetFinalStepHook(m, func(p *proc.Process, evs []proc.Event, doneClosed, locked bool) {
		mu.Lock()
		defer mu.Unlock()
		steps++
		of := eventsOf(evs, p.ID())
		switch {
		case kinds(of) != strings.Join(want, " "):
			stepErrs = append(stepErrs, fmt.Sprintf("%s: events in the final step %q; want %q", p.ID(), kinds(of), want))
		case evs[len(evs)-1].Kind != proc.EventFinal || evs[len(evs)-1].ID != p.ID():
			stepErrs = append(stepErrs, fmt.Sprintf("%s: last event in the final step %s; want its final", p.ID(), evString(evs[len(evs)-1])))
		case doneClosed:
			stepErrs = append(stepErrs, fmt.Sprintf("%s: Done closed before the final event was appended", p.ID()))
		case !locked:
			stepErrs = append(stepErrs, fmt.Sprintf("%s: final step without the log's lock", p.ID()))
		}
	})
	req := cvReq("out:ready 1\\nready 2\\n", "out:ready last")
	req.Watch = []proc.Watch{{Name: "r", Pattern: `^ready`}}
	procs := make(chan *proc.Process, n)
	watcher := make(chan error, 1)
	// Reads events until it saw n final ones; stops on an error or when
	// ctx ends.
	go func() {
		finals, cursor := 0, int64(0)
		matched := map[string]int{}
		byID := map[string]*proc.Process{}
		for finals < n {
			if err := m.WaitEvent(ctx, cursor); err != nil {
				watcher <- err
				return
			}
			var evs []proc.Event
			evs, cursor, _ = m.Events(cursor, 0)
			for _, ev := range evs {
				switch ev.Kind {
				case proc.EventMatched:
					matched[ev.ID]++
					continue
				case proc.EventFinal:
				default:
					continue
				}
				finals++
				if matched[ev.ID] != len(want)-2 {
					watcher <- fmt.Errorf("final event of %s read after %d matched events; want %d", ev.ID, matched[ev.ID], len(want)-2)
					return
				}
				p := byID[ev.ID]
				for p == nil {
					select {
					case q := <-procs:
						byID[q.ID()] = q
					case <-ctx.Done():
						watcher <- ctx.Err()
						return
					}
					p = byID[ev.ID]
				}
				if p.Info().Running || !isDone(p) {
					watcher <- fmt.Errorf("final event of %s read while Info().Running or Done open", ev.ID)
					return
				}
			}
		}
		watcher <- nil
	}()
	var started []*proc.Process
	for range n {
		p := mustStart(t, m, req)
		procs <- p
		started = append(started, p)
	}
	for _, p := range started {
		waitFinal(ctx, t, p)
		if of := eventsOf(allEvents(t, m), p.ID()); len(of) < 2 || of[len(of)-1].Kind != proc.EventFinal {
			t.Fatalf("events of %s right after Wait: %q; want its final last", p.ID(), kinds(of))
		}
	}
	if err := recv(ctx, t, watcher, "the event reader"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if steps != n || len(stepErrs) > 0 {
		t.Fatalf("%d final steps (want %d): %s", steps, n, strings.Join(stepErrs, "; "))
	}
}

// TestEventsWatchActivitySupport: WatchActivity starts where Activity
// works (Linux) and is ErrUnsupported elsewhere, starting nothing.
func TestEventsWatchActivitySupport(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	req := mgrExitReq(0)
	req.WatchActivity = true
	p, err := m.Start(req)
	switch {
	case watchActivityErr == nil && err != nil:
		t.Fatalf("Start(WatchActivity) = %v; want nil", err)
	case watchActivityErr != nil && !errors.Is(err, watchActivityErr):
		t.Fatalf("Start(WatchActivity) = %v, %v; want %v", p, err, watchActivityErr)
	case err == nil:
		waitFinal(ctx, t, p)
	case len(m.List()) != 0:
		t.Errorf("a refused start left records %v", m.List())
	}
}

// TestEventsWatchBeside: watches whose pattern has no literal are matched
// beside the pump, and still every line that matches is reported before
// the final event, the unterminated last one too; a short output is never
// skipped. Within each group (with a literal, without) several watches
// matching one line come in the request's order.
func TestEventsWatchBeside(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	req := cvReq("out:ready\\n12\\n\\nan error\\n7\\r\\n", "out:345")
	req.Watch = []proc.Watch{
		{Name: "digits", Pattern: `^\d+$`},
		{Name: "ready", Pattern: `^ready$`},
		{Name: "short", Pattern: `^\w{1,2}$`},
		{Name: "empty", Pattern: `^$`, Once: true},
	}
	p := mustStart(t, m, req)
	waitFinal(ctx, t, p)
	evs := eventsOf(allEvents(t, m), p.ID())
	var beside []string
	for i, ev := range evs {
		switch {
		case ev.Kind == proc.EventSkipped:
			t.Errorf("event %s: skipped %d lines of a short output", evString(ev), ev.Skipped)
		case ev.Kind == proc.EventFinal && i != len(evs)-1:
			t.Errorf("final event is %d of %d; want it last", i+1, len(evs))
		case ev.Kind == proc.EventMatched && ev.Watch != "ready":
			beside = append(beside, ev.Watch+"="+ev.Line)
		}
	}
	want := []string{"digits=12", "short=12", "empty=", "digits=7", "short=7", "digits=345"}
	if fmt.Sprint(beside) != fmt.Sprint(want) {
		t.Errorf("matches of the watches without a literal %q; want %q", beside, want)
	}
	if got := matchedLines(evs); !strings.Contains(got, "ready=ready") {
		t.Errorf("matched %q; want ready=ready among them", got)
	}
}
