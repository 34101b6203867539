//go:build unix

package proc_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/procvisor/proc"
)

// The drain on Unix: background children and grandchildren holding
// stdout, and the chunks of a drain.

// TestDrainBackgroundChild: a command that leaves a silent background
// child holding stdout is final about DrainQuiet after the shell exits,
// and Signal still reaches the background child afterwards.
func TestDrainBackgroundChild(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	start := time.Now()
	p := mustStart(t, m, proc.StartRequest{Command: "sleep 30 & echo hi"})
	s := waitFinal(ctx, t, p)
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("final after %v; want about DrainQuiet (50ms) after sh exits", elapsed)
	}
	if s.Output.Text != "hi\n" {
		t.Errorf("Output() = %q; want %q", s.Output.Text, "hi\n")
	}
	wantExit(t, s, 0)
	if err := p.Signal(proc.Kill); err != nil {
		t.Errorf("Signal(Kill) after final, background sleep alive = %v; want nil", err)
	}
}

// TestDrainGrandchildTail is the case of the issue, on the real clock: the
// child exits at once, its grandchild writes "ta", 30 ms later "il", and
// then holds stdout silently. The record is final one quiet window after
// the last byte, with all of the output.
func TestDrainGrandchildTail(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{DrainQuiet: 500 * time.Millisecond})
	start := time.Now()
	p := mustStart(t, m, helperReq("lc-spawn", "nopid", "lc-tail"))
	s := waitFinal(ctx, t, p)
	elapsed := time.Since(start)
	if s.Output.Text != "tail" || s.Output.Truncation != nil {
		t.Errorf("Output() = %q (%+v); want %q", s.Output.Text, s.Output.Truncation, "tail")
	}
	wantExit(t, s, 0)
	// The grandchild holds stdout for 30 s; the drain must not wait for it.
	if elapsed > 10*time.Second {
		t.Errorf("final after %v; want about DrainQuiet (500ms) after the last byte", elapsed)
	}
}

// TestDrainChunks drives a grandchild's output against the mock clock:
// the drain waits for a quiet window that every chunk restarts (the
// issue's "ta" ... "il" case), EOF ends it at once, and DrainTimeout caps
// it.
func TestDrainChunks(t *testing.T) {
	t.Parallel()

	t.Run("chunk-restarts-quiet-window", func(t *testing.T) {
		t.Parallel()
		const quiet = 100 * time.Millisecond
		ctx, mClock, m := testMockManager(t, proc.Options{DrainQuiet: quiet})
		path, f := lcFIFO(t)
		quietTrap := mClock.Trap().NewTimer("drain", "quiet")
		defer quietTrap.Close()
		resetTrap := mClock.Trap().TimerReset("drain", "quiet")
		defer resetTrap.Close()

		p := mustStart(t, m, helperReq("lc-spawn", "nopid", "lc-cat", path))
		// The drain's first timer: the child exited, the grandchild holds
		// stdout.
		releaseTrapped(ctx, t, quietTrap, quiet, "quiet timer")
		lcCheckRunning(t, p.Info())

		lcWrite(t, f, "ta")
		call := resetTrap.MustWait(ctx)
		if call.Duration != quiet {
			t.Errorf("quiet timer reset to %v; want DrainQuiet %v", call.Duration, quiet)
		}
		if got := p.Output().Text; got != "ta" {
			t.Errorf("Output() at the first chunk's reset = %q; want %q", got, "ta")
		}
		call.MustRelease(ctx)
		mClock.Advance(quiet / 2).MustWait(ctx)
		lcCheckPeek(t, mClock, quiet/2, "half a window after the first chunk")

		lcWrite(t, f, "il")
		resetTrap.MustWait(ctx).MustRelease(ctx)
		lcCheckPeek(t, mClock, quiet, "at the second chunk")
		mClock.Advance(quiet / 2).MustWait(ctx)
		// The window the first chunk opened is over; the second one's is not.
		lcCheckPeek(t, mClock, quiet/2, "one window after the first chunk")
		lcCheckRunning(t, p.Info())

		mClock.Advance(quiet / 2).MustWait(ctx)
		s := waitFinal(ctx, t, p)
		lcCheckFinal(t, s.Info)
		if s.Output.Text != "tail" {
			t.Errorf("Output() = %q; want %q", s.Output.Text, "tail")
		}
		wantExit(t, s, 0)
		if !s.Info.ExitedAt.Equal(s.Info.StartedAt) {
			t.Errorf("ExitedAt = %v; want the exit time %v, not the end of the drain", s.Info.ExitedAt, s.Info.StartedAt)
		}
	})

	t.Run("EOF-mid-drain", func(t *testing.T) {
		t.Parallel()
		ctx, mClock, m := testMockManager(t, proc.Options{})
		path, f := lcFIFO(t)
		quietTrap := mClock.Trap().NewTimer("drain", "quiet")
		defer quietTrap.Close()

		p := mustStart(t, m, helperReq("lc-spawn", "nopid", "lc-cat", path))
		quietTrap.MustWait(ctx).MustRelease(ctx)
		lcCheckRunning(t, p.Info())
		// The grandchild writes its last words and exits: EOF, with the
		// mock clock standing still.
		lcWrite(t, f, "last words\n")
		_ = f.Close()
		s := waitFinal(ctx, t, p)
		if s.Output.Text != "last words\n" {
			t.Errorf("Output() = %q; want %q", s.Output.Text, "last words\n")
		}
		lcCheckFinal(t, s.Info)
	})

	// A grandchild that writes without pause keeps resetting the quiet
	// window; DrainTimeout ends the drain all the same.
	t.Run("cap-ends-endless-output", func(t *testing.T) {
		t.Parallel()
		const drainCap = 2 * time.Second
		// A quiet window longer than the cap: only the cap can end it.
		ctx, mClock, m := quietMockManager(t, proc.Options{DrainQuiet: time.Hour, DrainTimeout: drainCap})
		quietTrap := mClock.Trap().NewTimer("drain", "quiet")
		defer quietTrap.Close()
		capTrap := mClock.Trap().NewTimer("drain", "cap")
		defer capTrap.Close()

		p := mustStart(t, m, helperReq("lc-spawn", "nopid", "lc-flood"))
		quietTrap.MustWait(ctx).MustRelease(ctx)
		releaseTrapped(ctx, t, capTrap, drainCap, "drain cap timer")
		lcCheckRunning(t, p.Info())
		if err := p.WaitOutput(ctx, 0); err != nil {
			t.Fatalf("WaitOutput(0) = %v", err)
		}

		mClock.Advance(drainCap).MustWait(ctx)
		s := waitFinal(ctx, t, p)
		lcCheckFinal(t, s.Info)
		if s.Info.OutputBytes == 0 {
			t.Errorf("final OutputBytes = 0; want the flood's bytes")
		}
		wantExit(t, s, 0)
		// I1: nothing changes after final, though the grandchild may still
		// be writing into a closed pipe.
		if again := p.Snapshot(); again.Info.OutputBytes != s.Info.OutputBytes || !reflect.DeepEqual(again.Output, s.Output) {
			t.Errorf("after final: OutputBytes %d -> %d, output changed %v", s.Info.OutputBytes, again.Info.OutputBytes, !reflect.DeepEqual(again.Output, s.Output))
		}
	})
}
