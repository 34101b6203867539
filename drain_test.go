package proc_test

import (
	"strings"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/procvisor/proc"
)

// The drain (drain.go, design section 5): the end of output after the
// exit. The Unix cases are in drain_unix_test.go; the tees and the log
// file, the pump's, in pump_test.go.

// TestTeeCutOff: a tee still blocked DrainTimeout after the child's exit
// is cut off, so that the record becomes final (on the mock clock).
func TestTeeCutOff(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	mClock := quartz.NewMock(t)
	capTrap := mClock.Trap().NewTimer("drain", "cap")
	defer capTrap.Close()
	m := newManager(t, proc.Options{Clock: mClock})
	tee := newBlockingTee()
	// Released after the checks: the pump it holds then ends (goleak).
	defer tee.unblock()
	req := helperReq("lc-print", "hello\n")
	req.OutputTee = tee
	p := mustStart(t, m, req)
	recv(ctx, t, tee.started, "the tee's first Write")

	// The child exits; its pipe is at EOF, but the pump is in the tee.
	capTrap.MustWait(ctx).MustRelease(ctx)
	mClock.Advance(proc.DefaultDrainQuiet).MustWait(ctx)
	mClock.Advance(proc.DefaultDrainTimeout - proc.DefaultDrainQuiet - time.Nanosecond).MustWait(ctx)
	if !p.Info().Running {
		t.Fatalf("record final before DrainTimeout passed")
	}
	mClock.Advance(time.Nanosecond).MustWait(ctx)
	snap := waitFinal(ctx, t, p)
	if !strings.HasPrefix(snap.Info.TeeError, "output tee: cut off") {
		t.Errorf("TeeError = %q; want it to say the output tee was cut off", snap.Info.TeeError)
	}
	if exitCode(t, snap.Info) != 0 {
		t.Errorf("exit code %d; want 0", exitCode(t, snap.Info))
	}
}

// TestDrainEOFMockClock: a child whose pipes reach EOF is final at once,
// with a mock clock that never moves: no drain timer has to fire.
func TestDrainEOFMockClock(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	mClock := quartz.NewMock(t)
	m := mockManager(t, mClock, proc.Options{})
	p := mustStart(t, m, helperReq("lc-print", "hi\n"))
	s := waitFinal(ctx, t, p)
	if s.Output.Text != "hi\n" {
		t.Errorf("Output() = %q; want %q", s.Output.Text, "hi\n")
	}
	wantExit(t, s, 0)
	lcCheckFinal(t, s.Info)
	if !s.Info.ExitedAt.Equal(s.Info.StartedAt) {
		t.Errorf("ExitedAt = %v; want StartedAt %v (the mock clock never moved)", s.Info.ExitedAt, s.Info.StartedAt)
	}
}
