package proc

import (
	"errors"
	"os"
	"slices"
	"sync/atomic"
	"time"
)

// Follower help (design section 10). A follower is a reader that reaches
// the end of the stream and waits there (WaitOutput, then ReadSince or
// ReadSinceInto from the cursor it waited at). The pump of a Process may
// help it keep up: while a follower waits or holds a lease, the buffer
// keeps the bytes it has not read, up to followWindow, beyond head and
// tail (the follow window, which only reads from a lease's cursor see),
// and the pump does not overwrite bytes a woken follower has not read yet
// (room), for as long as it keeps up: a follower that does not read up to
// where the stream ended at its wake within followBound loses the help
// until it catches up (hold). Write itself never waits; only the pump obeys these hooks
// (pump.writeFollowed).
//
// Every hand-off between the pump and a follower costs far more than the
// bytes it moves: with two Ps, a goroutine made runnable wakes an idle
// thread of the runtime, which takes a CPU from the child (issue 22:
// 8,000 hand-offs of 16 KiB per 64 MiB slowed the child 1.3-1.5x; the
// same loop with GOMAXPROCS=1 cost 1.2x, and 1.05x with 64 KiB ones).
// A follower that runs while the pump runs does the same. So hand-offs
// are few and the two take turns: the pump leaves a waiting follower
// asleep while the window takes its bytes (writeQuiet), and wakes it
// when it must wait for room anyway, before a tee's Write, at the end of
// its pipe, or followLatency after the first byte it left unannounced
// (a read deadline: pump.armWake), whichever comes first; and a follower
// may take a wake's bytes in several reads of at least a tail's worth.
//
// Changes to the turns that measured no better (BenchmarkFollowCost's
// 64 KiB follower, each against this code in the same process, ops
// alternating, 2026-11-28, load 0.2-2.7): signalling room only once the
// follower caught up rather than at each read (x-64KiB 1.04-1.22x against
// 1.06-1.20x); a follower yielding (Gosched) after a read that freed room
// for a waiting pump (1.51-1.58x against 1.32-1.50x, and a pair of
// followers lost 35-39%); waking followers when the pump found its pipe
// empty (FIONREAD) with 512 or 768 KiB held for them (1.19-1.29x and
// 1.16-1.20x against 1.17-1.19x); growing the pipe at the first wait for
// room (1.24-1.27x against 1.14-1.18x: the child's CPU rose 25 to 31 ms
// per 64 MiB, its run-queue wait 7.5 to 14 ms); waking waiting followers
// once half a window was unread by them (BenchmarkFollowHandoffFloor's
// best turn without the library; 1.31-1.58x against 1.15-1.25x in three
// pairs of runs, load 0.8-1.6, 2026-11-28 night). What is left is a pump
// waiting for room about 50 us a wake (3.3 ms per 64 MiB) and the child
// blocked on its full pipe meanwhile (5-6 ms), while the total CPU
// stays within about 2% of the capture alone (perf): the cost is mostly
// the hand-off's latency on two shared virtual CPUs, not work.

// followBound is how long a follower has, from the write that woke it,
// to reach the end of the stream (a cursor read whose Next is End) before
// it loses the pump's help until it catches up (design section 10). It is
// long next to a woken goroutine's scheduling delay on a loaded machine
// and short next to anything a person notices; it is also the most one
// wake of a follower can hold the pump, and so the child. A follower that
// reads each wake's bytes at once meets it; one that stops reading does
// not, and one that reads them in pieces loses the help at once.
const followBound = 5 * time.Millisecond

// followState is a buffer's flow control for followers (design section
// 10), which only the pump obeys (Write never waits). caughtUp is the Next
// of the last cursor read that reached the end and could return at least
// followMinRead bytes, or the tail's size if that is less; -1 before the
// first. A WaitOutput at that cursor is a follower's. A reader of smaller
// pieces is never helped: with the default tail the first read of its wake
// would end its lease anyway (followReadLocked), and its wait held the
// pump while the follow window filled for it (BenchmarkFollowCost, 10 B
// and 4 KiB readers at once: 1.03x the child alone against 1.14x in the
// same run). waiting holds the followers blocked in WaitOutput; the wake
// that ends their wait turns them into leases (room counts them as leases
// already: the writes before it must not drop their bytes either). A
// lease is held from that wake until the follower waits again: each
// cursor read from a lease's cursor that reaches the end, or that could
// return a tail's worth or more, moves it to the read's Next; one that
// could return less (the follower reads the wake's bytes in pieces) ends
// it; a read from the start that lost nothing and returned the bytes from
// a lease's cursor on moves that lease as well (a follower that reads
// everything from the start each time), but never ends it. The pump does
// not drop a byte at or after a lease's cursor (room) until the lease
// moves or ends, the pump is stopped, or followBound has passed since the
// lease's follower was woken without it reading up to where the stream
// ended then (hold): the lease is then dropped. A follower without a lease
// is helped again only once a read of it reaches the end. roomc gets a
// token whenever a lease moves or goes. A buffer's mu guards it.
//
// Leases carry no owner: the API's reads and waits name a cursor, not a
// reader. What tells readers at one cursor apart is how much their reads
// could return (readClass, lease.class): a read takes the lease at its
// cursor of the largest class no larger than its own, and never one a
// read of a larger class moved, so that a 4 KiB reader at a 64 KiB
// follower's cursor neither ends nor moves its lease (issue 22: the
// follower lost half of a 50 MB/s stream), nor does a 16 KiB reader in
// pieces beside a 64 KiB follower of a 64 KiB tail. And each wait makes
// one entry, of the class of the waiter's reads as far as the buffer can
// tell (claimLocked): a lease a read moved to its cursor that no wait
// claimed yet (the waiter's own, most likely: lease.waited), else a class
// that a read that reached the end there without a lease left in caught
// (a follower's first read, one that lost the help, or a small reader's),
// the smallest first, else, at caughtUp, readSmall. So the leases at a
// cursor, once its readers waited, have the classes of their reads,
// whoever waits first, and each read takes its own class's; a reader that
// never waits (a poller) leaves counts in caught that no wait needs,
// rather than a lease that holds the pump (found in review: a 64 KiB
// poller beside a follower slowed a flood 4x while a wait took its class
// besides its own lease). The price: a follower that goes on in reads of
// a smaller class than before leaves its lease behind, which holds the
// pump until its bound passes (hold), and reads without help meanwhile.
// A poller whose reads reach the end at a follower's cursor with the
// follower's class may read there before it: the read then splits the
// lease (splitLocked), so that whichever reads later still finds one, if
// it reads within spareHold when it is the follower.
type followState struct {
	caughtUp int64
	// caught counts, per class, the reads that reached the end at
	// caughtUp with no lease, not yet taken by a wait there (at most
	// caughtMax each).
	caught [readTail + 1]int8
	// before is caughtUp and caught as they were when a read last
	// reached the end further on, less the readers counted there that
	// read on from there since (a copy nobody reads holds the pump for
	// spareHold: TestNoCopyForPollerGone): a split there still leaves
	// the others a copy each (splitLocked). Only the last such cursor is
	// kept: keeping four (with copies for waiting followers too) paced a
	// flood beside two pollers every 200 us through the copies they
	// moved, 3x slower in 14 of 15 rounds.
	before caughtAt
	// twins numbers the splits (splitLocked, lease.twin).
	twins   int32
	waiting []lease // cursor and class only
	leases  []lease
	roomc   chan struct{}
	// window is the follow window, a ring holding the newest windowLen
	// bytes of the stream from window[windowPos]; it is filled by writes
	// while a follower waits or holds a lease, and freed by the first
	// write with none (keepLocked).
	window    []byte
	windowPos int
	windowLen int
	// windowMax is the window's size: followWindow, or less in a test.
	windowMax int
	// pieces paces tight loops of reads in pieces (readPacedLocked); it
	// is used outside the lock, and so is safe for concurrent use.
	pieces pacer
}

// caughtAt is a cursor and the counts caught had there (followState.before).
type caughtAt struct {
	cursor int64
	n      [readTail + 1]int8
}

// newFollowState returns the flow control of a buffer a read just
// reached the end of, or read in pieces; no cursor is caught up yet.
func newFollowState() *followState {
	return &followState{caughtUp: -1, before: caughtAt{cursor: -1}, windowMax: followWindow}
}

// lease is a woken follower's claim on the bytes from cursor on. woken is
// when the pump woke it, zero until the pump stamps it (wakeFollowers,
// hold); a read that reaches the end clears it, so that the next wake
// starts a new bound.
//
// target is the end of the stream when woken was stamped: the follower
// keeps up if it reads up to there within followBound, however much the
// pump wrote meanwhile (the follow window lets it run that far ahead); a
// read that does clears woken, and the next stamp starts a new bound.
type lease struct {
	cursor int64
	woken  time.Time
	target int64
	// class is that of the read that moved the lease last, or of the
	// read whose entry in caught its wait took; readSmall for one a wait
	// made without such an entry. Only a read of that class or a larger
	// one takes it (leaseAt). Kept through the follower's waits
	// (WaitOutput, wakeLocked).
	class readClass
	// waited says a wait claimed the lease since a read last moved it
	// (WaitOutput): a wait at its cursor then makes an entry of its own.
	waited bool
	// spare says the lease is the copy a split left for the reader that
	// did not read first, not moved or claimed since (splitLocked): it
	// holds the pump for spareHold at most, from spareSince, when a wake
	// or hold first found it (dropStaleSparesLocked; zero before).
	spare      bool
	spareSince time.Time
	// twin is the number of the split that made the lease or its copy
	// (splitLocked), zero for none: a wait that claims one of the two
	// ends the other's help (claimLocked). orphan marks a spare whose
	// twin a wait claimed: the read that moves it to the end ends it.
	twin   int32
	orphan bool
}

// spareHold is the longest a spare lease (splitLocked) holds the pump,
// from the first wake or hold after the split (spareSince): a woken
// follower reads within it, and a poller slower than that does not pace
// the pump (a spare that held it for followBound, the poller's until its
// next poll, ran a 64 MiB flood beside a 2 ms poller 4x slower).
const spareHold = followLatency

// readClass is how much a cursor read could return, as far as the
// leases of followers at one cursor tell their readers apart
// (followState).
type readClass int8

const (
	// readSmall: fewer than followMinRead bytes, or the tail's size if
	// less; its reader is never a follower.
	readSmall readClass = iota
	// readPieces: less than the tail holds, at least readSmall's bound
	// (a tail larger than followMinRead); its reader reads a wake's
	// bytes in pieces.
	readPieces
	// readTail: a tail's worth or more.
	readTail
)

// readClassLocked returns the class of a read that could return limit
// bytes at most.
func (b *HeadTailBuffer) readClassLocked(limit int) readClass {
	switch {
	case limit >= b.tailMax:
		return readTail
	case limit >= followMinRead:
		return readPieces
	}
	return readSmall
}

// caughtMax is how many reads of one class followState.caught counts at
// most: more followers than that at one cursor wait there as readSmall
// until their next reads. It bounds what readers that reach the end
// without ever waiting (a poller reading from the start) leave there.
const caughtMax = 8

// followWindow is how many of the newest bytes a buffer keeps at most
// for its followers, beyond head and tail, while one waits or holds a
// lease: how far the pump may run ahead of a follower it helps, and so
// how few hand-offs a flood takes (issue 22, BenchmarkFollowCost with a
// 64 KiB follower: 1.2-1.3x the child's time alone with 256 KiB, 1.1-1.2x
// with 1 MiB). Larger measured worse (x-64KiB in the same runs, load
// 1.2-1.8, 2026-11-28: 2 MiB 1.07-1.20x, 4 MiB 1.26-1.66x, against
// 0.99-1.19x with 1 MiB): each wake's catch-up then holds the pump longer
// than the child's 64 KiB pipe lasts (the child blocked 9-15 ms per 64 MiB
// with 4 MiB, 5-6 ms with 1 MiB), and with the pipe grown as well 4 MiB
// measured 1.29-1.49x. Smaller measured no better either: 512 KiB
// 1.11-1.30x against 1.06-1.20x (same process, ops alternating). Its
// storage grows only as far as followers lag (keepLocked), and Finish
// frees it.
const followWindow = 1 << 20

// followLatency is the longest the pump leaves a waiting follower
// unwoken after writing bytes past its cursor (pump.armWake): short next
// to anything a person notices, long next to the pause of a pump that
// read a full pipe empty, so that a child that writes without pause is
// followed in a few wakes per window, not one per pipe read.
const followLatency = time.Millisecond

// followHold is how many writes in a row without a cursor read or wait
// it takes before a buffer counts as no longer followed. A follower woken
// by one write may not have read yet when the next comes.
const followHold = 8

// followReadLocked moves a follower's lease along with its read from
// cursor, which returned c and could return at most limit bytes, and
// notes where a read reached the end.
func (b *HeadTailBuffer) followReadLocked(cursor int64, c Chunk, limit int) {
	if b.flow == nil {
		if c.Next < c.End {
			return
		}
		b.flow = newFollowState()
	}
	f := b.flow
	class := b.readClassLocked(limit)
	i := f.leaseReadLocked(cursor, c, class)
	if i >= 0 && f.leases[i].orphan && c.Next != cursor && c.Next >= c.End {
		// The spare whose twin a wait claimed served its reader, a
		// poller most likely (claimLocked), to the end: it goes, and the
		// read counts in caught below as one without a lease. One that
		// stops short keeps it, orphan, until it reaches the end (a
		// follower reading a wake's bytes on, if a small reader's wait
		// claimed the poller's twin) or its bound passes.
		f.leases = slices.Delete(f.leases, i, i+1)
		b.signalRoomLocked()
		i = -1
	}
	if i >= 0 {
		f.splitLocked(i, cursor, c)
		l := &f.leases[i]
		switch {
		case c.Next >= c.End:
			// Caught up: the bound starts anew at the next wake.
			l.cursor, l.woken, l.class, l.waited = c.Next, time.Time{}, class, false
			l.spare = l.spare && c.Next == cursor
		case class == readTail:
			// A read of a tail's worth or more: the wake's bytes come
			// in a few such reads (the follow window holds more than
			// one), within the bound of the same wake; once it has
			// read them, the bytes written since start a new one.
			l.cursor, l.class, l.waited, l.spare = c.Next, class, false, false
			if !l.woken.IsZero() && c.Next >= l.target {
				l.woken = time.Time{}
			}
		case l.cursor != cursor:
			// Another reader's read in pieces: the lease stays, and the
			// pump has no more room (no wake for nothing).
			return
		default:
			// It reads the wake's bytes in pieces: helping it would
			// run the child at its pace. It is helped again once a
			// read of it reaches the end.
			f.leases = append(f.leases[:i], f.leases[i+1:]...)
		}
		b.signalRoomLocked()
	}
	if n := &f.before.n[class]; i < 0 && c.Next != cursor && cursor == f.before.cursor && *n > 0 {
		*n-- // a reader counted there read on
	}
	if c.Next < c.End || class == readSmall && c.Next != f.caughtUp {
		return
	}
	if c.Next != f.caughtUp {
		f.before = caughtAt{cursor: f.caughtUp, n: f.caught}
		if n := &f.before.n[class]; i < 0 && cursor == f.caughtUp && *n > 0 {
			*n-- // this reader read on from there
		}
		f.caughtUp, f.caught = c.Next, [readTail + 1]int8{}
	}
	// A reader reached the end without a lease: its wait takes this
	// (a small reader's too, so that it does not take a follower's). A
	// read again from the end adds its class once at most.
	if n := &f.caught[class]; i < 0 && *n < caughtMax && (c.Next != cursor || *n == 0) {
		*n++
	}
}

// splitLocked leaves a copy of the lease at index i, which a read from
// cursor that returned c is about to move, at cursor for each other
// reader there, when the read may not be its follower's: readers of the
// lease's class that never waited reached the end at cursor too, with no
// lease (caught counts them, or before once a read reached the end
// further on), so that several readers of one class read from cursor
// next: the follower, woken there or reading a wake's bytes on from
// there, and those readers. With one copy for all of them, a second
// poller took the copy, and the follower lost 0.4 MB every three rounds
// of 64 KiB bursts every millisecond; with no count kept once caughtUp
// moved on, a poller catching up from further back let the other take the
// lease whole (TestSplitLeavesEachPollerACopy,
// TestSplitForPollerLeftBehind; found with a model of the pump,
// TestFollowerKeepsUpBesideOthers). Leases carry no owner, so the read
// may be that reader's, a poller's, and the follower would find no lease
// at its cursor and lose what the pump overwrote (found in review:
// 13-41 MB of a 400 MB flood beside a 64 KiB poller every 200 us; and a
// 64 KiB poller every 200 us of 64 KiB bursts took the lease between a
// follower's two reads of one wake). A copy has the lease's bound
// (woken, target), and is spare until a read moves it or a wait claims
// it: it holds the pump for spareHold at most, so that a poller slower
// than the follower does not pace the pump with it (the copy is the
// poller's if the follower read first). The copies of one split are
// stamped by the same wake or hold, so together they too hold the pump
// spareHold at most. So the follower finds a lease whoever reads first,
// if it reads within spareHold when it reads later. A copy a read moved
// is an ordinary lease until a wait claims its twin (endTwinLocked). A
// read that returns nothing moves no bytes and splits nothing.
//
// The price, and what measured worse (the review's flood of 64 MiB, a
// 64 KiB follower beside a 64 KiB poller, alternating with the code
// before, 2026-11-28 night, load 0.6-2.5): beside a poller every 2 ms
// the flood took 60-76 ms against 41-59 ms in the rounds the poller did
// not pace (a quarter of them it paces, as before: it keeps a lease, its
// reads and the follower's taking either lease at their shared cursor),
// the spare held for the poller at the follower's wakes (spareHold of
// 250 us measured the same). A spare that does not hold the pump lost
// the follower 35-67 MB of 192 MB beside a poller every 200 us (the pump
// overwrote the window before the follower read); one that holds it for
// followBound ran the flood 4x slower beside a 2 ms poller in 8 of 9
// rounds; loosening the spare when the first reader waits (it was most
// likely no poller) lost 2-15 MB beside a 4 KiB reader as well, whose
// wait at the same cursor claims the moved copy too. Dropping at a wake
// the moved copy no wait claimed, or the lease no wait claimed at a woken
// follower's cursor, ended the poller's pacing but dropped the lease of
// a follower between its read and its wait when another reader's wake
// came first (found in review).
func (f *followState) splitLocked(i int, cursor int64, c Chunk) {
	l := f.leases[i]
	if l.cursor != cursor || c.Next == cursor {
		return
	}
	var others *int8
	switch cursor {
	case f.caughtUp:
		others = &f.caught[l.class]
	case f.before.cursor:
		others = &f.before.n[l.class]
	default:
		return
	}
	if *others == 0 {
		return
	}
	// A copy split again keeps its number, so that a claim of its old
	// partner still ends it (TestResplitKeepsTwin: renumbered, the
	// poller's copy outlived the follower's claim, an ordinary lease
	// holding the pump for followBound at each wake; found in review).
	if l.twin == 0 {
		// Numbers wrap past 0, which means none; a lease lives
		// milliseconds, so a number used again is long gone.
		if f.twins++; f.twins <= 0 {
			f.twins = 1
		}
		l.twin = f.twins
	}
	f.leases[i].twin = l.twin
	l.spare, l.spareSince = true, time.Time{}
	for ; *others > 0; *others-- {
		f.leases = append(f.leases, l)
	}
}

// leaseReadLocked returns the index of the lease a cursor read from
// cursor that returned c, of a reader of class (followState), reads for,
// or -1: a lease at cursor (the follower's own read, leaseAt), or else,
// for a read from the start that lost nothing (a follower that reads
// everything from the start each time), one the read passed over. Any
// other reader's read leaves a lease alone, even one that returned the
// lease's bytes: the follower has not read them (a reader that skipped to
// a lease's cursor, Lost, moved it, and the follower lost the window's
// worth). A follower's own lease comes first: followers at one cursor
// hold a lease each, and a read of one of them must not move another's,
// which then holds the pump until its bound passes (issue 22).
func (f *followState) leaseReadLocked(cursor int64, c Chunk, class readClass) int {
	if at := leaseAt(f.leases, cursor, class); at >= 0 || cursor != 0 || c.Lost != 0 {
		return at
	}
	for i, l := range f.leases {
		if l.cursor < c.Next && l.class <= class {
			return i
		}
	}
	return -1
}

// leaseAt returns the index of the entry at cursor in ls that a reader of
// class takes: one of the largest class no larger than class (its own,
// when its class is among them), or -1.
func leaseAt(ls []lease, cursor int64, class readClass) int {
	at := -1
	for i, l := range ls {
		if l.cursor == cursor && l.class <= class && (at < 0 || l.class > ls[at].class) {
			at = i
		}
	}
	return at
}

// followMinRead is the least a read that reaches the end must be able to
// return for its reader's next wait to be a follower's, unless the tail
// holds less (design section 10): a reader of smaller pieces is never
// helped. It is the default tail, so that with a larger tail a follower
// of 64 KiB is helped as before.
const followMinRead = DefaultTailBytes

// readTarget returns where the pump reads its next bytes, given its read
// buffer buf, and how many bytes it should read at once (size, at most
// len(buf)): all of buf, unless the stream is followed (a cursor read
// reached the end, or a reader waited, within the last followHold writes)
// by no follower the follow window serves, in which case no more than the
// tail holds. A follower woken by one such write can then read all of it
// before the next one overwrites it, where a 64 KiB read into a 16 KiB
// tail would drop three quarters of it before any reader could look.
//
// While the window serves a follower and has minWindowRead bytes of
// contiguous free storage, the returned slice p is that free storage
// (at most size bytes), not buf: the pump reads the pipe straight into the
// window, where the follower reads it, and keepLocked, finding the bytes
// already in place, copies only what head and tail keep of them. Only the
// pump writes the window's storage and no reader sees its free part, so
// the pump fills it without the lock; a window freed or moved meanwhile
// (by the pump's own writes) leaves the bytes in p, which keepLocked then
// copies as any others. Otherwise p is buf[:size].
func (b *HeadTailBuffer) readTarget(buf []byte) (p []byte, size int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.followed == 0 && !b.read && b.waitc == nil || b.flow.helpingLocked() {
		size = len(buf)
	} else {
		size = min(len(buf), b.tailMax)
	}
	if f := b.flow; f.helpingLocked() && !b.finished {
		if free := f.freeLocked(b.total); len(free) > 0 && len(free) >= min(minWindowRead, f.windowMax/4) {
			return free[:min(len(free), size)], size
		}
	}
	return buf[:size], size
}

// minWindowRead is the least contiguous free storage of the follow window
// the pump reads into (readTarget), or a quarter of the window if that is
// less (a test's); with less it reads into its own buffer, so that the
// ring's end does not cut its reads short.
const minWindowRead = 16 << 10

// freeLocked drops the window's bytes from before every follower's cursor
// (no follower reads them; keepLocked would at the next write) and returns
// the contiguous free storage after the window's newest byte; total is
// the stream's length.
func (f *followState) freeLocked(total int64) []byte {
	if len(f.window) == 0 {
		return nil
	}
	f.dropLocked(f.windowLen - int(min(int64(f.windowLen), total-f.oldestLocked(total))))
	switch f.windowLen {
	case 0:
		f.windowPos = 0 // all of it in one piece
	case len(f.window):
		return nil
	}
	w := (f.windowPos + f.windowLen) % len(f.window)
	if w < f.windowPos {
		return f.window[w:f.windowPos]
	}
	return f.window[w:]
}

// oldestLocked returns the cursor of the follower furthest behind, or
// end when none is before it.
func (f *followState) oldestLocked(end int64) int64 {
	for _, l := range f.leases {
		end = min(end, l.cursor)
	}
	for _, w := range f.waiting {
		end = min(end, w.cursor)
	}
	return end
}

// helpingLocked reports whether a follower waits or holds a lease: the
// follow window keeps what the pump writes.
func (f *followState) helpingLocked() bool {
	return f != nil && len(f.leases)+len(f.waiting) > 0
}

// keepLocked adds p, just written (total counts it), to the follow window
// while a follower waits or holds a lease, and frees the window once none
// does. The window keeps no byte before the oldest follower's
// cursor, and its storage grows (doubling, to windowMax at most) only as
// far as followers lag: one that reads each write at once needs about a
// pump read of it.
func (f *followState) keepLocked(p []byte, total int64) {
	if !f.helpingLocked() || f.windowMax == 0 {
		f.window, f.windowPos, f.windowLen = nil, 0, 0
		return
	}
	before := total - int64(len(p))
	// What the window holds from before oldest is no follower's.
	f.dropLocked(f.windowLen - int(min(int64(f.windowLen), before-f.oldestLocked(before))))
	if need := min(f.windowLen+len(p), f.windowMax); need > len(f.window) {
		f.resizeLocked(min(max(2*len(f.window), need), f.windowMax))
	}
	w := (f.windowPos + f.windowLen) % len(f.window)
	if f.windowLen+len(p) <= len(f.window) && &p[0] == &f.window[w] {
		// The pump read p into the window's free storage (readTarget).
		f.windowLen += len(p)
		return
	}
	if len(p) >= len(f.window) {
		copy(f.window, p[len(p)-len(f.window):])
		f.windowPos, f.windowLen = 0, len(f.window)
		return
	}
	k := copy(f.window[w:], p)
	copy(f.window, p[k:])
	f.windowLen += len(p)
	if over := f.windowLen - len(f.window); over > 0 {
		f.dropLocked(over)
	}
}

// dropLocked drops the window's n oldest bytes.
func (f *followState) dropLocked(n int) {
	if n <= 0 {
		return
	}
	f.windowPos = (f.windowPos + n) % len(f.window)
	f.windowLen -= n
}

// resizeLocked moves the window into new storage of size bytes, at least
// windowLen.
func (f *followState) resizeLocked(size int) {
	w := make([]byte, size)
	if f.windowLen > 0 {
		k := copy(w, f.window[f.windowPos:min(f.windowPos+f.windowLen, len(f.window))])
		copy(w[k:], f.window[:f.windowLen-k])
	}
	f.window, f.windowPos = w, 0
}

// windowHoldsLocked reports whether a read from cursor is served from the
// follow window: cursor is a lease's, and the window holds the bytes from
// cursor to the end (total).
func (b *HeadTailBuffer) windowHoldsLocked(cursor int64) bool {
	f := b.flow
	return f != nil && f.windowLen > 0 && cursor < b.total &&
		cursor >= b.total-int64(f.windowLen) && f.indexLease(cursor) >= 0
}

// copyWindowLocked fills dst with the window's bytes from offset from,
// which the window holds with len(dst) bytes after it.
func (b *HeadTailBuffer) copyWindowLocked(dst []byte, from int64) {
	f := b.flow
	k := copy(dst, f.window[b.windowIndexLocked(from):])
	copy(dst[k:], f.window)
}

// windowIndexLocked returns where in the follow window's ring the stream
// byte at off is, which the window must hold.
func (b *HeadTailBuffer) windowIndexLocked(off int64) int {
	f := b.flow
	return (f.windowPos + int(off-(b.total-int64(f.windowLen)))) % len(f.window)
}

// windowByteLocked returns the stream byte at off and whether the follow
// window holds it.
func (b *HeadTailBuffer) windowByteLocked(off int64) (byte, bool) {
	f := b.flow
	if f == nil || off < b.total-int64(f.windowLen) || off >= b.total {
		return 0, false
	}
	return f.window[b.windowIndexLocked(off)], true
}

// room returns how many of the next n bytes the pump can write without
// dropping a byte at or after a lease's cursor.
func (b *HeadTailBuffer) room(n int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.roomLocked(n)
}

// roomLocked is room's count.
func (b *HeadTailBuffer) roomLocked(n int) int {
	f := b.flow
	if f == nil || b.finished {
		return n
	}
	k := int64(n)
	// Once the head is full, a write of k bytes drops what is left of
	// [headMax, total+k-tailMax) from the tail, and what is left of
	// [0, total+k-followWindow) from the follow window, which holds the
	// bytes from c on if it holds c (a waiting follower's c is total).
	windowStart := b.total - int64(f.windowLen)
	limit := func(c int64) {
		kept := max(c, int64(b.headMax)) + int64(b.tailMax)
		if c >= windowStart {
			kept = max(kept, c+int64(f.windowMax))
		}
		k = min(k, kept-b.total)
	}
	for _, l := range f.leases {
		limit(l.cursor)
	}
	// A waiting follower counts too: this write wakes it, with a lease.
	for _, w := range f.waiting {
		limit(w.cursor)
	}
	return int(max(k, 0))
}

// wakeFollowers wakes the readers that writeQuiet left waiting, and gives
// the leases of the followers among them the time now (stampLocked): the
// bound of each starts with its wake.
func (b *HeadTailBuffer) wakeFollowers(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.wakeLocked()
	if b.flow != nil {
		b.flow.stampLocked(now, b.total)
		b.flow.dropStaleSparesLocked(now)
	}
}

// dropStaleSparesLocked stamps the spare leases (splitLocked) not
// stamped yet with now, and drops those that have held the pump for
// spareHold.
func (f *followState) dropStaleSparesLocked(now time.Time) {
	f.leases = slices.DeleteFunc(f.leases, func(l lease) bool {
		return l.spare && !l.spareSince.IsZero() && now.Sub(l.spareSince) >= spareHold
	})
	for i := range f.leases {
		if l := &f.leases[i]; l.spare && l.spareSince.IsZero() {
			l.spareSince = now
		}
	}
}

// lazyWakeLocked reports whether a Write may leave the readers waiting
// now for the pump to wake (writeQuiet): only followers wait, and the
// follow window keeps what they have not read.
func (b *HeadTailBuffer) lazyWakeLocked() bool {
	f := b.flow
	return f != nil && f.windowMax > 0 && len(f.waiting) > 0 && int(b.waiters) <= len(f.waiting)
}

func (f *followState) stampLocked(now time.Time, end int64) {
	for i := range f.leases {
		if l := &f.leases[i]; l.woken.IsZero() {
			l.woken, l.target = now, end
		}
	}
}

// hold is called by a pump that found no room for n bytes, with the time
// now. It drops the leases whose followers were woken followBound or more
// ago and have not reached the end since (they lose the pump's help until
// they catch up), and returns how many bytes the pump can write now; when
// none, how long the pump may wait at most before it calls hold again,
// and a channel that gets a token when a lease moves or goes. A lease not
// stamped yet (its follower's WaitOutput found bytes already there) counts
// as woken now.
func (b *HeadTailBuffer) hold(n int, now time.Time) (int, time.Duration, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.flow == nil {
		return n, 0, nil
	}
	b.dropStaleLocked(now)
	if k := b.roomLocked(n); k > 0 {
		return k, 0, nil
	}
	wait, roomc := b.flow.waitLocked(now)
	return 0, wait, roomc
}

// settle is hold for a pump that reached the end of its pipe: it reports
// whether every follower that holds a lease has read the bytes only the
// follow window holds (Finish drops the window); if not, how long the
// pump may wait at most, and the channel hold returns.
func (b *HeadTailBuffer) settle(now time.Time) (bool, time.Duration, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.flow
	if f == nil || f.windowLen == 0 {
		return true, 0, nil
	}
	b.dropStaleLocked(now)
	tailStart := b.total - int64(b.tailLen)
	for _, l := range f.leases {
		// The follower reads the head, if any of it is left, then
		// [from, tailStart) from the window, then the tail.
		from := max(l.cursor, int64(len(b.head)))
		if from < tailStart && from >= b.total-int64(f.windowLen) {
			wait, roomc := f.waitLocked(now)
			return false, wait, roomc
		}
	}
	return true, 0, nil
}

// dropStaleLocked stamps the leases not stamped yet with now and drops
// those whose bound has passed (hold).
func (b *HeadTailBuffer) dropStaleLocked(now time.Time) {
	f := b.flow
	f.stampLocked(now, b.total)
	f.dropStaleSparesLocked(now)
	kept := f.leases[:0]
	for _, l := range f.leases {
		if now.Sub(l.woken) < followBound {
			kept = append(kept, l)
		}
	}
	clear(f.leases[len(kept):])
	f.leases = kept
}

// waitLocked returns how long a pump may wait for the leases at most, and
// the channel that gets a token when one moves or goes.
func (f *followState) waitLocked(now time.Time) (time.Duration, <-chan struct{}) {
	wait := followBound
	for _, l := range f.leases {
		wait = min(wait, followBound-now.Sub(l.woken))
		if l.spare {
			wait = min(wait, spareHold-now.Sub(l.spareSince))
		}
	}
	if f.roomc == nil {
		f.roomc = make(chan struct{}, 1)
	}
	return wait, f.roomc
}

// signalRoomLocked wakes a pump waiting for room.
func (b *HeadTailBuffer) signalRoomLocked() {
	if f := b.flow; f != nil && f.roomc != nil {
		// One token at most: a pump that finds one left over looks at
		// the room again and waits anew. One channel for all waits: a
		// follower makes the pump wait once per tail's worth of bytes.
		select {
		case f.roomc <- struct{}{}:
		default:
		}
	}
}

// dropLeases ends every lease: their followers did not read in time, or
// the pump is stopped. A follower that comes back reads what is left, and
// counts Lost, as without flow control.
func (b *HeadTailBuffer) dropLeases() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.flow != nil {
		b.flow.leases = b.flow.leases[:0]
		b.signalRoomLocked()
	}
}

// unfollow ends the lease of a follower that read up to next and stops
// following (Process.WaitFor once it matched), so that the pump does not
// wait for it: its lease, or the class its last read left (its reads
// have no limit: readTail), which a later wait there would take.
func (b *HeadTailBuffer) unfollow(next int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.takeLeaseLocked(next, readTail) && b.flow != nil && next == b.flow.caughtUp && b.flow.caught[readTail] > 0 {
		b.flow.caught[readTail]--
	}
}

// takeLeaseLocked removes the lease at cursor of a follower whose entry
// had class (leaseAt), or else any at cursor, and reports whether there
// was one.
func (b *HeadTailBuffer) takeLeaseLocked(cursor int64, class readClass) bool {
	if b.flow == nil {
		return false
	}
	if i := entryAt(b.flow.leases, cursor, class); i >= 0 {
		b.flow.leases = slices.Delete(b.flow.leases, i, i+1)
		b.signalRoomLocked()
		return true
	}
	return false
}

// takeWaitingLocked removes the waiting entry at cursor of a follower
// whose entry had class, or else any at cursor.
func (b *HeadTailBuffer) takeWaitingLocked(cursor int64, class readClass) {
	if b.flow == nil {
		return
	}
	if i := entryAt(b.flow.waiting, cursor, class); i >= 0 {
		b.flow.waiting = slices.Delete(b.flow.waiting, i, i+1)
	}
}

// entryAt returns the index of the entry at cursor in ls that a follower
// whose entry had class gives up: leaseAt's, or else the first at cursor
// (the follower's own was taken by a wait of another at its cursor, and
// entries there are the same but for their classes), or -1.
func entryAt(ls []lease, cursor int64, class readClass) int {
	if i := leaseAt(ls, cursor, class); i >= 0 {
		return i
	}
	return slices.IndexFunc(ls, func(l lease) bool { return l.cursor == cursor })
}

// indexLease returns the index of a lease at cursor, or -1.
func (f *followState) indexLease(cursor int64) int {
	return slices.IndexFunc(f.leases, func(l lease) bool { return l.cursor == cursor })
}

// claimLocked returns the entry a wait at cursor makes (followState):
// the index of a lease a read moved there that no wait claimed yet, now
// claimed, or -1; the class of the entry; and whether the wait is a
// follower's at all.
func (f *followState) claimLocked(cursor int64) (own int, class readClass, follower bool) {
	own = -1
	for i, l := range f.leases {
		if l.cursor == cursor && !l.waited && (own < 0 || l.class > f.leases[own].class) {
			own = i
		}
	}
	if own >= 0 {
		l := &f.leases[own]
		twin, class := l.twin, l.class
		l.waited, l.spare, l.twin, l.orphan = true, false, 0, false
		if twin != 0 {
			own = f.endTwinLocked(twin, own)
		}
		return own, class, true
	}
	if cursor != f.caughtUp {
		return -1, readSmall, false
	}
	for c := range f.caught {
		if f.caught[c] > 0 {
			f.caught[c]--
			return -1, readClass(c), true
		}
	}
	return -1, readSmall, true
}

// endTwinLocked ends the help of the lease split off with the one at
// index own (splitLocked: the same twin number), which a wait just
// claimed, and returns own's index after it. Whichever of the two the
// wait claimed, its reader waits: the other is most likely a poller's. A
// copy a read moved to the end goes, its class given back to caught for
// its reader (a follower whose wait comes next claims it there), and one
// a read left short of the end stays, an ordinary lease (its reader reads
// on: a follower); a spare not read yet is marked orphan, and goes once a
// read moves it to the end (the poller's poll, served under it) or its
// spareHold passes. So a poller that read
// a spare keeps no lease past the follower's next wait, and never paces
// the pump (a lease it kept held the pump 5 ms at every wake: a flood ran
// 4x slower; found in review); nor does a wake drop the lease of a
// follower between its read and its wait (a first version dropped the
// moved copies at the next wake, and another reader's wake came first).
func (f *followState) endTwinLocked(twin int32, own int) int {
	i := slices.IndexFunc(f.leases, func(l lease) bool { return l.twin == twin })
	switch {
	case i < 0:
		return own
	case f.leases[i].spare:
		f.leases[i].orphan, f.leases[i].twin = true, 0
		return own
	}
	if f.leases[i].cursor != f.caughtUp {
		// Its read stopped short of the end: its reader reads on, a
		// follower reading a wake's bytes in pieces (found in review:
		// deleting it lost that follower the rest of its wake).
		f.leases[i].twin = 0
		return own
	}
	if l := f.leases[i]; f.caught[l.class] < caughtMax {
		f.caught[l.class]++
	}
	f.leases = slices.Delete(f.leases, i, i+1)
	if i < own {
		own--
	}
	return own
}

// unclaimLocked gives the class of a wait at cursor that ended without
// bytes (its context) back to caught, for the waiter's next wait there.
func (f *followState) unclaimLocked(cursor int64, class readClass) {
	if cursor == f.caughtUp && f.caught[class] < caughtMax {
		f.caught[class]++
	}
}

// pollSignal is what the buffers of one Manager share: set by Output
// when it returns an unchanged rendering of any of them, and cleared by a
// pump (takePeersPolled). Tight pollers of one record, final ones
// included, keep the Ps from the pumps of the other records of the same
// Manager as much as from their own record's; a Manager's pollers never
// change how another Manager's pumps read (design section 10).
type pollSignal struct {
	atomic.Bool
	// pumps counts the Manager's pumps that try their pipes between the
	// pollers' turns (pump.read; render.go reads it).
	pumps atomic.Int32
	// pumped is when a pump of the Manager last read something, in
	// microseconds since paceEpoch (pace.go).
	pumped atomic.Int64
	// nap, if not nil, is a paced call's pause instead of sleeping for
	// pacePause (pause): set by tests before the buffers are shared.
	nap func()
}

// polledLately reports whether Output returned an unchanged rendering of
// b, or of another buffer of its Manager, since a pump last took the
// signal.
func (b *HeadTailBuffer) polledLately() bool {
	return b.polled.Load() || b.peers != nil && b.peers.Load()
}

// takePolled reports whether Output returned an unchanged rendering of b
// since the last call, and clears the signal.
func (b *HeadTailBuffer) takePolled() bool {
	return b.polled.Load() && b.polled.Swap(false)
}

// takePeersPolled is takePolled for the signal b shares with the other
// buffers of its Manager; false for a buffer that shares none.
func (b *HeadTailBuffer) takePeersPolled() bool {
	return b.peers != nil && b.peers.Load() && b.peers.Swap(false)
}

// sharePolls makes b share the polling signal of the Manager that owns it
// (Process.begin, before any pump or reader sees b).
func (b *HeadTailBuffer) sharePolls(s *pollSignal) { b.peers = s }

// writeQuiet stores b as pump.write does, but leaves waking the readers
// waiting to the pump (HeadTailBuffer.writeQuiet): at once when others
// than followers wait or there is no follow window (lazyWakeLocked), and
// otherwise once the pump waits for room, writes to a tee, ends, or
// followLatency has passed (armWake), whichever comes first.
func (pu *pump) writeQuiet(b []byte) {
	pu.log.write(b)
	if pu.tee != nil {
		// A tee's Write may block: nobody waits for a wake meanwhile.
		pu.wakeNow()
		pu.tee.write(b)
	}
	waiting, now := pu.dst.writeQuiet(b)
	pu.watch.scan(b)
	if !waiting {
		return
	}
	if !pu.wakeDue {
		pu.wakeDue = true
		if !now {
			now = !pu.armWake()
		}
	}
	if now {
		pu.wakeNow()
	}
}

// wakeNow wakes the readers waiting for a wake the pump owes them, and
// starts the bound of the followers among them (followBound).
func (pu *pump) wakeNow() {
	if !pu.wakeDue {
		return
	}
	pu.wakeDue = false
	pu.dst.wakeFollowers(pu.clock.Now("pump", "follower"))
	if pu.deadline {
		pu.deadline = false
		pu.setDeadline(time.Time{})
	}
}

// armWake sets a read deadline followLatency from now, so that a read
// that waits longer for the child returns and the pump wakes the readers
// waiting (wakeLate); it reports false where reads take no deadline
// (Windows pipes): the pump then wakes them at once. The deadline is the
// poller's, so it is taken in real time rather than on Options.Clock: it
// decides only how late within followLatency a wake comes, never whether.
func (pu *pump) armWake() bool {
	if !pu.setDeadline(time.Now().Add(followLatency)) {
		return false
	}
	pu.deadline = true
	return true
}

// setDeadline sets r's read deadline to t without undoing a stop: stop
// sets stopping before its own deadline, so a stop that came before the
// check below has its deadline set again here, and one after it sets it
// after this one. Where r takes no deadline (Windows pipes, which stop
// closes) it changes nothing and reports false.
func (pu *pump) setDeadline(t time.Time) bool {
	if err := pu.r.SetReadDeadline(t); err != nil {
		return false
	}
	if pu.stopping.Load() {
		stopReading(pu.r)
	}
	return true
}

// wakeLate reports whether err, from a read, is the deadline armWake set
// (and not a stop), after waking the readers waiting: the pump then reads
// on.
func (pu *pump) wakeLate(err error) bool {
	if !pu.deadline || pu.stopping.Load() || !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	pu.wakeNow()
	return true
}

// tagsPumpFollower are settleFollowers' clock tags, made once: every
// pump settles at its end (tagsProcessStart says why).
var tagsPumpFollower = []string{"pump", "follower"}

// settleFollowers is called by a pump at the end of its pipe: it waits
// until the followers it helps have read what only the follow window
// holds, which Finish drops, each within its bound (followBound), or
// until the pump is stopped. It waits followBound at most in all, in real
// time whatever Options.Clock is: a follower that stopped reading must not
// hold the record's end until a test's mock clock moves; the bound
// decides only how much of the window a slow follower still gets, never
// whether the record ends.
func (pu *pump) settleFollowers() {
	pu.wakeNow()
	limit := time.Now().Add(followBound)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	pu.holding.Store(true)
	defer pu.holding.Store(false)
	for {
		done, wait, roomc := pu.dst.settle(pu.clock.Now(tagsPumpFollower...))
		if done {
			return
		}
		wait = min(wait, time.Until(limit))
		if wait <= 0 {
			return
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-roomc:
		case <-pu.stopped():
			pu.dst.dropLeases()
			return
		case <-timer.C:
		}
	}
}
