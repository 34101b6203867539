package linematch

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/quartz"
)

// besideHarness runs a Beside whose matcher's match function blocks
// while the test holds gate, and records matches and skips in order.
type besideHarness struct {
	b    *Beside
	gate sync.Mutex
	// entered has a value each time a match begins, if none is waiting.
	entered chan struct{}
	// mu guards the fields below.
	mu      sync.Mutex
	got     []string
	skipped int64
}

func newBesideHarness(t *testing.T, specs []testSpec, budget Budget) *besideHarness {
	t.Helper()
	h := &besideHarness{entered: make(chan struct{}, 1)}
	m := NewMatcher(compileSpecs(t, specs), 2048, func(line []byte, hits []int) {
		select {
		case h.entered <- struct{}{}:
		default:
		}
		h.gate.Lock()
		defer h.gate.Unlock()
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, i := range hits {
			h.got = append(h.got, fmt.Sprintf("%d=%s", i, line))
		}
	})
	h.b = NewBeside(m, func(lines int64) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.got = append(h.got, fmt.Sprintf("skipped %d", lines))
		h.skipped += lines
	}, budget)
	t.Cleanup(func() { h.b.Close(nil) })
	return h
}

// TestBesideKeepsPace: lines given to a Beside that keeps up are all
// matched, in order, once Close returns; Close ends its goroutine (the
// package's goleak check), and lines given after Close are not taken.
func TestBesideKeepsPace(t *testing.T) {
	t.Parallel()
	h := newBesideHarness(t, []testSpec{{pattern: `^\d+$`}, {pattern: `^$`, once: true}}, Budget{})
	var want []string
	s := NewSplitter(2048)
	for i := range 100 {
		s.Split(fmt.Appendf(nil, "%d\nx%d\n\n", i, i), h.b)
		want = append(want, fmt.Sprintf("0=%d", i))
		if i == 0 {
			want = append(want, "1=")
		}
	}
	s.Split([]byte("123"), h.b)
	s.End(h.b)
	want = append(want, "0=123")
	h.b.Close(nil)
	h.b.Lines([]byte("456\n"))
	h.b.Close(nil)
	if fmt.Sprint(h.got) != fmt.Sprint(want) {
		t.Errorf("matches %q; want %q", h.got, want)
	}
}

// TestBesideSkips: while its matcher is held, a Beside given more than a
// backlog of lines drops the lines it holds and takes the newest; its
// goroutine then says how many it skipped before matching the next, and
// every line is either matched or counted skipped. The feeder never
// waits: the lines are given while the matcher is held.
func TestBesideSkips(t *testing.T) {
	t.Parallel()
	h := newBesideHarness(t, []testSpec{{pattern: `^\d+$`}}, Budget{})
	h.gate.Lock()
	s := NewSplitter(2048)
	var lines int64
	var chunk []byte
	for i := 0; len(chunk) < 64<<10; i++ {
		chunk = fmt.Appendf(chunk, "%d\n", i)
	}
	n := int64(bytes.Count(chunk, []byte{'\n'}))
	for range 3 * Backlog / len(chunk) {
		s.Split(chunk, h.b)
		lines += n
	}
	h.gate.Unlock()
	h.b.Close(nil)
	matched := int64(0)
	var skips []string
	for _, g := range h.got {
		if strings.HasPrefix(g, "skipped") {
			skips = append(skips, g)
		} else {
			matched++
		}
	}
	if h.skipped == 0 || len(skips) == 0 {
		t.Fatalf("%d lines given while the matcher was held: none skipped; want some", lines)
	}
	if matched+h.skipped != lines {
		t.Errorf("matched %d + skipped %d = %d lines; want the %d given", matched, h.skipped, matched+h.skipped, lines)
	}
	if matched > int64(Backlog/2)+n {
		t.Errorf("matched %d lines of 2 bytes and more; want at most a backlog's and one chunk's", matched)
	}
	if last := h.got[len(h.got)-1]; last != fmt.Sprintf("0=%d", n-1) {
		t.Errorf("last match %q; want the newest line, 0=%d", last, n-1)
	}
}

// TestBesideDone: once every pattern of its matcher is done, a Beside
// takes no more lines.
func TestBesideDone(t *testing.T) {
	t.Parallel()
	h := newBesideHarness(t, []testSpec{{pattern: `^\d+$`, once: true}}, Budget{})
	h.b.Lines([]byte("1\n2\n"))
	h.b.Close(nil)
	if h.b.Live() != 0 {
		t.Fatalf("Live() = %d after its one Once pattern matched; want 0", h.b.Live())
	}
	h.b.mu.Lock()
	h.b.closed = false // open again, to see that Live stops the feed
	h.b.mu.Unlock()
	h.b.Lines([]byte("3\n"))
	h.b.mu.Lock()
	queued := len(h.b.queue)
	h.b.mu.Unlock()
	h.b.Close(nil)
	if queued != 0 || fmt.Sprint(h.got) != "[0=1]" {
		t.Errorf("queued %d, matches %q; want none queued, [0=1]", queued, h.got)
	}
}

// TestBesideGivesUp: when Close gives up before the backlog is matched,
// the lines still queued are dropped and reported skipped before Close
// returns; every line is matched or counted.
func TestBesideGivesUp(t *testing.T) {
	t.Parallel()
	h := newBesideHarness(t, []testSpec{{pattern: `^\d+$`}}, Budget{})
	h.gate.Lock()
	for i := range 10 {
		h.b.Lines(fmt.Appendf(nil, "%d\n%d\n", 2*i, 2*i+1))
	}
	<-h.entered // the goroutine holds the first entry, in its first match
	fired := make(chan time.Time, 1)
	fired <- time.Time{}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		h.b.Close(fired)
	}()
	h.closeWhen(t, closed, "Close did not give up", h.b.GaveUp)
	h.mu.Lock()
	defer h.mu.Unlock()
	if want := "[0=0 0=1 skipped 18]"; fmt.Sprint(h.got) != want {
		t.Errorf("after Close gave up: %q; want %s (the entry being matched, then the rest skipped)", h.got, want)
	}
}

// TestBesideCloseSkipsToNewest: a Beside that could not keep pace (it
// dropped lines before) skips at Close to the newest entry of its
// backlog: the end of the stream is matched, what lay between is counted.
func TestBesideCloseSkipsToNewest(t *testing.T) {
	t.Parallel()
	h := newBesideHarness(t, []testSpec{{pattern: `^\d+$`}}, Budget{})
	h.gate.Lock()
	h.b.Lines([]byte("0\n"))
	<-h.entered // the goroutine holds the first entry, in its first match
	h.b.Lines(bytes.Repeat([]byte("1\n"), Backlog/2))
	h.b.Lines([]byte("1\n")) // over the backlog: the 1s before are dropped
	h.gate.Unlock()
	// It catches up (the newest 1), and ends.
	until(t, "the goroutine did not catch up", func() bool { return !h.b.Running() })
	select {
	case <-h.entered: // the catching up's
	default:
	}
	h.gate.Lock()
	h.b.Lines([]byte("4\n"))
	<-h.entered
	for _, l := range []string{"5\n", "6\n", "7\n8\n"} {
		h.b.Lines([]byte(l))
	}
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		h.b.Close(nil)
	}()
	h.closeWhen(t, closed, "Close did not skip to the newest entry", func() bool {
		h.b.mu.Lock()
		defer h.b.mu.Unlock()
		return len(h.b.queue) == 1
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if got, want := fmt.Sprint(h.got), fmt.Sprintf("[0=0 skipped %d 0=1 0=4 skipped 2 0=7 0=8]", Backlog/2); got != want {
		t.Errorf("matches %s; want %s: the newest line after the overflow, then at Close the newest entry", got, want)
	}
}

// TestBesideBehindKeepsNewestLine: once a Beside dropped its backlog, each
// chunk given keeps only its newest line (the others are counted, not
// copied) until the goroutine finds the backlog empty; then chunks are
// taken whole again.
func TestBesideBehindKeepsNewestLine(t *testing.T) {
	t.Parallel()
	h := newBesideHarness(t, []testSpec{{pattern: `^\d+$`}}, Budget{})
	h.gate.Lock()
	h.b.Lines([]byte("0\n"))
	<-h.entered
	queued := func() (entries, bytes int) {
		h.b.mu.Lock()
		defer h.b.mu.Unlock()
		return len(h.b.queue), h.b.queued
	}
	h.b.Lines(bytes.Repeat([]byte("1\n"), Backlog/2))
	if n, q := queued(); n != 1 || q != Backlog {
		t.Errorf("a backlog given: %d entries, %d bytes; want it all, 1 entry of %d", n, q, Backlog)
	}
	h.b.Lines([]byte("2\n3\n"))
	h.b.Lines([]byte("4\n5\n"))
	if n, q := queued(); n != 1 || q != 2 {
		t.Errorf("chunks given after an overflow: %d entries, %d bytes; want the newest line alone, 1 entry of 2", n, q)
	}
	h.gate.Unlock()
	until(t, "the goroutine did not catch up", func() bool { return !h.b.Running() })
	h.b.Lines([]byte("6\n7\n")) // caught up: taken whole, both matched
	h.b.Close(nil)
	h.mu.Lock()
	defer h.mu.Unlock()
	if got, want := fmt.Sprint(h.got), fmt.Sprintf("[0=0 skipped %d 0=5 0=6 0=7]", Backlog/2+3); got != want {
		t.Errorf("matches %s; want %s", got, want)
	}
}

// newBudgetHarness is a besideHarness of `^\d+$` whose Budget (25 ms of
// each 100 ms) runs on clock, with the Budget's Now and NewTimer calls
// trapped (now, timer; closed when t ends, before the Beside is), and a
// context of 30 s.
func newBudgetHarness(t *testing.T) (ctx context.Context, clock *quartz.Mock, now, timer *quartz.Trap, h *besideHarness) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	clock = quartz.NewMock(t)
	now = clock.Trap().Now("linematch", "budget")
	timer = clock.Trap().NewTimer("linematch", "budget")
	h = newBesideHarness(t, []testSpec{{pattern: `^\d+$`}}, Budget{Clock: clock, Busy: 25 * time.Millisecond, Window: 100 * time.Millisecond})
	t.Cleanup(func() {
		now.Close()
		timer.Close()
	})
	return ctx, clock, now, timer, h
}

// matchFor lets the goroutine's next slice of matching (between two of
// its Budget's Now calls, trapped by now) take d on clock.
func matchFor(ctx context.Context, clock *quartz.Mock, now *quartz.Trap, d time.Duration) {
	now.MustWait(ctx).MustRelease(ctx) // began
	call := now.MustWait(ctx)          // ended
	clock.Advance(d).MustWait(ctx)
	call.MustRelease(ctx)
}

// wantSleep checks that the goroutine's next sleep on its Budget (the
// timer trapped by timer) lasts want, after what it did, and lets it
// sleep.
func wantSleep(ctx context.Context, t *testing.T, timer *quartz.Trap, want time.Duration, after string) {
	t.Helper()
	sleep := timer.MustWait(ctx)
	if sleep.Duration != want {
		t.Errorf("the goroutine sleeps %v after %s; want %v", sleep.Duration, after, want)
	}
	sleep.MustRelease(ctx)
}

// until polls cond until it holds, for at most 30 s.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		runtime.Gosched()
	}
}

// closeWhen lets the held goroutine go once Close got as far as done
// says (failing t with what if it does not within 30 s), and waits until
// Close returned (closed).
func (h *besideHarness) closeWhen(t *testing.T, closed <-chan struct{}, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			h.gate.Unlock()
			t.Fatal(what)
		}
		runtime.Gosched()
	}
	h.gate.Unlock()
	<-closed
}

// TestBesideBudget: a Beside that matched for its Budget's Busy time
// within a Window sleeps on the Budget's clock until its share is Busy of
// Window again (longer after a slice that ran over), meanwhile lines
// given beyond a backlog are skipped, and it matches again once the
// clock moves; Close wakes a sleeping goroutine, which then matches the
// rest without a Budget.
func TestBesideBudget(t *testing.T) {
	t.Parallel()
	ctx, clock, now, timer, h := newBudgetHarness(t)

	// A slice that takes 10 ms: within Busy, no sleep.
	h.b.Lines([]byte("1\n"))
	matchFor(ctx, clock, now, 10*time.Millisecond)
	// A slice that takes 40 ms: 50 ms spent by 50 ms into the Window,
	// twice Busy: it sleeps until 200 ms, 150 ms more.
	h.b.Lines([]byte("2\n"))
	matchFor(ctx, clock, now, 40*time.Millisecond)
	wantSleep(ctx, t, timer, 150*time.Millisecond, "matching 50 ms of a 100 ms Window with a 25 ms Busy")

	// Lines given while it sleeps: more than a backlog, so some skip.
	chunk := bytes.Repeat([]byte("3\n"), 32<<10)
	lines := int64(0)
	for range 2 * Backlog / len(chunk) {
		h.b.Lines(chunk)
		lines += int64(len(chunk) / 2)
	}
	h.mu.Lock()
	if fmt.Sprint(h.got) != "[0=1 0=2]" {
		t.Errorf("matched %q while asleep; want only the lines before, [0=1 0=2]", h.got)
	}
	h.mu.Unlock()

	// The clock moves: it wakes, says what it skipped and matches on,
	// spending nothing more while the mock clock stands still, until
	// Close.
	clock.Advance(150 * time.Millisecond).MustWait(ctx)
	now.MustWait(ctx).MustRelease(ctx) // the Window begins anew
	now.Close()
	timer.Close()
	h.b.Close(nil)
	h.mu.Lock()
	defer h.mu.Unlock()
	matched := int64(0) // lines of 3s
	for _, g := range h.got {
		if g == "0=3" {
			matched++
		}
	}
	if len(h.got) < 3 || !strings.HasPrefix(h.got[2], "skipped ") || h.skipped == 0 || matched+h.skipped != lines {
		t.Errorf("after the sleep: %d events, first %q, %d matched, %d skipped; want 0=1, 0=2, a skipped event, and every one of %d lines matched or skipped", len(h.got), h.got[:min(3, len(h.got))], matched, h.skipped, lines)
	}
}

// TestBesideCloseWakesBudget: Close wakes a goroutine sleeping out its
// Budget's Window without the clock moving, and the lines queued are then
// matched, none skipped.
func TestBesideCloseWakesBudget(t *testing.T) {
	t.Parallel()
	ctx, clock, now, timer, h := newBudgetHarness(t)
	h.b.Lines([]byte("1\n"))
	matchFor(ctx, clock, now, 30*time.Millisecond)
	wantSleep(ctx, t, timer, 90*time.Millisecond, "matching 30 ms with a 25 ms Busy in 100 ms")
	h.b.Lines([]byte("2\n3\n"))
	now.Close()
	timer.Close()
	h.b.Close(nil) // returns only once the goroutine has ended
	h.mu.Lock()
	defer h.mu.Unlock()
	if fmt.Sprint(h.got) != "[0=1 0=2 0=3]" {
		t.Errorf("after Close: %q; want [0=1 0=2 0=3]: the queue matched, nothing skipped", h.got)
	}
}

// TestBesideCutsEntryInHand: lines dropped while the goroutine matches an
// entry end that entry too, after the slice in hand (its lines are older
// than those dropped): the rest of it is counted skipped, and the newest
// line is matched next.
func TestBesideCutsEntryInHand(t *testing.T) {
	t.Parallel()
	h := newBesideHarness(t, []testSpec{{pattern: `^\d+$`}}, Budget{})
	h.gate.Lock()
	h.b.Lines(bytes.Repeat([]byte("1\n"), 4*sliceSize/2)) // four slices
	<-h.entered                                           // in the first line of the first slice
	h.b.Lines(bytes.Repeat([]byte("2\n"), Backlog/2))
	h.b.Lines([]byte("3\n")) // over the backlog: the 2s dropped
	h.gate.Unlock()
	h.b.Close(nil)
	h.mu.Lock()
	defer h.mu.Unlock()
	ones := 0
	for _, g := range h.got {
		if g == "0=1" {
			ones++
		}
	}
	tail := h.got[max(0, len(h.got)-2):]
	slice := sliceSize/2 + 1 // a slice ends with the line sliceSize bytes in
	if want := fmt.Sprintf("[skipped %d 0=3]", 4*sliceSize/2-slice+Backlog/2); ones != slice || fmt.Sprint(tail) != want {
		t.Errorf("matched %d of the first entry's lines, then %q; want one slice's, %d, then %s", ones, tail, slice, want)
	}
}
