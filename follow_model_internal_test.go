package proc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// TestFollowerKeepsUpBesideOthers drives a buffer as its pump does (room,
// hold, writeQuiet, and the wake it owes within followLatency), on a time
// of its own, with readers taking turns in an order drawn at random (150
// seeds a mix): followers that read each wake's bytes in time, in 64-byte
// or tail-sized reads; a follower that stops reading now and then for
// longer than its MaxHold, one that never reads, and one that never holds
// (MaxHold < 0); a poller that never waits and a small reader that waits
// (WaitOutput). Through a tail of 8 bytes and a window of 32, it pins
// design section 20's promises whatever the order of the calls: a
// follower that reads up to where the stream ended at each wake within
// half its MaxHold loses nothing (every byte it reads is the stream's);
// every reader's Data and Lost add up to how far it moved, and its bytes
// are the stream's; and the pump finds no room for at most twice
// MaxHold while no such follower owes a read.
func TestFollowerKeepsUpBesideOthers(t *testing.T) {
	t.Parallel()
	const (
		follower = iota
		piecewise
		poller
		small
		napper
		stalled
		loose
	)
	kinds := map[int]modelReader{
		follower:  {size: 64, follows: true, keepsUp: true},
		piecewise: {size: 8, follows: true, keepsUp: true}, // the tail's size
		poller:    {size: 64},
		small:     {size: 2, waits: true},
		napper:    {size: 64, follows: true, naps: true},
		stalled:   {size: 64, follows: true, stalls: true},
		loose:     {size: 64, follows: true, hold: -1},
	}
	names := []string{"follower", "piecewise", "poller", "small", "napper", "stalled", "loose"}
	for _, mix := range [][]int{
		{follower},
		{follower, poller},
		{piecewise, poller},
		{follower, small},
		{follower, poller, small},
		{follower, piecewise},
		{piecewise, napper, small},
		// The four the guessing follow.go lost bytes in.
		{follower, poller, poller},
		{follower, napper, poller},
		{piecewise, poller, small},
		{piecewise, follower, poller, small},
		// Followers that hold nothing or stop for good.
		{follower, stalled, poller},
		{piecewise, loose, napper},
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
	size    int           // bytes a read may return
	follows bool          // a Follower; else a poller (ReadSinceInto)
	waits   bool          // a poller that waits at the end (WaitOutput)
	keepsUp bool          // reads each wake's bytes within half its hold
	naps    bool          // stops reading now and then, longer than its hold
	stalls  bool          // never reads
	hold    time.Duration // FollowOptions.MaxHold
}

// modelHold is the hold of the model's followers: the default.
const modelHold = DefaultFollowHold

// runFollowModel runs one schedule of TestFollowerKeepsUpBesideOthers
// and returns the first broken promise.
func runFollowModel(t *testing.T, seed uint64, kinds []modelReader) error {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	rnd := rand.New(rand.NewPCG(seed, 35))
	stream := func(off int64) byte { return byte(off % 251) }

	b := NewHeadTailBuffer(4, 8, 0)
	b.flowLocked().testMax = 32
	type state struct {
		f       *Follower
		cursor  int64
		buf     []byte
		waitc   <-chan struct{} // the wait's channel, while it waits
		napTill time.Time
	}
	rs := make([]*state, len(kinds))
	for i, k := range kinds {
		rs[i] = &state{buf: make([]byte, k.size)}
		if k.follows {
			f, err := b.follow(nil, 0, FollowOptions{MaxHold: k.hold})
			if err != nil {
				return err
			}
			defer f.Close()
			rs[i].f = f
		}
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
	// wait blocks r at the end as Read (a follower) or WaitOutput does:
	// on the buffer's wait channel, counted.
	wait := func(r *state, follows bool) {
		pumpTestLocked(b, func() bool {
			if b.waitc == nil {
				b.waitc = make(chan struct{})
			}
			r.waitc = b.waitc
			if !follows {
				b.waiters++
			}
			return true
		})
	}
	unwait := func(r *state, follows bool) {
		pumpTestLocked(b, func() bool {
			if !follows {
				b.waiters--
			}
			return true
		})
		r.waitc = nil
	}
	// owes reports whether a follower that keeps up has a bound running.
	owes := func(i int) bool {
		r, k := rs[i], kinds[i]
		return k.keepsUp && pumpTestLocked(b, func() bool { return r.f.s.keeps && !r.f.s.woken.IsZero() })
	}
	wokenAt := func(i int) time.Time {
		var at time.Time
		pumpTestLocked(b, func() bool { at = rs[i].f.s.woken; return true })
		return at
	}

	for i, r := range rs {
		if kinds[i].follows || kinds[i].waits {
			wait(r, kinds[i].follows)
		}
	}
	wakeDue := false // bytes written the waiting followers were not woken for
	var wakeDueAt, blockedSince time.Time
	blocked := false
	wake := func() {
		b.wakeFollowers(now)
		wakeDue = false
	}
	for step := 0; step < 300; step++ {
		// Waits a wake ended with bytes there return; one woken with
		// nothing new waits again.
		for i, r := range rs {
			if r.waitc == nil {
				continue
			}
			select {
			case <-r.waitc:
			default:
				continue
			}
			unwait(r, kinds[i].follows)
			if pumpTestLocked(b, func() bool { return b.total <= r.cursor }) {
				wait(r, kinds[i].follows)
			}
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
				for i := range rs {
					owing = owing || owes(i)
				}
				if !owing && now.Sub(blockedSince) > 2*modelHold {
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
		} else if r, k := rs[who], kinds[who]; r.waitc == nil && !k.stalls && !now.Before(r.napTill) {
			var c Chunk
			if k.follows {
				if pumpTestLocked(b, func() bool { return b.total <= r.cursor }) {
					wait(r, true) // Read would block here
					continue
				}
				var err error
				if c, err = r.f.Read(ctx, r.buf); err != nil {
					return fmt.Errorf("step %d: Read() = %v", step, err)
				}
			} else {
				c = b.ReadSinceInto(r.cursor, r.buf)
			}
			if c.Next-r.cursor != c.Lost+int64(len(c.Data)) {
				return fmt.Errorf("step %d: reader %d read from %d: %+v, which does not add up", step, who, r.cursor, c)
			}
			if k.keepsUp && c.Lost != 0 {
				return fmt.Errorf("step %d: a follower that keeps up read from %d: %+v, lost %d", step, r.cursor, c, c.Lost)
			}
			for j, x := range c.Data {
				if off := c.Next - int64(len(c.Data)) + int64(j); x != stream(off) {
					return fmt.Errorf("step %d: reader %d read byte %d wrong", step, who, off)
				}
			}
			r.cursor = c.Next
			if k.follows {
				if st := r.f.Stats(); st.Cursor != r.cursor {
					return fmt.Errorf("step %d: Stats().Cursor = %d; want %d", step, st.Cursor, r.cursor)
				}
			}
			if c.Next >= c.End {
				if k.naps && rnd.IntN(3) == 0 {
					r.napTill = now.Add(modelHold + time.Millisecond)
				} else if k.follows || k.waits {
					wait(r, k.follows)
				}
			}
		}

		// The pump's clock moves on, but not past a keeping-up follower's
		// promise: it reads within half its hold of its wake.
		dt := time.Duration(rnd.IntN(100)) * time.Microsecond
		for i := range rs {
			if owes(i) && now.Add(dt).Sub(wokenAt(i)) >= modelHold/2 {
				dt = 0
			}
		}
		now = now.Add(dt)
		if wakeDue && now.Sub(wakeDueAt) >= followLatency {
			wake()
		}
	}
	for i, r := range rs {
		if r.waitc != nil {
			unwait(r, kinds[i].follows)
		}
	}
	return nil
}
