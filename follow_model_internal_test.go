package proc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestFollowerKeepsUpBesideOthers drives a buffer as its pump does
// (room, hold, writeQuiet, and the wake it owes within followLatency),
// on a time of its own, with readers taking turns in an order drawn at
// random (150 seeds a mix): followers that read each wake's bytes at
// once, in 64-byte or tail-sized reads; a poller that never waits; a
// small reader that waits; and a follower that now and then stops
// reading for longer than followBound. Through a tail of 8 bytes and a
// follow window of 32, it pins design section 10's promises whatever the
// order of the calls: a follower that reaches the end within spareHold/2
// of each wake loses nothing (every byte it reads is the stream's), and
// the pump finds no room for at most twice followBound while no such
// follower owes a read. Leases carry no owner, so another reader's read
// can move a follower's lease (splitLocked, endTwinLocked): this is the
// net under those rules. The code before the spare leases (f1facf3)
// failed the three mixes with a poller in 114 to 149 of 150 seeds.
//
// Four mixes are left out because they still lose, in 1,500 seeds each
// (2026-11-29; the code before the last change in brackets): a follower
// beside two pollers, 185 (1,308); beside a napping follower and a
// poller, 5 (70); a tail-sized follower beside a poller and a small
// reader, 12 (12), and with a 64-byte follower too, 42 (128). A small
// reader's wait there can claim a poller's copy (claimLocked cannot tell
// its class), and counts of pollers left further back than before are
// gone; both need a lease with an owner.
func TestFollowerKeepsUpBesideOthers(t *testing.T) {
	t.Parallel()
	const (
		follower = iota
		piecewise
		poller
		small
		napper
	)
	kinds := map[int]modelReader{
		follower:  {size: 64, waits: true, keepsUp: true},
		piecewise: {size: 8, waits: true, keepsUp: true}, // the tail's size: a read of a tail's worth
		poller:    {size: 64},
		small:     {size: 2, waits: true},
		napper:    {size: 64, waits: true, naps: true},
	}
	names := []string{"follower", "piecewise", "poller", "small", "napper"}
	for _, mix := range [][]int{
		{follower},
		{follower, poller},
		{piecewise, poller},
		{follower, small},
		{follower, poller, small},
		{follower, piecewise},
		{piecewise, napper, small},
	} {
		var label []string
		for _, k := range mix {
			label = append(label, names[k])
		}
		t.Run(strings.Join(label, "+"), func(t *testing.T) {
			t.Parallel()
			for seed := range uint64(150) {
				rs := make([]modelReader, len(mix))
				for i, k := range mix {
					rs[i] = kinds[k]
				}
				if err := runFollowModel(t, seed, rs); err != nil {
					t.Errorf("seed %d: %v", seed, err)
				}
			}
		})
	}
}

// modelReader is a reader of TestFollowerKeepsUpBesideOthers.
type modelReader struct {
	size    int  // bytes a read may return
	waits   bool // waits at the end (WaitOutput)
	keepsUp bool // reads each wake's bytes within spareHold/2
	naps    bool // stops reading now and then, longer than followBound
}

// runFollowModel runs one schedule of TestFollowerKeepsUpBesideOthers
// and returns the first broken promise.
func runFollowModel(t *testing.T, seed uint64, kinds []modelReader) error {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	rnd := rand.New(rand.NewPCG(seed, 22))
	stream := func(off int64) byte { return byte(off % 251) }

	b := NewHeadTailBuffer(4, 8, 0)
	type state struct {
		cursor  int64
		buf     []byte
		errc    chan error
		waitc   <-chan struct{} // the wait's channel, while it waits
		owes    bool            // woken (or its wait found bytes), not at the end yet
		wokenAt time.Time
		napTill time.Time
	}
	rs := make([]*state, len(kinds))
	for i, k := range kinds {
		rs[i] = &state{buf: make([]byte, k.size), errc: make(chan error, 1)}
	}
	now := time.Unix(1_000_000, 0)
	var total int64
	write := func(n int) { // the pump's bytes, the stream's from total on
		p := make([]byte, n)
		for i := range p {
			p[i] = stream(total + int64(i))
		}
		total += int64(n)
		if _, wakeNow := b.writeQuiet(p); wakeNow {
			b.wakeFollowers(now)
		}
	}
	write(4)
	for i, r := range rs {
		for r.cursor < 4 {
			c := b.ReadSinceInto(r.cursor, r.buf)
			if c.Lost != 0 {
				return fmt.Errorf("reader %d's first reads: %+v", i, c)
			}
			r.cursor = c.Next
		}
	}
	pumpTestLocked(b, func() bool { b.flow.windowMax = 32; return true })

	wakeDue := false // bytes written the waiting followers were not woken for
	var wakeDueAt, blockedSince time.Time
	blocked := false
	wake := func() {
		b.wakeFollowers(now)
		wakeDue = false
	}
	startWait := func(r *state) error {
		var waiters int32
		pumpTestLocked(b, func() bool { waiters = b.waiters; return true })
		go func(cursor int64) { r.errc <- b.WaitOutput(ctx, cursor) }(r.cursor)
		for {
			if len(r.errc) > 0 { // bytes were there: it returned at once
				if err := <-r.errc; err != nil {
					return err
				}
				r.owes, r.wokenAt = true, now
				return nil
			}
			var c <-chan struct{}
			if pumpTestLocked(b, func() bool { c = b.waitc; return b.waiters > waiters }) {
				r.waitc = c
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			runtime.Gosched()
		}
	}

	for i, r := range rs {
		if kinds[i].waits {
			if err := startWait(r); err != nil {
				return fmt.Errorf("the first wait: %v", err)
			}
		}
	}
	for step := 0; step < 300; step++ {
		// Waits a wake ended with bytes there return first, as their
		// goroutines would; one woken with nothing new waits again, on
		// the buffer's next channel.
		for _, r := range rs {
			if r.waitc == nil {
				continue
			}
			select {
			case <-r.waitc:
			default:
				continue
			}
			if pumpTestLocked(b, func() bool { return b.total <= r.cursor }) {
				var c <-chan struct{}
				spinUntil(ctx, t, "waiting again", func() bool {
					return pumpTestLocked(b, func() bool { c = b.waitc; return c != nil })
				})
				r.waitc = c
				continue
			}
			select {
			case err := <-r.errc:
				if err != nil {
					return fmt.Errorf("step %d: a wait: %v", step, err)
				}
			case <-ctx.Done():
				return fmt.Errorf("step %d: a woken wait did not return", step)
			}
			r.waitc, r.owes, r.wokenAt = nil, true, now
		}

		who := rnd.IntN(len(rs) + 2) // the pump twice as often as each reader
		if who >= len(rs) {
			n := 1 + rnd.IntN(24)
			k := b.room(n)
			if k == 0 {
				if wakeDue {
					wake()
				}
				k, _, _ = b.hold(n, now)
			}
			if k == 0 {
				if !blocked {
					blocked, blockedSince = true, now
				}
				owing := false
				for i, r := range rs {
					owing = owing || kinds[i].keepsUp && r.owes
				}
				if !owing && now.Sub(blockedSince) > 2*followBound {
					return fmt.Errorf("step %d: the pump found no room for %v, with no follower owing a read", step, now.Sub(blockedSince))
				}
			} else {
				blocked = false
				write(k)
				if !wakeDue && pumpTestLocked(b, func() bool { return b.waitc != nil }) {
					wakeDue, wakeDueAt = true, now
				}
				if rnd.IntN(4) == 0 { // the pipe ran dry: the wake deadline
					wake()
				}
			}
		} else if r, k := rs[who], kinds[who]; r.waitc == nil && !now.Before(r.napTill) {
			c := b.ReadSinceInto(r.cursor, r.buf)
			if k.keepsUp {
				if c.Lost != 0 || c.Next-r.cursor != int64(len(c.Data)) {
					return fmt.Errorf("step %d: a follower that keeps up read from %d: %+v, lost %d", step, r.cursor, c, c.Lost)
				}
				for j, x := range c.Data {
					if x != stream(r.cursor+int64(j)) {
						return fmt.Errorf("step %d: a follower read byte %d wrong", step, r.cursor+int64(j))
					}
				}
			}
			r.cursor = c.Next
			if c.Next >= c.End {
				r.owes = false
				if k.naps && rnd.IntN(3) == 0 {
					r.napTill = now.Add(followBound + time.Millisecond)
				} else if k.waits {
					if err := startWait(r); err != nil {
						return fmt.Errorf("step %d: wait: %v", step, err)
					}
				}
			}
		}

		// The pump's clock moves on, but not past a keeping-up follower's
		// promise: it reads within spareHold/2 of its wake.
		dt := time.Duration(rnd.IntN(100)) * time.Microsecond
		for i, r := range rs {
			if kinds[i].keepsUp && r.owes && now.Add(dt).Sub(r.wokenAt) >= spareHold/2 {
				dt = 0
			}
		}
		now = now.Add(dt)
		if wakeDue && now.Sub(wakeDueAt) >= followLatency {
			wake()
		}
	}
	// Stop every wait still blocked, as a caller's context would.
	cancel()
	for _, r := range rs {
		if r.waitc != nil {
			<-r.errc
		}
	}
	return nil
}
