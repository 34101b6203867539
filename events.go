package proc

import (
	"bytes"
	"context"
	"regexp"
	"regexp/syntax"
	"slices"
	"sync"
	"time"
	"unicode"
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
	// Info is the record's status: with started, final and removed. Each
	// read makes its own: the caller may change it.
	Info *Info `json:"info,omitempty"`
	// Watch is the name of the watch that matched (matched).
	Watch string `json:"watch,omitempty"`
	// Line is the whole line that matched, as WaitFor returns it
	// (matched).
	Line string `json:"line,omitempty"`
	// Listener is the new listener (listening).
	Listener *Listener `json:"listener,omitempty"`
}

// MaxWatches is the most line watches one StartRequest may ask for
// (StartRequest.Watch); a request with more is refused with an error
// wrapping ErrInvalid. Each watch costs the pump of the record's output a
// look at every line that may match it, and the choice of what the pump
// searches for grows with their literals.
const MaxWatches = 64

// MaxWatchPattern is the longest Watch.Pattern, in bytes, a StartRequest
// may hold; a longer one is refused with an error wrapping ErrInvalid.
// What the pattern costs to compile and to match is bounded with it.
const MaxWatchPattern = 4096

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
	ring   []eventSlot // grows to max, then wraps
	first  int         // index in ring of the oldest event
	last   int64       // the Seq of the newest event; 0: none yet
	closed bool        // Manager.Close returned
	// wake is closed and cleared by every append (and by wakeAll); a
	// waiter makes it when there is none. Nil when nobody waits.
	wake chan struct{}
	// removedEarly holds the removed events of records dropped between
	// the moment the Manager counted them final and their final event
	// (retention racing the exit goroutine): finalStep appends them after.
	removedEarly map[*Process]eventSlot
	// finalHook, set by tests before the first start, runs in finalStep
	// between the append of the final event and the close of the
	// record's done channel, under mu.
	finalHook func(p *Process)
}

// eventSlot is one kept event, compactly (56 bytes, where an Event takes
// 128): its Seq is its place in the ring, ID and Owner are its record's
// static Info's, and the Info of a final or removed event is composed
// from that and the final status when read (event), so a slot holds no
// copy of it. It points to no Process: a dropped record's output and the
// rest go while its events are kept.
type eventSlot struct {
	time time.Time
	info *Info        // the record's static Info
	fin  *finalStatus // the record's final status; nil unless final or removed
	more *eventMore   // nil unless matched or listening
	kind eventCode
}

// eventMore is what a matched or listening event carries beyond its
// record.
type eventMore struct {
	watch    string
	line     string
	listener *Listener
}

// eventCode is an EventKind in a slot.
type eventCode uint8

const (
	codeStarted eventCode = iota
	codeFinal
	codeMatched
	codeWaitingForInput
	codeListening
	codeRemoved
)

// eventKinds names each eventCode.
var eventKinds = [...]EventKind{
	codeStarted:         EventStarted,
	codeFinal:           EventFinal,
	codeMatched:         EventMatched,
	codeWaitingForInput: EventWaitingForInput,
	codeListening:       EventListening,
	codeRemoved:         EventRemoved,
}

// event is the Event kept in s, numbered seq. A started event's Info is
// a copy of the record's static Info (the caller may change it without
// changing the record); a final or removed one's is its final Info,
// composed anew (the record is final: its final event is appended after
// its final status is made, and a removed one after that). A slot never
// changes once appended, so event needs no lock.
func (s *eventSlot) event(seq int64) Event {
	info := s.info
	ev := Event{Seq: seq, Time: s.time, ID: info.ID, Owner: info.Owner, Kind: eventKinds[s.kind]}
	switch s.kind {
	case codeStarted:
		started := *info
		ev.Info = &started
	case codeFinal, codeRemoved:
		ev.Info = new(Info)
		s.fin.compose(ev.Info, info)
	}
	if s.more != nil {
		ev.Watch, ev.Line, ev.Listener = s.more.watch, s.more.line, s.more.listener
	}
	return ev
}

// addLocked appends ev, numbering it and keeping its time in order. The
// caller holds l.mu.
func (l *eventLog) addLocked(ev eventSlot) {
	l.last++
	n := len(l.ring)
	if n > 0 {
		if prev := l.ring[(l.first+n-1)%n].time; ev.time.Before(prev) {
			ev.time = prev
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
func (l *eventLog) add(p *Process, ev eventSlot) {
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
func (l *eventLog) atLocked(seq int64) *eventSlot {
	i := int(seq - l.oldestLocked())
	return &l.ring[(l.first+i)%len(l.ring)]
}

// read is Events: of every owner (s nil), or of s's owner. It copies the
// slots under l.mu and makes the Events (an Info each) after letting go:
// a pump appending a matched event waits only for the copy.
func (l *eventLog) read(cursor int64, max int, s *Scope) (evs []Event, next int64, lost int64) {
	l.mu.Lock()
	slots, next, lost := l.slotsLocked(cursor, max, s)
	l.mu.Unlock()
	return slotEvents(slots), next, lost
}

// readLocked is read with l.mu held (for a test's hook).
func (l *eventLog) readLocked(cursor int64, max int, s *Scope) (evs []Event, next int64, lost int64) {
	slots, next, lost := l.slotsLocked(cursor, max, s)
	return slotEvents(slots), next, lost
}

// numberedSlot is a copy of a kept slot with its Seq.
type numberedSlot struct {
	seq int64
	eventSlot
}

// slotsLocked copies the slots read returns. The caller holds l.mu.
func (l *eventLog) slotsLocked(cursor int64, max int, s *Scope) (slots []numberedSlot, next int64, lost int64) {
	cursor = positiveOr(cursor, 0)
	next = cursor
	from := l.oldestLocked()
	if from > cursor+1 {
		lost = from - cursor - 1
	} else {
		from = cursor + 1
	}
	for seq := from; seq <= l.last && (max <= 0 || len(slots) < max); seq++ {
		ev := l.atLocked(seq)
		next = seq
		if s == nil || ev.info.Owner == s.owner {
			slots = append(slots, numberedSlot{seq, *ev})
		}
	}
	return slots, next, lost
}

// slotEvents makes the Events of slots.
func slotEvents(slots []numberedSlot) []Event {
	if slots == nil {
		return nil
	}
	evs := make([]Event, len(slots))
	for i := range slots {
		evs[i] = slots[i].event(slots[i].seq)
	}
	return evs
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
			found = s == nil || l.atLocked(scanned+1).info.Owner == s.owner
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
	p.m.events.add(p, eventSlot{time: p.info.StartedAt, info: p.info, kind: codeStarted})
}

// finalStep makes p final and appends its final event as one step, under
// the log's lock: a reader that finds the event finds Done closed (and
// Info final), and one that saw Done close finds the event. now is when
// the record became final. A line the output ended in is matched first,
// so that every matched event of p comes before its final one; later
// ones are dropped (add). Done is closed after the append, still under
// the lock: a reader of the log sees both or neither.
func (p *Process) finalStep(now time.Time) {
	p.watch.flush()
	l := &p.m.events
	l.mu.Lock()
	defer l.mu.Unlock()
	l.addLocked(eventSlot{time: now, info: p.info, fin: p.fin, kind: codeFinal})
	if l.finalHook != nil {
		l.finalHook(p)
	}
	close(p.done)
	if ev, ok := l.removedEarly[p]; ok {
		delete(l.removedEarly, p)
		l.addLocked(ev)
	}
}

// eventRemovedLocked appends the removed event of p, which retention or
// Remove dropped at now. The caller holds m.mu.
func (m *Manager) eventRemovedLocked(p *Process, now time.Time) {
	ev := eventSlot{time: now, info: p.info, fin: p.fin, kind: codeRemoved}
	l := &m.events
	l.mu.Lock()
	defer l.mu.Unlock()
	if !p.isFinal() {
		// Counted final, its final event not yet appended: the removed
		// event follows it (finalStep).
		if l.removedEarly == nil {
			l.removedEarly = make(map[*Process]eventSlot)
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
	// lits are the literals of every watch that has them (lineWatch.lits):
	// one pass over the output finds them all, by anchors.
	lits []watchLit

	// The fields below belong to the pump's goroutine (scan), and to
	// flush once that pump has ended.
	partial []byte // the current line so far, at most maxLine+1 bytes
	over    bool   // the current line is longer than partial holds
	live    int    // watches not yet done
	cand    []int  // scanLines: the next candidate of each watch without literals
	// anchors are the bytes searched for: every literal of a live watch
	// holds one of them (chooseAnchors). They are chosen at the first
	// region, again at the first region of at least anchorSample bytes,
	// then every anchorEvery such regions (untilAnchors counts down).
	// When a Once watch with literals is done, its literals leave their
	// anchors, and an anchor left with none is dropped (prune): cheaper
	// than choosing again after each of many Once watches.
	anchors      []anchor
	chosen       bool
	prune        bool
	untilAnchors int
	// now is the time of the matched events of one scan (or flush): the
	// time the chunk was read, taken once at its first match (timed).
	now   time.Time
	timed bool
}

// lineWatch is one compiled Watch.
type lineWatch struct {
	name string
	re   *regexp.Regexp
	once bool
	done bool // a Once watch that matched
	// lits are strings one of which every match contains, found at memory
	// speed (eventWatch.anchors); nil if the pattern has none. Otherwise
	// pre, the pattern without its assertions (^ $ \A \z \b \B), finds
	// candidates in many lines at once; nil if it could not be made:
	// every line is then a candidate. Either only proposes lines: re
	// decides.
	lits []literal
	pre  *regexp.Regexp
	// window, when not negative, is the most bytes a match can begin
	// before its literal (lits has one): re then runs on the line from
	// there (matches).
	window int
}

// literal is a string one of a watch's literals every match holds: its
// bytes; with fold, in lower case, and the text holds each ASCII letter of
// it in either case.
type literal struct {
	b    []byte
	fold bool
}

// watchLit is one literal of watches[watch].
type watchLit struct {
	lit   literal
	watch int
}

// anchor is a byte that IndexByte looks for at memory speed on behalf of
// the literals that hold it: only where it occurs are they compared. One
// byte shared by several literals (the 'o' of "error" and of "listening
// on port") makes one pass find them all; a rare one (the first byte,
// which bytes.Index would look for, is often a common one: 'e' of
// "error") makes the pass rarely stop.
type anchor struct {
	c    byte
	lits []litAt
	next int // scanLines: where the next candidate starts
}

// litAt is the literal lits[lit], whose byte off is its anchor's.
type litAt struct{ lit, off int }

// The anchors are chosen from the output itself (chooseAnchors): the bytes
// a region holds fewest of, and that cover most literals. A region of at
// least anchorSample bytes is a sample: the first reads of a command
// often hold a line or two. anchorHit is what one stop of the search
// costs, in bytes the search passes over meanwhile.
const (
	anchorSample = 8 << 10
	anchorEvery  = 256
	anchorHit    = 256
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
	if len(req.Watch) > MaxWatches {
		// A request that can never succeed, not a passing shortage:
		// ErrInvalid (design section 8), as the other limits a request
		// states wrongly.
		return nil, xerrors.Errorf("start: %d watches, more than MaxWatches (%d): %w", len(req.Watch), MaxWatches, ErrInvalid)
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
		if len(wa.Pattern) > MaxWatchPattern {
			return nil, xerrors.Errorf("start: Watch %q: pattern of %d bytes, longer than MaxWatchPattern (%d): %w", wa.Name, len(wa.Pattern), MaxWatchPattern, ErrInvalid)
		}
		re, err := regexp.Compile(wa.Pattern)
		if err != nil {
			return nil, xerrors.Errorf("start: Watch %q: %v: %w", wa.Name, err, ErrInvalid)
		}
		lw := lineWatch{name: wa.Name, re: re, once: wa.Once}
		lw.lits, lw.pre, lw.window = prefilter(wa.Pattern)
		for _, lit := range lw.lits {
			w.lits = append(w.lits, watchLit{lit: lit, watch: i})
		}
		w.watches = append(w.watches, lw)
	}
	w.live = len(w.watches)
	w.cand = make([]int, len(w.watches))
	return w, nil
}

// prefilter finds what proposes candidate lines for pattern (see
// lineWatch): literals one of which every match holds, else the pattern
// with its assertions made empty, which matches wherever the pattern
// matches a line (and more); and the window of a pattern with one
// literal (literalWindow), else -1.
func prefilter(pattern string) (lits []literal, pre *regexp.Regexp, window int) {
	tree, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, nil, -1
	}
	if lits = requiredLiterals(tree); lits != nil {
		return lits, nil, literalWindow(tree, lits)
	}
	pre, err = regexp.Compile(withoutAssertions(tree).String())
	if err != nil {
		return nil, nil, -1
	}
	return nil, pre, -1
}

// literalWindow returns the most bytes a match of re can begin before the
// first byte of lits, its one case-sensitive literal, or -1 if that is
// not bounded or not known: re (without its captures) is the literal, or
// a concatenation in which it is the piece requiredLiterals chose and
// the pieces before it have a bounded width. A pattern that asserts the
// beginning of the text or a line (^, \A) has no window: from a place in
// a line, the pattern cannot tell it is not the beginning.
func literalWindow(re *syntax.Regexp, lits []literal) int {
	if len(lits) != 1 || lits[0].fold || asserts(re, syntax.OpBeginLine, syntax.OpBeginText) {
		return -1
	}
	// whole: the literal is all of the literal piece, not a run of it.
	whole := func(re *syntax.Regexp) bool {
		re = uncaptured(re)
		return re.Op == syntax.OpLiteral && re.Flags&syntax.FoldCase == 0 && string(re.Rune) == string(lits[0].b)
	}
	if whole(re) {
		return 0
	}
	re = uncaptured(re)
	if re.Op != syntax.OpConcat {
		return -1
	}
	width := 0
	for _, sub := range re.Sub {
		if got := requiredLiterals(sub); len(got) == 1 && bytes.Equal(got[0].b, lits[0].b) && !got[0].fold {
			if whole(sub) {
				return width
			}
			return -1
		}
		w := maxWidth(sub)
		if w < 0 || width+w > 1<<16 {
			return -1
		}
		width += w
	}
	return -1
}

func uncaptured(re *syntax.Regexp) *syntax.Regexp {
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	return re
}

// asserts reports whether re holds one of ops.
func asserts(re *syntax.Regexp, ops ...syntax.Op) bool {
	if slices.Contains(ops, re.Op) {
		return true
	}
	for _, sub := range re.Sub {
		if asserts(sub, ops...) {
			return true
		}
	}
	return false
}

// maxWidth returns the most bytes a match of re can have, or -1 if there
// is no bound (or it is over 1<<16).
func maxWidth(re *syntax.Regexp) int {
	const limit = 1 << 16
	switch re.Op {
	case syntax.OpNoMatch, syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine,
		syntax.OpBeginText, syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return 0
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return utf8.UTFMax * len(re.Rune)
		}
		return len(string(re.Rune))
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return utf8.UTFMax
	case syntax.OpCapture, syntax.OpQuest:
		return maxWidth(re.Sub[0])
	case syntax.OpRepeat:
		w := maxWidth(re.Sub[0])
		if w < 0 || re.Max < 0 || re.Max*w > limit {
			return -1
		}
		return re.Max * w
	case syntax.OpConcat, syntax.OpAlternate:
		n := 0
		for _, sub := range re.Sub {
			w := maxWidth(sub)
			if w < 0 {
				return -1
			}
			if re.Op == syntax.OpConcat {
				n += w
			} else {
				n = max(n, w)
			}
			if n > limit {
				return -1
			}
		}
		return n
	}
	return -1 // star, plus
}

// maxLiterals bounds the literals of a watch: each is compared wherever
// its anchor occurs, and may need an anchor (a pass over the output) of
// its own.
const maxLiterals = 4

// requiredLiterals returns literals, one of which every match of re
// contains (none empty or holding a newline, which no line has), or nil
// if it finds no such set of at most maxLiterals. Of a literal it takes
// the longest run the text must hold byte for byte: without U+FFFD (which
// an invalid byte matches), and, if it ignores case ((?i)), of ASCII runes
// whose every case is ASCII: not 'k' (the Kelvin sign is one of its
// cases) nor 's' (the long s).
func requiredLiterals(re *syntax.Regexp) []literal {
	switch re.Op {
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiterals(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiterals(re.Sub[0])
		}
	case syntax.OpLiteral:
		// The longest run of runes the text holds as they are: not
		// U+FFFD, which also matches a byte that is no UTF-8, nor a
		// newline; with (?i), ASCII runes whose every case is ASCII, in
		// lower case.
		// A run is copied once, when it ends, if it is the longest yet:
		// linear in the pattern.
		fold := re.Flags&syntax.FoldCase != 0
		var best, run []byte
		end := func() {
			if len(run) > len(best) {
				best = slices.Clone(run)
			}
			run = run[:0]
		}
		for _, r := range re.Rune {
			switch {
			case r == utf8.RuneError || r == '\n' || fold && !asciiFold(r):
				end()
			case fold:
				run = append(run, lowerASCII(byte(r)))
			default:
				run = utf8.AppendRune(run, r)
			}
		}
		end()
		if len(best) == 0 {
			return nil
		}
		return []literal{{b: best, fold: fold}}
	case syntax.OpConcat:
		// The piece whose shortest literal is longest searches best.
		var best []literal
		for _, sub := range re.Sub {
			if lits := requiredLiterals(sub); lits != nil && (best == nil || shortest(lits) > shortest(best)) {
				best = lits
			}
		}
		return best
	case syntax.OpAlternate:
		var all []literal
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

func shortest(lits []literal) int {
	n := len(lits[0].b)
	for _, l := range lits[1:] {
		n = min(n, len(l.b))
	}
	return n
}

// asciiFold reports whether r and every rune of its case orbit are ASCII:
// a literal ignoring case holds it as one byte.
func asciiFold(r rune) bool {
	if r >= utf8.RuneSelf {
		return false
	}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func isLetterASCII(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// equal reports whether b is l.
func (l literal) equal(b []byte) bool {
	if !l.fold {
		return bytes.Equal(b, l.b)
	}
	if len(b) != len(l.b) {
		return false
	}
	for i, c := range b {
		if lowerASCII(c) != l.b[i] {
			return false
		}
	}
	return true
}

// in reports whether line holds l.
func (l literal) in(line []byte) bool {
	if !l.fold {
		return bytes.Contains(line, l.b)
	}
	for i := 0; i+len(l.b) <= len(line); i++ {
		if l.equal(line[i : i+len(l.b)]) {
			return true
		}
	}
	return false
}

// coveredBy reports whether anchors on the bytes in set find l: one of its
// bytes is in set, in each case it may take in the text.
func (l literal) coveredBy(set *[256]bool) (off int, ok bool) {
	for i, c := range l.b {
		if set[c] && (!l.fold || !isLetterASCII(c) || set[c-'a'+'A']) {
			return i, true
		}
	}
	return 0, false
}

// The keys chooseAnchors weighs: a byte (its value), or both cases of an
// ASCII letter (256 + the letter's place in the alphabet).
const numKeys = 256 + 26

func keyIndex(c byte, pair bool) int {
	if pair {
		return 256 + int(c|0x20-'a')
	}
	return int(c)
}

// keysCovering calls add with every key (keyIndex; perhaps more than once)
// that, added to set, makes coveredBy(set) true, for l not covered by set
// alone: the keys holding a byte of l, and for a letter of l that ignores
// case, each key holding the case set lacks.
func (l literal) keysCovering(set *[256]bool, add func(k int)) {
	for _, c := range l.b {
		if !isLetterASCII(c) {
			add(keyIndex(c, false))
			continue
		}
		lower, upper := c|0x20, c&^0x20
		add(keyIndex(c, true)) // both cases
		switch {
		case !l.fold:
			add(keyIndex(c, false))
		case set[lower]:
			add(keyIndex(upper, false))
		case set[upper]:
			add(keyIndex(lower, false))
		}
	}
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
	w.timed = false
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
// partial grows with the lines seen, never to a size asked for.
func (w *eventWatch) keep(b []byte) {
	room := w.maxLine + 1 - len(w.partial)
	if len(b) > room {
		b, w.over = b[:room], true
	}
	w.partial = append(w.partial, b...)
}

// scanLines matches the lines of region, which ends with '\n'. The
// anchors and each live watch without literals propose their next
// candidate line; the earliest is matched by every watch, in the
// request's order. Only the candidate lines are split off the region.
func (w *eventWatch) scanLines(region []byte) {
	switch {
	case !w.chosen:
		w.chooseAnchors(region)
	case len(region) >= anchorSample && w.untilAnchors <= 0:
		w.chooseAnchors(region)
	case len(region) >= anchorSample:
		w.untilAnchors--
		fallthrough
	default:
		if w.prune {
			w.pruneAnchors()
		}
	}
	for k := range w.anchors {
		w.anchors[k].next = -1 // not looked for yet
	}
	for k := range w.cand {
		w.cand[k] = -1
	}
	for pos := 0; pos < len(region) && w.live > 0; {
		at := len(region)
		for k := range w.anchors {
			a := &w.anchors[k]
			if a.next < pos {
				a.next = w.nextLit(a, region, pos)
			}
			at = min(at, a.next)
		}
		for k := range w.watches {
			lw := &w.watches[k]
			if lw.done || lw.lits != nil {
				continue
			}
			if w.cand[k] < pos {
				w.cand[k] = lw.next(region, pos)
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

// nextLit returns where in region, at or after pos (a line's start), the
// next literal of a live watch that a holds begins, or len(region).
func (w *eventWatch) nextLit(a *anchor, region []byte, pos int) int {
	for i := pos; i < len(region); i++ {
		j := bytes.IndexByte(region[i:], a.c)
		if j < 0 {
			break
		}
		i += j
		for _, la := range a.lits {
			wl := &w.lits[la.lit]
			// A literal holds no '\n', so none begins before pos.
			s := i - la.off
			if s >= pos && s+len(wl.lit.b) <= len(region) && !w.watches[wl.watch].done &&
				wl.lit.equal(region[s:s+len(wl.lit.b)]) {
				return s
			}
		}
	}
	return len(region)
}

// chooseAnchors chooses the anchors of the literals of the live watches
// from region, greedily: the key that covers the most literals not yet
// covered for the least cost, a pass over the output and a stop at each
// occurrence in region for each byte not chosen yet. A key is a byte, or
// both cases of a letter of a literal that ignores case.
func (w *eventWatch) chooseAnchors(region []byte) {
	w.chosen, w.prune = true, false
	if len(region) >= anchorSample {
		w.untilAnchors = anchorEvery
	} else {
		w.untilAnchors = 0 // the first sample chooses again
	}
	w.anchors = w.anchors[:0]
	need := make([]int, 0, len(w.lits)) // literals not yet covered
	for i, wl := range w.lits {
		if !w.watches[wl.watch].done {
			need = append(need, i)
		}
	}
	var count [256]int
	for i := range count {
		count[i] = -1 // not counted yet
	}
	cost := func(c byte) int {
		if count[c] < 0 {
			count[c] = bytes.Count(region, []byte{c})
		}
		return len(region) + anchorHit*count[c] + 1
	}
	var chosen [256]bool
	var at [256]int // the index in w.anchors of a chosen byte
	var covers [numKeys]int
	var stamp [numKeys]int // 1 + the literal that last counted the key
	for len(need) > 0 {
		// covers[k]: the literals not yet covered that key k would cover,
		// with the bytes chosen so far; each literal counts a key once.
		covers, stamp = [numKeys]int{}, [numKeys]int{}
		for _, i := range need {
			w.lits[i].lit.keysCovering(&chosen, func(k int) {
				if stamp[k] != i+1 {
					stamp[k] = i + 1
					covers[k]++
				}
			})
		}
		var best [2]byte
		bestCovers, bestCost := 0, 0
		var looked [256][2]bool
		for _, i := range need {
			lit := w.lits[i].lit
			for _, c := range lit.b {
				key, pair := [2]byte{c, c}, 0
				if lit.fold && isLetterASCII(c) {
					key, pair = [2]byte{c, c - 'a' + 'A'}, 1
				}
				if looked[c][pair] {
					continue
				}
				looked[c][pair] = true
				keyCost := 0
				for _, k := range key[:1+pair] {
					if !chosen[k] {
						keyCost += cost(k)
					}
				}
				n := covers[keyIndex(c, pair == 1)]
				if n > 0 && (bestCovers == 0 || n*bestCost > bestCovers*keyCost) {
					best, bestCovers, bestCost = key, n, keyCost
				}
			}
		}
		if bestCovers == 0 {
			break // cannot be: the bytes of a literal cover it
		}
		for _, c := range best {
			if !chosen[c] {
				chosen[c], at[c] = true, len(w.anchors)
				w.anchors = append(w.anchors, anchor{c: c})
			}
		}
		rest := need[:0]
		for _, i := range need {
			lit := w.lits[i].lit
			off, ok := lit.coveredBy(&chosen)
			if !ok {
				rest = append(rest, i)
				continue
			}
			c := lit.b[off]
			w.anchors[at[c]].lits = append(w.anchors[at[c]].lits, litAt{lit: i, off: off})
			if lit.fold && isLetterASCII(c) {
				u := c - 'a' + 'A'
				w.anchors[at[u]].lits = append(w.anchors[at[u]].lits, litAt{lit: i, off: off})
			}
		}
		need = rest
	}
}

// pruneAnchors takes the literals of watches that are done out of the
// anchors, and drops the anchors left with none.
func (w *eventWatch) pruneAnchors() {
	w.prune = false
	kept := w.anchors[:0]
	for _, a := range w.anchors {
		lits := a.lits[:0]
		for _, la := range a.lits {
			if !w.watches[w.lits[la.lit].watch].done {
				lits = append(lits, la)
			}
		}
		if a.lits = lits; len(lits) > 0 {
			kept = append(kept, a)
		}
	}
	clear(w.anchors[len(kept):])
	w.anchors = kept
}

// next returns where in region, at or after pos (a line's start), the
// next line that may match begins to match, or len(region) if none can;
// for a watch without literals.
func (lw *lineWatch) next(region []byte, pos int) int {
	if lw.pre == nil {
		return pos
	}
	if loc := lw.pre.FindIndex(region[pos:]); loc != nil {
		return pos + loc[0]
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
		if lw.done || !lw.matches(line) {
			continue
		}
		if text == "" {
			text = string(line)
		}
		if lw.once {
			lw.done = true
			w.live--
			if lw.lits != nil {
				w.prune = true // its literals need no anchor now
			}
		}
		p := w.p
		if !w.timed {
			w.now, w.timed = p.m.clock.Now("events", "matched"), true
		}
		p.m.events.add(p, eventSlot{time: w.now, info: p.info, kind: codeMatched, more: &eventMore{watch: lw.name, line: text}})
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
		w.timed = false
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

// of returns w as the watch of p (nil for nil).
func (w *eventWatch) of(p *Process) *eventWatch {
	if w != nil {
		w.p = p
	}
	return w
}

// matches reports whether re matches line. The regexp, far slower, runs
// only if line holds one of lw's literals (if it has any), and with a
// window only on the part of line where a match can begin: from window
// bytes before the literal's first place, or the nearest place before
// that where re sees what it would see in the whole line (a character's
// first byte, after a byte that is not a word character: \b and \B look
// back; literalWindow leaves out the patterns that assert a beginning).
func (lw *lineWatch) matches(line []byte) bool {
	if lw.lits == nil {
		return lw.re.Match(line)
	}
	if lw.window < 0 {
		for _, lit := range lw.lits {
			if lit.in(line) {
				return lw.re.Match(line)
			}
		}
		return false
	}
	at := bytes.Index(line, lw.lits[0].b)
	if at < 0 {
		return false
	}
	from := max(0, at-lw.window)
	for from > 0 && (!utf8.RuneStart(line[from]) || isWordByte(line[from-1])) {
		from--
	}
	return lw.re.Match(line[from:])
}

// isWordByte reports whether c is a word character for \b (ASCII).
func isWordByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || isLetterASCII(c)
}
