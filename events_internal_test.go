package proc

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/procvisor/proc/internal/linematch/linematchtest"

	"github.com/procvisor/proc/internal/testkit"
)

// Tests of the watches' glue (watch.go) without a process: the two
// groups a request's watches are split into, and the skipped event. How
// lines are found and matched is pinned in internal/linematch.

// scanHarness runs an eventWatch as the pump does, without a process:
// feed hands it chunks, end flushes it as finalStep does, and matches
// reads the matched and skipped events from the Manager.
type scanHarness struct {
	m     *Manager
	w     *eventWatch
	clock *quartz.Mock
}

func newScanHarness(t *testing.T, watches []Watch, maxLine int) *scanHarness {
	t.Helper()
	clock := quartz.NewMock(t)
	m := NewManager(Options{Clock: clock, EventHistory: 1 << 20})
	t.Cleanup(func() { _ = m.Close() })
	w, err := newEventWatch(StartRequest{Watch: watches}, maxLine)
	if err != nil {
		t.Fatalf("newEventWatch(%+v) = %v", watches, err)
	}
	p := &Process{m: m, info: &Info{ID: "scan"}, done: make(chan struct{}), drainTimeout: time.Minute}
	w.of(p)
	w.pump = &pump{}
	w.pump.ended.Store(true)
	t.Cleanup(w.flush) // the Beside's goroutine ends
	return &scanHarness{m: m, w: w, clock: clock}
}

func (h *scanHarness) matches() []string {
	evs, _, _ := h.m.Events(0, 0)
	var got []string
	for _, ev := range evs {
		switch ev.Kind {
		case EventMatched:
			got = append(got, ev.Watch+"="+ev.Line)
		case EventSkipped:
			got = append(got, fmt.Sprintf("%s skipped %d", ev.Watch, ev.Skipped))
		}
	}
	return got
}

// wantMatches is the rule of design section 19
// (linematchtest.WantMatches), a match named by its watch.
func wantMatches(text string, watches []Watch, maxLine int) []string {
	rule := make([]linematchtest.Spec, len(watches))
	for i, wa := range watches {
		rule[i] = linematchtest.Spec{Name: wa.Name, Pattern: wa.Pattern, Once: wa.Once}
	}
	return linematchtest.WantMatches(text, rule, maxLine)
}

// ofWatches keeps the matches of the watches named in names.
func ofWatches(matches []string, names ...string) []string {
	var of []string
	for _, m := range matches {
		name, _, _ := strings.Cut(m, "=")
		if name, _, _ = strings.Cut(name, " "); strings.Contains(" "+strings.Join(names, " ")+" ", " "+name+" ") {
			of = append(of, m)
		}
	}
	return of
}

// TestWatchGroups: a request's watches with a literal and a short
// pattern are matched on the pump's path, the others beside it; each group finds what matching each
// whole line finds, in the request's order within the group, whatever the
// chunks, with every match in before flush returns.
func TestWatchGroups(t *testing.T) {
	t.Parallel()
	const maxLine = 16
	watches := []Watch{
		{Name: "ready", Pattern: `^ready$`},
		{Name: "digits", Pattern: `^\d+$`},
		{Name: "err", Pattern: `error`},
		{Name: "empty", Pattern: `^$`, Once: true},
		{Name: "port", Pattern: `\bport \d+$`},
		{Name: "short", Pattern: `^\pL{1,5}$`},
		{Name: "long", Pattern: `(r)eady` + strings.Repeat(`\d?`, 300)}, // a literal, but long
	}
	near, beside := []string{"ready", "err", "port"}, []string{"digits", "empty", "short", "long"}
	text := strings.Repeat("ready\n12\nan error here\n\nport 80\r\n0123456789abcdefghij error\nok\n", 20) + "42"
	want := wantMatches(text, watches, maxLine)
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 40 {
		h := newScanHarness(t, watches, maxLine)
		if len(h.w.nearIdx) != len(near) || len(h.w.besideIdx) != len(beside) {
			t.Fatalf("groups %v and %v; want %d with a literal, %d without", h.w.nearIdx, h.w.besideIdx, len(near), len(beside))
		}
		for prev := 0; prev < len(text); {
			c := min(len(text), prev+1+rng.IntN(40))
			h.w.scan([]byte(text[prev:c]))
			prev = c
		}
		h.w.flush()
		got := h.matches()
		if len(got) != len(want) {
			t.Fatalf("round %d: %d matches; want %d (%q)", round, len(got), len(want), got)
		}
		for _, group := range [][]string{near, beside} {
			if g, w := ofWatches(got, group...), ofWatches(want, group...); fmt.Sprint(g) != fmt.Sprint(w) {
				t.Fatalf("round %d: watches %v: matches %q; want %q", round, group, g, w)
			}
		}
	}
}

// TestWatchSkipped: while the watches without a literal cannot match
// (their goroutine held at its first match's clock reading), the pump
// goes on handing lines over without waiting; those watches fall a
// backlog behind and report skipped events, one for each that is not
// done, with the lines they did not match; those with a literal miss
// nothing.
func TestWatchSkipped(t *testing.T) {
	t.Parallel()
	ctx := testkit.Ctx(t, 30*time.Second)
	watches := []Watch{
		{Name: "digits", Pattern: `^\d+$`},
		{Name: "lit", Pattern: `^0+7\d*7$`},
		{Name: "once", Pattern: `^\d+$`, Once: true},
	}
	h := newScanHarness(t, watches, DefaultMaxLineLength)
	trap := h.clock.Trap().Now("beside")
	var chunk []byte
	for i := 0; len(chunk) < 64<<10; i++ {
		chunk = fmt.Appendf(chunk, "%0255d\n", i) // few lines: few events
	}
	lines := 0
	for range 32 {
		h.w.scan(chunk)
		lines += strings.Count(string(chunk), "\n")
	}
	trap.MustWait(ctx).MustRelease(ctx)
	trap.Close()
	h.w.flush()
	got := h.matches()
	digits, skipped, lit := 0, int64(0), 0
	for _, g := range got {
		var n int64
		switch {
		case strings.HasPrefix(g, "digits="):
			digits++
		case strings.HasPrefix(g, "lit="):
			lit++
		case strings.HasPrefix(g, "once skipped"):
			t.Errorf("%q: a skipped event for a Once watch that was done", g)
		case strings.HasPrefix(g, "digits skipped"):
			if _, err := fmt.Sscanf(g, "digits skipped %d", &n); err != nil || n <= 0 {
				t.Errorf("skipped event %q; want a positive count", g)
			}
			skipped += n
		}
	}
	if skipped == 0 || int64(digits)+skipped != int64(lines) {
		t.Errorf("digits: %d matched + %d skipped; want %d lines, some skipped", digits, skipped, lines)
	}
	if want := len(ofWatches(wantMatches(strings.Repeat(string(chunk), 32), watches, DefaultMaxLineLength), "lit")); lit != want || want == 0 {
		t.Errorf("lit: %d matched; want %d, none missed", lit, want)
	}
}

// TestWatchFlushGivesUp: at the end of the output, flush waits for the
// watches matched beside for the record's DrainTimeout on the clock, and
// then skips the lines they have not matched: the skipped event is in
// when flush returns (before the final event).
func TestWatchFlushGivesUp(t *testing.T) {
	t.Parallel()
	ctx := testkit.Ctx(t, 30*time.Second)
	h := newScanHarness(t, []Watch{{Name: "digits", Pattern: `^\d+$`}}, DefaultMaxLineLength)
	held := h.clock.Trap().Now("beside")
	defer held.Close()
	timer := h.clock.Trap().NewTimer("events", "beside")
	defer timer.Close()
	for i := range 10 {
		h.w.scan(fmt.Appendf(nil, "%d\n", i))
	}
	first := held.MustWait(ctx) // the goroutine is in its first match
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		h.w.flush()
	}()
	call := timer.MustWait(ctx)
	if call.Duration != time.Minute {
		t.Errorf("flush waits %v; want the record's DrainTimeout, %v", call.Duration, time.Minute)
	}
	call.MustRelease(ctx)
	h.clock.Advance(time.Minute).MustWait(ctx)
	for !h.w.beside.GaveUp() {
		if ctx.Err() != nil {
			t.Fatal("flush did not give up after the DrainTimeout passed")
		}
		runtime.Gosched()
	}
	first.MustRelease(ctx)
	select {
	case <-flushed:
	case <-ctx.Done():
		t.Fatal("flush did not return after the DrainTimeout passed")
	}
	if got := fmt.Sprint(h.matches()); got != "[digits=0 digits skipped 9]" {
		t.Errorf("events %s; want [digits=0 digits skipped 9]", got)
	}
}
