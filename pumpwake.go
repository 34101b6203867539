package proc

import (
	"errors"
	"os"
	"time"
)

// The pump's side of the window and the holds (follow.go). It reads
// straight into the window while one is kept (readTarget), and takes
// turns with the readers: it leaves a waiting reader asleep while the
// window keeps its bytes, and wakes it when it must wait for room anyway,
// before a tee's Write, at the end of its pipe, or followLatency after
// the first byte it left unannounced (a read deadline), whichever comes
// first. Every hand-off costs more than the bytes it moves: a goroutine
// made runnable takes a CPU from the child.

// followLatency is the longest the pump leaves a waiting follower
// unwoken after writing bytes past its cursor (pump.armWake): short next
// to anything a person notices, long next to the pause of a pump that
// read a full pipe empty.
const followLatency = time.Millisecond

// minWindowRead is the least contiguous free storage of the window the
// pump reads into (readTarget), or a quarter of the window.
const minWindowRead = 16 << 10

// readTarget returns where the pump reads its next bytes, given its read
// buffer buf: buf itself, or a part of the window. While the window is
// kept and has minWindowRead bytes of contiguous free storage, p is that
// storage: the pump reads the pipe straight into the window, and
// keepLocked, finding the bytes in place, copies only what head and tail
// keep. Only the pump writes the window and no reader sees its free part,
// so the pump fills it without the lock; a window freed or moved
// meanwhile leaves the bytes in p, which keepLocked copies as any others.
func (b *HeadTailBuffer) readTarget(buf []byte) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.flow
	if f == nil || b.finished || len(f.window) == 0 {
		return buf
	}
	b.trimLocked(b.total, time.Since(paceEpoch))
	w := (f.windowPos + f.windowLen) % len(f.window)
	free := f.window[w:]
	if w < f.windowPos || f.windowLen == len(f.window) {
		free = f.window[w : w+len(f.window)-f.windowLen]
	}
	if len(free) < min(minWindowRead, len(f.window)/4) || len(free) == 0 {
		return buf
	}
	return free[:min(len(free), len(buf))]
}

// writeQuiet stores b as pump.write does, but leaves waking the readers
// waiting to the pump: at once when there is no window to keep their
// bytes (lazyWakeLocked), and otherwise once the pump waits for room,
// writes to a tee, ends, or followLatency has passed (armWake).
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
// starts the bounds of the followers among them.
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
// after this one. Where r takes no deadline it reports false.
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

// settleFollowers is called by a pump at the end of its pipe: it lets
// the keeping-up followers read to the end, each within its bound, or
// until the pump is stopped. It waits MaxFollowHold at most in all, in
// real time whatever Options.Clock is: a follower that stopped reading
// must not hold the record's end until a test's mock clock moves. The
// window outlives Finish for open followers, so this decides only how
// soon they read, never what.
func (pu *pump) settleFollowers() {
	pu.wakeNow()
	limit := time.Now().Add(MaxFollowHold)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	pu.holding.Store(true)
	defer pu.holding.Store(false)
	for {
		done, wait, roomc := pu.dst.hold(0, pu.clock.Now("pump", "follower"))
		if done > 0 {
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
			pu.dst.dropHolds()
			return
		case <-timer.C:
		}
	}
}
