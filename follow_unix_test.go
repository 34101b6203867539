//go:build unix

package proc_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"testing"

	"github.com/procvisor/proc"
	"github.com/procvisor/proc/proctest"
)

// mustFollow returns a function that returns the follower of a Follow or
// FollowStderr call (what), closed when t ends, or fails t with its error.
func mustFollow(t *testing.T, what string) func(*proc.Follower, error) *proc.Follower {
	t.Helper()
	return func(f *proc.Follower, err error) *proc.Follower {
		t.Helper()
		if err != nil {
			t.Fatalf("%s = %v", what, err)
		}
		t.Cleanup(func() { _ = f.Close() })
		return f
	}
}

// followAll reads f to io.EOF through a buffer of size bytes and returns
// the bytes and what was lost.
func followAll(ctx context.Context, t *testing.T, f *proc.Follower, size int) ([]byte, int64) {
	t.Helper()
	var got []byte
	var lost int64
	buf := make([]byte, size)
	for {
		c, err := f.Read(ctx, buf)
		got = append(got, c.Data...)
		lost += c.Lost
		if err == io.EOF {
			return got, lost
		}
		if err != nil {
			t.Fatalf("Read() = %+v, %v; want bytes or io.EOF", c, err)
		}
	}
}

// TestFollowProcess pins Follow on a record (design section 20): from the
// start, from the end, from a ReadSince cursor, beyond the end
// (ErrInvalid); io.EOF at the end of the final record; reads after
// Manager.Close; FollowStderr with and without SeparateStderr.
func TestFollowProcess(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	p := mustStart(t, m, proc.StartRequest{Command: "echo one; echo two; echo err >&2", SeparateStderr: true})
	f := mustFollow(t, "Follow(0)")(p.Follow(0, proc.FollowOptions{}))
	if got, lost := followAll(ctx, t, f, 3); string(got) != "one\ntwo\n" || lost != 0 {
		t.Errorf("Follow(0) read %q, lost %d; want %q", got, lost, "one\ntwo\n")
	}
	if st := f.Stats(); st.Cursor != 8 || st.Lost != 0 {
		t.Errorf("Stats() = %+v; want cursor 8, nothing lost", st)
	}
	fe := mustFollow(t, "FollowStderr(0)")(p.FollowStderr(0, proc.FollowOptions{}))
	if got, _ := followAll(ctx, t, fe, 64); string(got) != "err\n" {
		t.Errorf("FollowStderr read %q; want %q", got, "err\n")
	}
	// From a ReadSince cursor: on from there.
	c := p.ReadSince(0, 4)
	g, err := p.Follow(c.Next, proc.FollowOptions{MaxHold: -1})
	if err != nil {
		t.Fatalf("Follow(%d) = %v", c.Next, err)
	}
	defer g.Close()
	if got, _ := followAll(ctx, t, g, 64); string(got) != "two\n" {
		t.Errorf("Follow(ReadSince's Next) read %q; want %q", got, "two\n")
	}
	if _, err := p.Follow(9, proc.FollowOptions{}); !errors.Is(err, proc.ErrInvalid) {
		t.Errorf("Follow beyond the end = %v; want ErrInvalid", err)
	}
	if _, err := p.Follow(0, proc.FollowOptions{Window: -1}); !errors.Is(err, proc.ErrInvalid) {
		t.Errorf("Follow with Window -1 = %v; want ErrInvalid", err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	// After Manager.Close: from the end, io.EOF at once; from the start,
	// everything retained.
	end := mustFollow(t, "Follow(-1) after Close")(p.Follow(-1, proc.FollowOptions{}))
	if c, err := end.Read(ctx, make([]byte, 8)); err != io.EOF || !c.EOF || len(c.Data) != 0 {
		t.Errorf("Read from the end of a final record = %+v, %v; want EOF", c, err)
	}
	start := mustFollow(t, "Follow(0) after Close")(p.Follow(0, proc.FollowOptions{}))
	if got, _ := followAll(ctx, t, start, 64); string(got) != "one\ntwo\n" {
		t.Errorf("Follow(0) after Close read %q; want %q", got, "one\ntwo\n")
	}

	// Without SeparateStderr: an empty stream, io.EOF once final.
	q := mustStart(t, newManager(t, proc.Options{}), proc.StartRequest{Command: "echo x >&2"})
	none, err := q.FollowStderr(0, proc.FollowOptions{})
	if err != nil {
		t.Fatalf("FollowStderr without SeparateStderr = %v", err)
	}
	defer none.Close()
	if got, lost := followAll(ctx, t, none, 8); len(got) != 0 || lost != 0 {
		t.Errorf("FollowStderr without SeparateStderr read %q, lost %d; want nothing", got, lost)
	}
}

// TestFollowFloodLossless pins that a default follower reading 64 KiB a
// call loses nothing of a child that writes as fast as it can, and reads
// every byte as written (design section 20: the pump holds the child for
// it while it keeps up). The clock is a mock that stands still, so that
// no hold's bound passes however the machine schedules the follower: the
// test pins the mechanism, the benchmarks its timing. It compares each
// chunk as it comes.
func TestFollowFloodLossless(t *testing.T) {
	t.Parallel()
	n := int64(16 << 20 / faultFloodLine * faultFloodLine)
	if raceEnabled {
		n = 2 << 20 / faultFloodLine * faultFloodLine // the race detector is slow
	}
	want := faultFloodBytes(0, n)
	ctx, _, m := testMockManager(t, proc.Options{})
	// It writes once its stdin has a line: Follow(0) comes first.
	req := helperReq("fault-flood", strconv.FormatInt(n, 10))
	req.Args = append([]string{"sh", "-c", `read x; exec "$0" "$@"`}, req.Args...)
	req.Stdin = true
	p := mustStart(t, m, req)
	f := mustFollow(t, "Follow(0)")(p.Follow(0, proc.FollowOptions{}))
	if _, err := p.Write([]byte("go\n")); err != nil {
		t.Fatalf("Write() = %v", err)
	}
	buf := make([]byte, 64<<10)
	for off := int64(0); ; {
		c, err := f.Read(ctx, buf)
		if c.Lost != 0 || off+int64(len(c.Data)) > n || !bytes.Equal(c.Data, want[off:off+int64(len(c.Data))]) {
			t.Fatalf("Read() at %d = %d bytes, lost %d; want the child's bytes, none lost (stats %+v)", off, len(c.Data), c.Lost, f.Stats())
		}
		off += int64(len(c.Data))
		if err == io.EOF {
			if off != n {
				t.Errorf("io.EOF at %d; want %d", off, n)
			}
			return
		}
		if err != nil {
			t.Fatalf("Read() = %v", err)
		}
	}
}

// TestStalledFollowerClose pins that a follower that never reads costs
// the child one MaxHold (its Held), adds no wait to Manager.Close (which
// stays bounded by KillGrace + DrainTimeout), and reads the retained
// output to io.EOF after it. The clock is a mock: the hold ends when the
// test moves it.
func TestStalledFollowerClose(t *testing.T) {
	t.Parallel()
	ctx, mClock, m := testMockManager(t, proc.Options{})
	hold := mClock.Trap().NewTimer("pump", "follower")
	p := mustStart(t, m, helperReq("lc-flood"))
	f := mustFollow(t, "Follow(-1)")(p.Follow(-1, proc.FollowOptions{MaxHold: proc.MaxFollowHold}))
	from := f.Stats().Cursor
	releaseTrapped(ctx, t, hold, proc.MaxFollowHold, "the pump's wait for the stalled follower")
	mClock.Advance(proc.MaxFollowHold).MustWait(ctx)
	hold.Close()
	// Well past the hold: the child is not held for it again (the pump
	// would wait on the mock clock for good).
	waitLen(ctx, t, p, p.Info().OutputBytes+8<<20)
	// Close waits for nothing of the follower's: the pump holds no more
	// for it (Held stays one MaxHold), and Close's own bounds are timers
	// CloseOnMock moves past.
	if err := proctest.CloseOnMock(ctx, mClock, m); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if st := f.Stats(); st.Held != proc.MaxFollowHold {
		t.Errorf("the stalled follower held the pump %v; want one MaxHold, %v", st.Held, proc.MaxFollowHold)
	}
	got, lost := followAll(ctx, t, f, 64<<10)
	if want := p.Info().OutputBytes - from; lost == 0 || len(got) == 0 || int64(len(got))+lost != want {
		t.Errorf("after Close the stalled follower read %d bytes, lost %d; want the retained bytes and a loss, %d in all", len(got), lost, want)
	}
}
