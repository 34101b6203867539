package proc

import (
	"bytes"
	"context"
	"regexp"
	"regexp/syntax"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"cdr.dev/slog/v3"
	"golang.org/x/xerrors"
)

// Events (design section 19): one stream per Manager that says when a
// record started, printed a line a watch waits for, started to wait for
// input, opened a listener, became final or was dropped. It is read with a
// cursor, like output: Events returns what came after the caller's last
// Seq, WaitEvent sleeps until something did. The log is a bounded ring
// (eventLog); the line watches run on the output pump (eventWatch.scan);
// the activity watch is one poller per record that asks (pollActivity).

// DefaultEventHistory is the number of events a Manager keeps when
// Options.EventHistory is zero.
const DefaultEventHistory = 4096

// EventKind says what an [Event] reports.
type EventKind string

// The kinds of [Event].
const (
	// EventStarted: the record started; Info is its status then (PID set).
	EventStarted EventKind = "started"
	// EventFinal: the record became final; Info is its final status.
	EventFinal EventKind = "final"
	// EventMatched: a line of the Output stream matched the watch named
	// Watch; Line is the line.
	EventMatched EventKind = "matched"
	// EventWaitingForInput: the tree of a record started with
	// WatchActivity began to wait for input (see [Activity]).
	EventWaitingForInput EventKind = "waiting_for_input"
	// EventListening: the tree of a record started with WatchActivity
	// opened Listener.
	EventListening EventKind = "listening"
	// EventRemoved: retention or Remove dropped the record; Info is its
	// final status.
	EventRemoved EventKind = "removed"
)

// Event is one thing that happened to a record. Events of one Manager are
// numbered by Seq, 1, 2, 3..., in the order they were appended; a Seq is
// never reused. The events of one record come in the order they happened:
// started first, every matched event of its output before its final, and
// removed last. Info and Listener may be shared between reads and must be
// treated as read-only.
type Event struct {
	Seq   int64     `json:"seq"`
	Time  time.Time `json:"time"` // on Options.Clock; never before the previous event's
	ID    string    `json:"id"`
	Owner string    `json:"owner,omitempty"`
	Kind  EventKind `json:"kind"`
	// Info is the record's status: with started, final and removed.
	Info *Info `json:"info,omitempty"`
	// Watch is the name of the watch that matched (matched).
	Watch string `json:"watch,omitempty"`
	// Line is the whole line that matched, as WaitFor returns it
	// (matched).
	Line string `json:"line,omitempty"`
	// Listener is the new listener (listening).
	Listener *Listener `json:"listener,omitempty"`
}

// Watch names a pattern a record's output lines are matched against
// (StartRequest.Watch). Each line of the Output stream (the combined
// output, or stdout with SeparateStderr), without its newline and a
// trailing '\r', that Pattern matches (unanchored, as regexp.Match) is
// reported as an [EventMatched] event carrying Name and the line. A line
// longer than the record's MaxLineLength is matched on its first
// MaxLineLength bytes (less a character cut in two), and the event
// carries those. An unterminated last line is matched once the output
// ends. When several watches match one line, their events come in the
// order of the request.
type Watch struct {
	// Name identifies the watch in its events; it must be non-empty and
	// unique within the request.
	Name string `json:"name"`
	// Pattern is a Go regular expression (regexp/syntax).
	Pattern string `json:"pattern"`
	// Once stops the watch after its first match.
	Once bool `json:"once"`
}

// Events returns the events after cursor (the Seq of the last event the
// caller has seen; 0: from the first), at most max of them (max <= 0: all
// there are), the cursor to pass next time, and lost: how many events
// after cursor are no longer kept (Options.EventHistory) and so were
// skipped. A consumer that lost events learns the state of the records
// from List. It is safe for concurrent use, and works after Close.
func (m *Manager) Events(cursor int64, max int) (evs []Event, next int64, lost int64) {
	return m.events.read(cursor, max, nil)
}

// WaitEvent blocks until an event after cursor exists (nil, at once if
// there is one already, even after Close), until ctx ends (an error
// wrapping ctx.Err()), or until Close has stopped every record and
// returned with no event after cursor (an error wrapping ErrClosed). Close
// wakes every WaitEvent. It starts no goroutine.
func (m *Manager) WaitEvent(ctx context.Context, cursor int64) error {
	return m.events.wait(ctx, cursor, nil)
}

// Events is [Manager.Events] for the owner's records: the events of other
// owners are skipped, and Seq stays the Manager's. lost counts every
// event after cursor no longer kept, whoever's it was; next is the Seq of
// the last event looked at, so that the next call does not look again.
func (s *Scope) Events(cursor int64, max int) (evs []Event, next int64, lost int64) {
	return s.m.events.read(cursor, max, s)
}

// WaitEvent is [Manager.WaitEvent] for the owner's records: it returns
// when one of the owner's events after cursor exists, or events after
// cursor were lost (Events then reports them), and it returns ErrClosed
// once this Scope's Close (or the Manager's) has returned.
func (s *Scope) WaitEvent(ctx context.Context, cursor int64) error {
	return s.m.events.wait(ctx, cursor, s)
}

// eventLog is a Manager's events: a ring of at most max events, the oldest
// dropped first.
type eventLog struct {
	max int // Options.EventHistory

	// mu guards the fields below. It is a leaf: nothing is locked, logged
	// or sent under it; final (below) closes a record's done channel under
	// it, which never blocks.
	mu     sync.Mutex
	ring   []Event // grows to max, then wraps
	first  int     // index in ring of the oldest event
	last   int64   // the Seq of the newest event; 0: none yet
	closed bool    // Manager.Close returned
	// wake is closed and cleared by every append (and by wakeAll); a
	// waiter makes it when there is none. Nil when nobody waits.
	wake chan struct{}
	// removedEarly holds the removed events of records dropped between
	// the moment the Manager counted them final and their final event
	// (retention racing the exit goroutine): finalStep appends them after.
	removedEarly map[*Process]Event
}

// addLocked appends ev, numbering it and keeping Time in order. The caller
// holds l.mu.
func (l *eventLog) addLocked(ev Event) {
	l.last++
	ev.Seq = l.last
	n := len(l.ring)
	if n > 0 {
		if prev := l.ring[(l.first+n-1)%n].Time; ev.Time.Before(prev) {
			ev.Time = prev
		}
	}
	if n < l.max {
		l.ring = append(l.ring, ev)
	} else {
		l.ring[l.first] = ev
		l.first = (l.first + 1) % n
	}
	l.wakeLocked()
}

func (l *eventLog) wakeLocked() {
	if l.wake != nil {
		close(l.wake)
		l.wake = nil
	}
}

// add appends ev unless p is final already: the events of a record that
// race with its end (a late look, a line scanned by a pump the drain cut
// off) never come after its final event.
func (l *eventLog) add(p *Process, ev Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.isFinal() {
		return
	}
	l.addLocked(ev)
}

// wakeAll wakes every waiter, for them to look at what changed (a Scope
// closed).
func (l *eventLog) wakeAll() {
	l.mu.Lock()
	l.wakeLocked()
	l.mu.Unlock()
}

// close marks the log closed (Manager.Close returned) and wakes every
// waiter. Events stay readable, and later ones (Remove) are appended.
func (l *eventLog) close() {
	l.mu.Lock()
	l.closed = true
	l.wakeLocked()
	l.mu.Unlock()
}

// oldestLocked is the Seq of the oldest event kept (last+1 when none).
func (l *eventLog) oldestLocked() int64 {
	return l.last - int64(len(l.ring)) + 1
}

// at returns the kept event seq. The caller holds l.mu.
func (l *eventLog) atLocked(seq int64) *Event {
	i := int(seq - l.oldestLocked())
	return &l.ring[(l.first+i)%len(l.ring)]
}

// read is Events: of every owner (s nil), or of s's owner.
func (l *eventLog) read(cursor int64, max int, s *Scope) (evs []Event, next int64, lost int64) {
	cursor = positiveOr(cursor, 0)
	l.mu.Lock()
	defer l.mu.Unlock()
	next = cursor
	from := l.oldestLocked()
	if from > cursor+1 {
		lost = from - cursor - 1
	} else {
		from = cursor + 1
	}
	for seq := from; seq <= l.last && (max <= 0 || len(evs) < max); seq++ {
		ev := l.atLocked(seq)
		next = seq
		if s == nil || ev.Owner == s.owner {
			evs = append(evs, *ev)
		}
	}
	return evs, next, lost
}

// wait is WaitEvent: of every owner (s nil), or of s's owner.
func (l *eventLog) wait(ctx context.Context, cursor int64, s *Scope) error {
	cursor = positiveOr(cursor, 0)
	scanned := cursor // a Scope's waiter looks at each event once
	for {
		l.mu.Lock()
		found := false
		if l.oldestLocked() > scanned+1 && l.last > cursor {
			found = true // events after cursor were lost: Events says so
		}
		for ; !found && scanned < l.last; scanned++ {
			found = s == nil || l.atLocked(scanned+1).Owner == s.owner
		}
		closed := l.closed || (s != nil && s.eventsClosed.Load())
		var wake chan struct{}
		if !found && !closed {
			if l.wake == nil {
				l.wake = make(chan struct{})
			}
			wake = l.wake
		}
		l.mu.Unlock()
		switch {
		case found:
			return nil
		case closed:
			return xerrors.Errorf("wait event: %w", ErrClosed)
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return xerrors.Errorf("wait event: %w", ctx.Err())
		}
	}
}

// started appends p's started event. The launch calls it before the
// pumps and the exit goroutine run, so that it comes first.
func (p *Process) eventStarted() {
	// Nothing was written yet: the status then is the static Info, shared.
	info := p.info
	p.m.events.add(p, Event{Time: info.StartedAt, ID: info.ID, Owner: info.Owner, Kind: EventStarted, Info: info})
}

// finalStep makes p final and appends its final event as one step, under
// the log's lock: a reader that finds the event finds Done closed (and
// Info final), and one that saw Done close finds the event. now is when
// the record became final. A line the output ended in is matched first.
func (p *Process) finalStep(now time.Time) {
	p.watch.flush()
	info := p.fin // shared with Info and List
	l := &p.m.events
	l.mu.Lock()
	defer l.mu.Unlock()
	close(p.done)
	l.addLocked(Event{Time: now, ID: info.ID, Owner: info.Owner, Kind: EventFinal, Info: info})
	if ev, ok := l.removedEarly[p]; ok {
		delete(l.removedEarly, p)
		l.addLocked(ev)
	}
}

// eventRemovedLocked appends the removed event of p, which retention or
// Remove dropped at now. The caller holds m.mu.
func (m *Manager) eventRemovedLocked(p *Process, now time.Time) {
	info := p.fin
	ev := Event{Time: now, ID: info.ID, Owner: info.Owner, Kind: EventRemoved, Info: info}
	l := &m.events
	l.mu.Lock()
	defer l.mu.Unlock()
	if !p.isFinal() {
		// Counted final, its final event not yet appended: the removed
		// event follows it (finalStep).
		if l.removedEarly == nil {
			l.removedEarly = make(map[*Process]Event)
		}
		l.removedEarly[p] = ev
		return
	}
	l.addLocked(ev)
}

// eventWatch is what a record asked of the event stream beyond started and
// final: line watches (StartRequest.Watch), run by the pump of the Output
// stream, and WatchActivity. Its methods are no-ops on a nil *eventWatch,
// a record that asked for neither.
type eventWatch struct {
	p        *Process
	asked    []Watch // as requested, for StartOrGet
	activity bool    // StartRequest.WatchActivity
	watches  []lineWatch
	maxLine  int   // lines are matched on their first maxLine bytes
	pump     *pump // the pump that scans; set by attach

	// The fields below belong to the pump's goroutine (scan), and to
	// flush once that pump has ended.
	partial []byte // the current line so far, at most maxLine+1 bytes
	over    bool   // the current line is longer than partial holds
	live    int    // watches not yet done
	cand    []int  // scanLines: each watch's next candidate
	// untilAnchors counts down the regions until the anchors are chosen
	// again (anchorEvery).
	untilAnchors int
}

// lineWatch is one compiled Watch.
type lineWatch struct {
	name string
	re   *regexp.Regexp
	once bool
	done bool // a Once watch that matched
	// lits are strings one of which every match contains, found by
	// bytes.Index at memory speed; nil if the pattern has none. Otherwise
	// pre, the pattern without its assertions (^ $ \A \z \b \B), finds
	// candidates in many lines at once; nil if it could not be made:
	// every line is then a candidate. Either only proposes lines: re
	// decides.
	lits []anchored
	pre  *regexp.Regexp
}

// anchored is a literal found by its rarest byte: IndexByte looks for
// lit[anchor] at memory speed, and only those places are compared. The
// first byte, which bytes.Index looks for, is often a common one ('e' of
// "error"), and a search that meets it every few bytes is ten times
// slower.
type anchored struct {
	lit    []byte
	anchor int
}

// The anchors are chosen from the output itself: from the first region of
// at least anchorSample bytes, then again every anchorEvery regions (of
// that size) after. A smaller region is no sample: the first reads of a
// command often hold a line or two.
const (
	anchorSample = 8 << 10
	anchorEvery  = 256
)

// newEventWatch validates and compiles what req asks of the event stream;
// nil when it asks nothing. maxLine is the record's MaxLineLength.
func newEventWatch(req StartRequest, maxLine int) (*eventWatch, error) {
	if len(req.Watch) == 0 && !req.WatchActivity {
		return nil, nil
	}
	if req.WatchActivity && !activitySupported {
		return nil, xerrors.Errorf("start: WatchActivity: activity is Linux only: %w", ErrUnsupported)
	}
	w := &eventWatch{asked: slices.Clone(req.Watch), activity: req.WatchActivity, maxLine: maxLine}
	names := make(map[string]bool, len(req.Watch))
	for i, wa := range req.Watch {
		switch {
		case wa.Name == "":
			return nil, xerrors.Errorf("start: Watch[%d] has no name: %w", i, ErrInvalid)
		case names[wa.Name]:
			return nil, xerrors.Errorf("start: Watch name %q is used twice: %w", wa.Name, ErrInvalid)
		}
		names[wa.Name] = true
		re, err := regexp.Compile(wa.Pattern)
		if err != nil {
			return nil, xerrors.Errorf("start: Watch %q: %v: %w", wa.Name, err, ErrInvalid)
		}
		lw := lineWatch{name: wa.Name, re: re, once: wa.Once}
		lits, pre := prefilter(wa.Pattern)
		for _, lit := range lits {
			lw.lits = append(lw.lits, anchored{lit: lit})
		}
		lw.pre = pre
		w.watches = append(w.watches, lw)
	}
	w.live = len(w.watches)
	w.cand = make([]int, len(w.watches))
	return w, nil
}

// prefilter finds what proposes candidate lines for pattern (see
// lineWatch): literals one of which every match holds, else the pattern
// with its assertions made empty, which matches wherever the pattern
// matches a line (and more).
func prefilter(pattern string) (lits [][]byte, pre *regexp.Regexp) {
	tree, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, nil
	}
	if lits = requiredLiterals(tree); lits != nil {
		return lits, nil
	}
	pre, err = regexp.Compile(withoutAssertions(tree).String())
	if err != nil {
		return nil, nil
	}
	return nil, pre
}

// maxLiterals bounds the literals a watch searches for: each costs a pass
// over the output.
const maxLiterals = 4

// requiredLiterals returns case-sensitive literals, one of which every
// match of re contains (none empty or holding a newline, which no line
// has), or nil if it finds no such set of at most maxLiterals.
func requiredLiterals(re *syntax.Regexp) [][]byte {
	switch re.Op {
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiterals(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiterals(re.Sub[0])
		}
	case syntax.OpLiteral:
		lit := []byte(string(re.Rune))
		if re.Flags&syntax.FoldCase != 0 || len(lit) == 0 || bytes.IndexByte(lit, '\n') >= 0 {
			return nil
		}
		return [][]byte{lit}
	case syntax.OpConcat:
		// The piece whose shortest literal is longest searches best.
		var best [][]byte
		for _, sub := range re.Sub {
			if lits := requiredLiterals(sub); lits != nil && (best == nil || shortest(lits) > shortest(best)) {
				best = lits
			}
		}
		return best
	case syntax.OpAlternate:
		var all [][]byte
		for _, sub := range re.Sub {
			lits := requiredLiterals(sub)
			if lits == nil || len(all)+len(lits) > maxLiterals {
				return nil
			}
			all = append(all, lits...)
		}
		return all
	}
	return nil
}

func shortest(lits [][]byte) int {
	n := len(lits[0])
	for _, l := range lits[1:] {
		n = min(n, len(l))
	}
	return n
}

// withoutAssertions replaces every empty-width assertion in re (in place)
// with an empty match.
func withoutAssertions(re *syntax.Regexp) *syntax.Regexp {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return &syntax.Regexp{Op: syntax.OpEmptyMatch, Flags: re.Flags}
	}
	for i, sub := range re.Sub {
		re.Sub[i] = withoutAssertions(sub)
	}
	return re
}

// sameAs reports whether req asks what w was made of (StartOrGet).
func (w *eventWatch) sameAs(req StartRequest) bool {
	if w == nil {
		return len(req.Watch) == 0 && !req.WatchActivity
	}
	return slices.Equal(w.asked, req.Watch) && w.activity == req.WatchActivity
}

// attach gives the line watches to pu if it is the pump of out, the
// Output stream.
func (w *eventWatch) attach(pu *pump, out *HeadTailBuffer) {
	if w != nil && len(w.watches) > 0 && pu.dst == out {
		pu.watch = w
		w.pump = pu
	}
}

// scan matches the complete lines of b, the bytes the pump just stored,
// and keeps the unterminated end for the next call. Complete lines inside
// b are looked at in place; only a line that spans calls is copied, and
// only its first maxLine+1 bytes.
func (w *eventWatch) scan(b []byte) {
	if w == nil || w.live == 0 {
		return
	}
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		w.keep(b)
		return
	}
	if len(w.partial) == 0 && !w.over {
		w.matchLine(b[:i], false)
	} else {
		w.keep(b[:i])
		w.matchLine(w.partial, w.over)
		w.partial, w.over = w.partial[:0], false
	}
	rest := b[i+1:]
	if j := bytes.LastIndexByte(rest, '\n'); j >= 0 {
		w.scanLines(rest[:j+1])
		rest = rest[j+1:]
	}
	w.keep(rest)
}

// keep adds b to the current line, up to maxLine+1 bytes: one more than
// is matched, to tell a line of maxLine bytes and a '\r' from a longer one.
func (w *eventWatch) keep(b []byte) {
	if w.partial == nil && len(b) > 0 {
		w.partial = make([]byte, 0, w.maxLine+1)
	}
	room := w.maxLine + 1 - len(w.partial)
	if len(b) > room {
		b, w.over = b[:room], true
	}
	w.partial = append(w.partial, b...)
}

// scanLines matches the lines of region, which ends with '\n'. Each live
// watch proposes its next candidate line (lit or pre); the earliest is
// matched by every watch, in the request's order.
func (w *eventWatch) scanLines(region []byte) {
	for k := range w.cand {
		w.cand[k] = -1 // not looked for yet
	}
	if w.untilAnchors--; w.untilAnchors < 0 && len(region) >= anchorSample {
		w.chooseAnchors(region)
		w.untilAnchors = anchorEvery
	}
	for pos := 0; pos < len(region) && w.live > 0; {
		at := len(region)
		for k := range w.watches {
			if w.watches[k].done {
				continue
			}
			if w.cand[k] < pos {
				w.cand[k] = w.watches[k].next(region, pos)
			}
			at = min(at, w.cand[k])
		}
		if at >= len(region) {
			return
		}
		start := bytes.LastIndexByte(region[pos:at], '\n') + 1 + pos
		end := bytes.IndexByte(region[at:], '\n') + at
		w.matchLine(region[start:end], false)
		pos = end + 1
	}
}

// next returns where in region, at or after pos (a line's start), the
// next line that may match begins to match, or len(region) if none can.
func (lw *lineWatch) next(region []byte, pos int) int {
	switch {
	case lw.lits != nil:
		at := len(region)
		for _, a := range lw.lits {
			at = min(at, a.index(region, pos))
		}
		return at
	case lw.pre != nil:
		if loc := lw.pre.FindIndex(region[pos:]); loc != nil {
			return pos + loc[0]
		}
	default:
		return pos
	}
	return len(region)
}

// matchLine matches one line (without its newline) against every live
// watch in order. over says the line was longer than line holds.
func (w *eventWatch) matchLine(line []byte, over bool) {
	if !over {
		line = bytes.TrimSuffix(line, []byte{'\r'})
	}
	if len(line) > w.maxLine {
		line = line[:w.maxLine]
		// Not a character cut in two, as renderings cut lines.
		for k := 1; k < utf8.UTFMax && k <= len(line); k++ {
			if utf8.RuneStart(line[len(line)-k]) {
				if r, _ := utf8.DecodeRune(line[len(line)-k:]); r == utf8.RuneError && !utf8.FullRune(line[len(line)-k:]) {
					line = line[:len(line)-k]
				}
				break
			}
		}
	}
	var text string
	for k := range w.watches {
		lw := &w.watches[k]
		if lw.done || !lw.mayMatch(line) || !lw.re.Match(line) {
			continue
		}
		if text == "" {
			text = string(line)
		}
		if lw.once {
			lw.done = true
			w.live--
		}
		p := w.p
		now := p.m.clock.Now("events", "matched")
		p.m.events.add(p, Event{Time: now, ID: p.info.ID, Owner: p.info.Owner, Kind: EventMatched, Watch: lw.name, Line: text})
	}
}

// flush matches the unterminated line the output ended in, once the pump
// that scans has ended. A pump the drain cut off while it was blocked in
// a tee still owns the line: its later matches come after the final
// event and are dropped (eventLog.add).
func (w *eventWatch) flush() {
	if w == nil || w.pump == nil || !w.pump.ended.Load() || w.live == 0 {
		return
	}
	if len(w.partial) > 0 || w.over {
		w.matchLine(w.partial, w.over)
		w.partial, w.over = nil, false
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
			p.m.events.add(p, Event{Time: now, ID: p.info.ID, Owner: p.info.Owner, Kind: EventWaitingForInput})
		}
		waiting = a.WaitingForInput
		current := make(map[Listener]bool, len(a.Listeners))
		for _, ln := range a.Listeners {
			key := Listener{Network: ln.Network, Address: ln.Address}
			current[key] = true
			if !seen[key] {
				p.m.events.add(p, Event{Time: now, ID: p.info.ID, Owner: p.info.Owner, Kind: EventListening, Listener: &ln})
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

// of returns w as the watch of p (nil for nil).
func (w *eventWatch) of(p *Process) *eventWatch {
	if w != nil {
		w.p = p
	}
	return w
}

// index returns where in region, at or after pos, a.lit first occurs, or
// len(region).
func (a anchored) index(region []byte, pos int) int {
	c := a.lit[a.anchor]
	for i := pos + a.anchor; i < len(region); {
		j := bytes.IndexByte(region[i:], c)
		if j < 0 {
			break
		}
		start := i + j - a.anchor
		if start+len(a.lit) <= len(region) && bytes.Equal(region[start:start+len(a.lit)], a.lit) {
			return start
		}
		i += j + 1
	}
	return len(region)
}

// chooseAnchors makes each literal's anchor the byte of it that region
// holds fewest of.
func (w *eventWatch) chooseAnchors(region []byte) {
	var counts [256]int
	for i := range counts {
		counts[i] = -1 // not counted yet
	}
	for k := range w.watches {
		for l := range w.watches[k].lits {
			a := &w.watches[k].lits[l]
			best := 0
			for i, c := range a.lit {
				if counts[c] < 0 {
					counts[c] = bytes.Count(region, a.lit[i:i+1])
				}
				if counts[c] < counts[a.lit[best]] {
					best = i
				}
			}
			a.anchor = best
		}
	}
}

// mayMatch reports whether line holds one of lw's literals, if it has
// any: the regexp, far slower, runs only then.
func (lw *lineWatch) mayMatch(line []byte) bool {
	if lw.lits == nil {
		return true
	}
	for _, a := range lw.lits {
		if a.index(line, 0) < len(line) {
			return true
		}
	}
	return false
}
