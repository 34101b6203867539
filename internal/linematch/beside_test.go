package linematch

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
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

func newBesideHarness(t *testing.T, specs []testSpec) *besideHarness {
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
	})
	t.Cleanup(func() { h.b.Close(nil) })
	return h
}

// TestBesideKeepsPace: lines given to a Beside that keeps up are all
// matched, in order, once Close returns; Close ends its goroutine (the
// package's goleak check), and lines given after Close are not taken.
func TestBesideKeepsPace(t *testing.T) {
	t.Parallel()
	h := newBesideHarness(t, []testSpec{{pattern: `^\d+$`}, {pattern: `^$`, once: true}})
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
	h := newBesideHarness(t, []testSpec{{pattern: `^\d+$`}})
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
	h := newBesideHarness(t, []testSpec{{pattern: `^\d+$`, once: true}})
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
	h := newBesideHarness(t, []testSpec{{pattern: `^\d+$`}})
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
	h := newBesideHarness(t, []testSpec{{pattern: `^\d+$`}})
	h.gate.Lock()
	chunk := bytes.Repeat([]byte("1\n"), 32<<10)
	h.b.Lines([]byte("0\n"))
	<-h.entered // the goroutine holds the first entry, in its first match
	lines := int64(1)
	for range 2 * Backlog / len(chunk) {
		h.b.Lines(chunk)
		lines += int64(len(chunk) / 2)
	}
	h.b.Lines([]byte("2\n3\n"))
	lines += 2
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
	n := len(h.got)
	if n < 4 || fmt.Sprint(h.got[n-3:]) != fmt.Sprintf("[skipped %d 0=2 0=3]", lines-3) || h.got[0] != "0=0" {
		t.Errorf("matches %q...%q; want 0=0, then skipped %d, then the newest lines 2 and 3", h.got[:min(n, 3)], h.got[max(0, n-3):], lines-3)
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
