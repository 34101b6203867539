package proc

import (
	"context"
	"sync"
	"time"

	"golang.org/x/xerrors"
)

// Events (design section 19): one stream per Manager that says when a
// record started, printed a line a watch waits for, started to wait for
// input, opened a listener, became final or was dropped. It is read with a
// cursor, like output: Events returns what came after the caller's last
// Seq, WaitEvent sleeps until something did. The log is a bounded ring
// (eventLog). What a request asks to be told (line watches, activity) is
// in watch.go.

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
	// EventSkipped: the watch named Watch, which has no literal and is
	// matched beside the pump, fell a backlog behind the output and did
	// not match Skipped lines: a match may have been missed.
	EventSkipped EventKind = "skipped"
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
	// Skipped is the number of lines the watch did not match (skipped).
	Skipped int64 `json:"skipped,omitempty"`
}

// Events returns the events after cursor (the Seq of the last event the
// caller has seen; 0: from the first), at most max of them (max <= 0: all
// there are), the cursor to pass next time, and lost: how many events
// after cursor are no longer kept (Options.EventHistory) and so were
// skipped, never negative. A consumer that lost events learns the state
// of the records from List. A negative cursor means "now": Events(-1, 0)
// returns no events, the newest Seq as next (0 when there is none yet)
// and 0 lost, so a consumer can start from the present without copying
// the history. A cursor beyond the newest Seq returns no events and
// itself as next. It is safe for concurrent use, and works after Close.
func (m *Manager) Events(cursor int64, max int) (evs []Event, next int64, lost int64) {
	return m.events.read(cursor, max, nil)
}

// WaitEvent blocks until an event after cursor exists (nil, at once if
// there is one already, even after Close; a negative cursor is the newest
// Seq at the call, so WaitEvent(ctx, -1) waits for the next event), until ctx ends (an error
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
// A negative cursor is "now", the Manager's newest Seq, as there.
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
	more *eventMore   // nil unless matched, listening or skipped
	kind eventCode
}

// eventMore is what a matched, listening or skipped event carries
// beyond its record.
type eventMore struct {
	watch    string
	line     string
	listener *Listener
	skipped  int64
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
	codeSkipped
)

// eventKinds names each eventCode.
var eventKinds = [...]EventKind{
	codeStarted:         EventStarted,
	codeFinal:           EventFinal,
	codeMatched:         EventMatched,
	codeWaitingForInput: EventWaitingForInput,
	codeListening:       EventListening,
	codeRemoved:         EventRemoved,
	codeSkipped:         EventSkipped,
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
		ev.Watch, ev.Line, ev.Listener, ev.Skipped = s.more.watch, s.more.line, s.more.listener, s.more.skipped
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
	if cursor < 0 {
		cursor = l.last // now
	}
	if cursor >= l.last {
		return nil, cursor, 0
	}
	next = cursor
	// cursor < l.last: cursor+1 cannot overflow, and oldest-1 >= 0.
	from := l.oldestLocked()
	if from-1 > cursor {
		lost = from - 1 - cursor
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
	if cursor < 0 {
		l.mu.Lock()
		cursor = l.last // now
		l.mu.Unlock()
	}
	scanned := cursor // a Scope's waiter looks at each event once
	for {
		l.mu.Lock()
		found := false
		if l.oldestLocked()-1 > scanned && l.last > cursor {
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
