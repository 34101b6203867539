package proc

import (
	"context"
	"slices"
	"time"

	"cdr.dev/slog/v3"
	"golang.org/x/xerrors"

	"github.com/procvisor/proc/internal/linematch"
)

// Watches (design section 19): what a request asks the event stream to
// tell beyond started and final. Line watches are matched by
// internal/linematch on the lines of the Output stream: those whose
// pattern holds a literal and is short on the pump's path (its prefilter
// finds their lines at memory speed), the others beside the pump, on a goroutine fed
// through a bounded backlog, so that no watch holds the child. The
// activity watch is one poller per record that asks (pollActivity).

// MaxWatches is the most line watches one StartRequest may ask for
// (StartRequest.Watch); a request with more is refused with an error
// wrapping ErrInvalid. Each watch costs the pump of the record's output a
// look at every line that may match it, and the choice of what the pump
// searches for grows with their literals.
const MaxWatches = 64

// MaxWatchPattern is the longest Watch.Pattern, in bytes, a StartRequest
// may hold; a longer one is refused with an error wrapping ErrInvalid.
// What the pattern costs to compile and to match is bounded with it.
const MaxWatchPattern = linematch.MaxPattern

// Watch names a pattern a record's output lines are matched against
// (StartRequest.Watch). Each line of the Output stream (the combined
// output, or stdout with SeparateStderr), without its newline and a
// trailing '\r', that Pattern matches (unanchored, as regexp.Match) is
// reported as an [EventMatched] event carrying Name and the line. A line
// longer than the record's MaxLineLength is matched on its first
// MaxLineLength bytes (less a character cut in two), and the event
// carries those. An unterminated last line is matched once the output
// ends, and every matched event of a record comes before its final one.
//
// A pattern that holds a literal (a string every match contains: "error"
// in `\berror\b`) and is short (a literal alone, or a program of at most
// a few hundred instructions) is matched as the output is stored. One
// that holds none (`^\d+$`), or is long, is matched beside, on a
// goroutine of the record's, so that it never holds the child. While the
// output flows that goroutine takes at most a quarter of a CPU, so that a
// flood does not take the CPU the child and its pump need: when it falls
// 1 MiB of lines behind the output, it skips to the newest line and
// reports an [EventSkipped] event with the number of lines it did not
// match. When several watches match one line, their events come in the
// order of the request among the watches matched as the output is stored,
// and among those matched beside; the events of a watch matched beside
// may come after those of later lines.
type Watch struct {
	// Name identifies the watch in its events; it must be non-empty and
	// unique within the request.
	Name string `json:"name"`
	// Pattern is a Go regular expression (regexp/syntax), of at most
	// MaxWatchPattern bytes.
	Pattern string `json:"pattern"`
	// Once stops the watch after its first match.
	Once bool `json:"once"`
}

// eventWatch is what a record asked of the event stream beyond started and
// final: line watches (StartRequest.Watch), fed by the pump of the Output
// stream, and WatchActivity. Its methods are no-ops on a nil *eventWatch,
// a record that asked for neither. As a linematch.Sink it hands each line
// to both groups of watches.
type eventWatch struct {
	p        *Process
	asked    []Watch // as requested, for StartOrGet
	activity bool    // StartRequest.WatchActivity
	pump     *pump   // the pump that scans; set by attach
	// The line watches, in two groups, each with the index in asked of
	// its patterns: near, those with a literal (linematch.Pattern.Near),
	// matched on the pump's
	// goroutine (scan), and by flush once that pump has ended; beside,
	// those without, matched on a goroutine of the Beside's. Either is
	// nil when it has no watch.
	split      *linematch.Splitter
	near       *linematch.Matcher
	nearIdx    []int
	beside     *linematch.Beside
	besideM    *linematch.Matcher // the Beside's; used on its goroutine only
	besideIdx  []int
	hasWatches bool
	// now is the time of the near matched events of one scan (or flush):
	// the time the chunk was read, taken once at its first match (timed).
	now   time.Time
	timed bool
}

// newEventWatch validates and compiles what req asks of the event stream;
// nil when it asks nothing. maxLine is the record's MaxLineLength. It
// starts no goroutine.
func newEventWatch(req StartRequest, maxLine int) (*eventWatch, error) {
	if len(req.Watch) == 0 && !req.WatchActivity {
		return nil, nil
	}
	if req.WatchActivity && !activitySupported {
		return nil, xerrors.Errorf("start: WatchActivity: activity is Linux only: %w", ErrUnsupported)
	}
	if len(req.Watch) > MaxWatches {
		// A request that can never succeed, not a passing shortage:
		// ErrInvalid (design section 8), as the other limits a request
		// states wrongly.
		return nil, xerrors.Errorf("start: %d watches, more than MaxWatches (%d): %w", len(req.Watch), MaxWatches, ErrInvalid)
	}
	w := &eventWatch{asked: slices.Clone(req.Watch), activity: req.WatchActivity}
	names := make(map[string]bool, len(req.Watch))
	var near, beside []linematch.Spec
	for i, wa := range req.Watch {
		switch {
		case wa.Name == "":
			return nil, xerrors.Errorf("start: Watch[%d] has no name: %w", i, ErrInvalid)
		case names[wa.Name]:
			return nil, xerrors.Errorf("start: Watch name %q is used twice: %w", wa.Name, ErrInvalid)
		case len(wa.Pattern) > MaxWatchPattern:
			return nil, xerrors.Errorf("start: Watch %q: pattern of %d bytes, longer than MaxWatchPattern (%d): %w", wa.Name, len(wa.Pattern), MaxWatchPattern, ErrInvalid)
		}
		names[wa.Name] = true
		pat, err := linematch.Compile(wa.Pattern)
		if err != nil {
			return nil, xerrors.Errorf("start: Watch %q: %v: %w", wa.Name, err, ErrInvalid)
		}
		spec := linematch.Spec{Pattern: pat, Once: wa.Once}
		if pat.Near() {
			near, w.nearIdx = append(near, spec), append(w.nearIdx, i)
		} else {
			beside, w.besideIdx = append(beside, spec), append(w.besideIdx, i)
		}
	}
	if len(req.Watch) == 0 {
		return w, nil
	}
	w.hasWatches = true
	w.split = linematch.NewSplitter(maxLine)
	if len(near) > 0 {
		w.near = linematch.NewMatcher(near, maxLine, w.matchedNear)
	}
	if len(beside) > 0 {
		w.besideM = linematch.NewMatcher(beside, maxLine, w.matchedBeside)
	}
	return w, nil
}

// sameAs reports whether req asks what w was made of (StartOrGet).
func (w *eventWatch) sameAs(req StartRequest) bool {
	if w == nil {
		return len(req.Watch) == 0 && !req.WatchActivity
	}
	return slices.Equal(w.asked, req.Watch) && w.activity == req.WatchActivity
}

// of returns w as the watch of p (nil for nil), with the goroutine that
// matches beside on p's Manager's clock.
func (w *eventWatch) of(p *Process) *eventWatch {
	if w != nil {
		w.p = p
		if w.besideM != nil {
			w.beside = linematch.NewBeside(w.besideM, w.skipped, linematch.Budget{Clock: p.m.clock, Busy: besideBusy, Window: besideWindow})
		}
	}
	return w
}

// besideBusy in each besideWindow is the time the watches matched beside
// may take while the output flows: a quarter of a CPU. Patterns without
// a literal cost a CPU per few hundred KB/s of lines, so a flood would
// otherwise keep a CPU busy matching lines it then skips, and on a small
// machine that CPU is the one the child and its pump need. A stream
// slower than what fits in the budget is matched whole; a faster one
// skips, and says so. The window is short so that a flood shorter than
// it is held to the share too.
const (
	besideBusy   = 5 * time.Millisecond
	besideWindow = 20 * time.Millisecond
)

// attach gives the line watches to pu if it is the pump of out, the
// Output stream.
func (w *eventWatch) attach(pu *pump, out *HeadTailBuffer) {
	if w != nil && w.hasWatches && pu.dst == out {
		pu.watch = w
		w.pump = pu
	}
}

// live reports whether a line watch is not done yet.
func (w *eventWatch) live() bool {
	return w.near != nil && w.near.Live() > 0 || w.beside != nil && w.beside.Live() > 0
}

// scan hands the lines of b, the bytes the pump just stored, to the
// watches, and keeps the unterminated end for the next call (on the
// pump's goroutine).
func (w *eventWatch) scan(b []byte) {
	if w == nil || !w.hasWatches || !w.live() {
		return
	}
	w.timed = false
	w.split.Split(b, w)
}

// Lines hands complete lines to both groups (linematch.Sink).
func (w *eventWatch) Lines(region []byte) {
	if w.near != nil {
		w.near.Lines(region)
	}
	if w.beside != nil {
		w.beside.Lines(region)
	}
}

// Line hands one line to both groups (linematch.Sink).
func (w *eventWatch) Line(line []byte, over bool) {
	if w.near != nil {
		w.near.Line(line, over)
	}
	if w.beside != nil {
		w.beside.Line(line, over)
	}
}

// flush matches the unterminated line the output ended in, once the pump
// that scans has ended, and waits until the watches matched beside have
// matched every line they were given (at most a backlog), or for the
// record's DrainTimeout on Options.Clock, after which the lines left are
// skipped: every matched and skipped event of the record then comes
// before its final one (finalStep). A pump the drain cut off while it was
// blocked in a tee still owns the line: its later matches come after the
// final event and are dropped (eventLog.add), and the Beside takes no
// more lines.
func (w *eventWatch) flush() {
	if w == nil || !w.hasWatches {
		return
	}
	if w.pump != nil && w.pump.ended.Load() && w.live() {
		w.timed = false
		w.split.End(w)
	}
	if w.beside == nil {
		return
	}
	var giveUp <-chan time.Time
	if w.beside.Running() {
		clock := w.p.m.clock
		t := clock.NewTimer(w.p.drainTimeout, "events", "beside")
		defer t.Stop("events", "beside")
		giveUp = t.C
	}
	w.beside.Close(giveUp)
}

// matchedNear appends the matched events of a line the watches with a
// literal matched, on the pump's goroutine; hits index nearIdx.
func (w *eventWatch) matchedNear(line []byte, hits []int) {
	if !w.timed {
		w.now, w.timed = w.p.m.clock.Now("events", "matched"), true
	}
	w.appendMatched(w.now, line, hits, w.nearIdx)
}

// matchedBeside appends the matched events of a line the watches without
// a literal matched, on the Beside's goroutine; hits index besideIdx.
func (w *eventWatch) matchedBeside(line []byte, hits []int) {
	w.appendMatched(w.p.m.clock.Now("events", "matched", "beside"), line, hits, w.besideIdx)
}

func (w *eventWatch) appendMatched(now time.Time, line []byte, hits, idx []int) {
	p, text := w.p, string(line)
	for _, h := range hits {
		p.m.events.add(p, eventSlot{time: now, info: p.info, kind: codeMatched, more: &eventMore{watch: w.asked[idx[h]].Name, line: text}})
	}
}

// skipped appends a skipped event for each watch matched beside that is
// not done, on the Beside's goroutine: lines it did not match.
func (w *eventWatch) skipped(lines int64) {
	p := w.p
	now := p.m.clock.Now("events", "skipped")
	for k, i := range w.besideIdx {
		if !w.besideM.Done(k) {
			p.m.events.add(p, eventSlot{time: now, info: p.info, kind: codeSkipped, more: &eventMore{watch: w.asked[i].Name, skipped: lines}})
		}
	}
}

// startActivityWatch starts the activity poller of a record started with
// WatchActivity. It runs before the exit goroutine starts, so that Close,
// which waits for m.exits, also waits for the poller.
func (p *Process) startActivityWatch() {
	if p.watch == nil || !p.watch.activity {
		return
	}
	p.m.exits.Add(1)
	// Stopped when the record is final (p.done); Close waits for it
	// through m.exits.
	go func() {
		defer p.m.exits.Done()
		p.pollActivity()
	}()
}

// pollActivity looks at the tree at once and then every inputPoll on
// Options.Clock (a ticker tagged "events", "activity"), until the record is
// final, and appends waiting_for_input each time the tree begins to wait
// for input and listening for each listener that was not there at the
// previous look.
func (p *Process) pollActivity() {
	waiting := false
	seen := map[Listener]bool{}
	warned := false
	look := func() {
		a, err := p.look("watch activity", true)
		if err != nil {
			if !warned && !p.isFinal() {
				warned = true
				p.m.logger.Warn(context.Background(), "watch activity: cannot look at the tree", slog.F("id", p.info.ID), slog.Error(err))
			}
			return
		}
		now := p.m.clock.Now("events", "activity")
		if a.WaitingForInput && !waiting {
			p.m.events.add(p, eventSlot{time: now, info: p.info, kind: codeWaitingForInput})
		}
		waiting = a.WaitingForInput
		current := make(map[Listener]bool, len(a.Listeners))
		for _, ln := range a.Listeners {
			key := Listener{Network: ln.Network, Address: ln.Address}
			current[key] = true
			if !seen[key] {
				p.m.events.add(p, eventSlot{time: now, info: p.info, kind: codeListening, more: &eventMore{listener: &ln}})
			}
		}
		seen = current
	}
	look()
	ticker := p.m.clock.NewTicker(inputPoll, "events", "activity")
	defer ticker.Stop("events", "activity")
	for {
		select {
		case <-p.done:
			return
		case <-ticker.C:
		}
		look()
	}
}
