//go:build unix

package proc_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/procvisor/proc"
	"golang.org/x/sys/unix"
)

// Stdin on Unix: writes blocked on a pipe nobody reads and what releases
// them (the exit, Close, CloseStdin, a context), and the terminal's ^D.

// TestStdinAfterExitWhileDraining pins that Write and CloseStdin fail with
// ErrNotRunning as soon as the child exited, without waiting for a drain
// that a grandchild holding stdin and stdout keeps open.
func TestStdinAfterExitWhileDraining(t *testing.T) {
	t.Parallel()
	ctx, mClock, m := quietMockManager(t, proc.Options{})
	quiet := mClock.Trap().NewTimer("drain", "quiet")
	defer quiet.Close()

	p := startStdin(t, m, helperReq("interactive-leave-holder"))
	// The drain arms its quiet window once the child was reaped.
	quiet.MustWait(ctx).MustRelease(ctx)

	iaRefused(ctx, t, p, "after exit", proc.ErrNotRunning, iaStdinCalls...)
	lcCheckRunning(t, p.Info())
	// Not final: no EOF, and WaitOutput does not return nil for the exit.
	if c := p.ReadSince(0, 0); c.EOF {
		t.Errorf("ReadSince(0, 0).EOF = true while draining")
	}
	expired, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.WaitOutput(expired, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitOutput(cancelled, 0) while draining = %v; want context.Canceled", err)
	}

	iaKillAndWait(ctx, t, p)
	iaRefused(ctx, t, p, "after final", proc.ErrNotRunning, "Write")
}

// TestWriteBlockedWhenChildExits pins that a write blocked on a pipe that a
// grandchild holds without reading returns ErrNotRunning when the child
// exits, not when the drain ends and not a raw EPIPE.
func TestWriteBlockedWhenChildExits(t *testing.T) {
	t.Parallel()
	ctx, _, m := quietMockManager(t, proc.Options{})
	p := startStdin(t, m, helperReq("interactive-exit-on-input"))

	const size = 10 << 20
	n, err := p.WriteContext(ctx, make([]byte, size))
	if !errors.Is(err, proc.ErrNotRunning) {
		t.Fatalf("WriteContext(10 MiB) blocked at exit = %d, %v; want ErrNotRunning", n, err)
	}
	if n <= 0 || n >= size {
		t.Errorf("WriteContext(10 MiB) blocked at exit wrote %d bytes; want 0 < n < %d", n, size)
	}
	if !p.Info().Running {
		t.Errorf("Info().Running = false; want true: the drain cannot end on a mock clock while the holder lives")
	}
	iaKillAndWait(ctx, t, p)
	if code := exitCode(t, p.Info()); code != 0 {
		t.Errorf("exit code = %d; want 0; output %q", code, p.Output().Text)
	}
}

// TestWriteBlockedReleasedByClose pins that Manager.Close releases a
// blocked writer with ErrClosed.
func TestWriteBlockedReleasedByClose(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	const size = 10 << 20
	p, res := iaBlockedWrite(ctx, t, m, helperReq("interactive-input-then-wait"), "", size, true)
	if err := m.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	r := recv(ctx, t, res, "the blocked write")
	if !errors.Is(r.err, proc.ErrClosed) || r.n <= 0 || r.n >= size {
		t.Errorf("WriteContext(10 MiB) blocked during Close = %d, %v; want 0 < n < %d, ErrClosed", r.n, r.err, size)
	}
	if p.Info().Running {
		t.Errorf("Info().Running = true after Close returned")
	}
}

// TestWriteToClosedStdin pins that a child that closed its stdin but lives
// on makes Write fail with EPIPE, not ErrNotRunning.
func TestWriteToClosedStdin(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	p := startStdin(t, m, helperReq("interactive-close-stdin"))
	waitText(ctx, t, p, "closed\n")

	n, err := p.Write([]byte("x"))
	if n != 0 || !errors.Is(err, unix.EPIPE) {
		t.Errorf("Write to a closed stdin = %d, %v; want 0, EPIPE", n, err)
	}
	if errors.Is(err, proc.ErrNotRunning) {
		t.Errorf("Write to a closed stdin = %v; want not ErrNotRunning (the child lives)", err)
	}
	if !p.Info().Running {
		t.Errorf("Info().Running = false; want true")
	}
}

// TestWriteInExitWindow pins that a write refused because the child is
// gone is ErrNotRunning, never a raw "broken pipe", also right after the
// child was reaped. The mock clock holds the exit goroutine at its first
// clock call after cmd.Wait; stdin must be refused before that call (were
// it after, the write would meet the bare broken pipe).
func TestWriteInExitWindow(t *testing.T) {
	t.Parallel()
	ctx, mClock, m := quietMockManager(t, proc.Options{})
	exit := mClock.Trap().Now("process", "exit")
	defer exit.Close()

	req := mgrExitReq(0)
	req.Stdin = true
	p := mustStart(t, m, req)
	call := exit.MustWait(ctx) // the child was reaped; the exit is not published
	n, err := p.Write([]byte("x"))
	call.MustRelease(ctx)
	if n != 0 || !errors.Is(err, proc.ErrNotRunning) {
		t.Errorf("Write after the child was reaped = %d, %v; want 0, ErrNotRunning", n, err)
	}
	waitFinal(ctx, t, p)
}

// TestCloseStdinReleasesBlockedWrite pins that CloseStdin on a pipe ends a
// write blocked on it: the write returns what it wrote and ErrInvalid, as a
// write after CloseStdin does.
func TestCloseStdinReleasesBlockedWrite(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	const size = 10 << 20
	p, res := iaBlockedWrite(ctx, t, m, helperReq("interactive-input-then-wait"), "", size, false)

	err, ok := iaBounded(ctx, t, m, "CloseStdin() during a blocked Write", p.CloseStdin)
	if !ok {
		return
	}
	if err != nil {
		t.Errorf("CloseStdin() during a blocked Write = %v; want nil", err)
	}
	r := recv(ctx, t, res, "the blocked write")
	if r.n <= 0 || r.n >= size || !errors.Is(r.err, proc.ErrInvalid) {
		t.Errorf("Write(10 MiB) interrupted by CloseStdin = %d, %v; want 0 < n < %d, ErrInvalid", r.n, r.err, size)
	}
	if !p.Info().Running {
		t.Errorf("Info().Running = false; want true (the helper lives on)")
	}
}

// TestWriteContextQueuedBehindBlockedWrite pins that WriteContext honours
// its context while it waits for an earlier write that is blocked (writes
// are serialised): it is a blocking call and must end with its context.
func TestWriteContextQueuedBehindBlockedWrite(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	// A write with no deadline: it never ends by itself.
	p, res := iaBlockedWrite(ctx, t, m, helperReq("interactive-input-then-wait"), "", 10<<20, false)

	err, ok := iaBounded(ctx, t, m, "WriteContext(100ms) behind a blocked Write", func() error {
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		n, err := p.WriteContext(wctx, []byte("y"))
		if n != 0 {
			return fmt.Errorf("wrote %d bytes: %w", n, err)
		}
		return err
	})
	if ok && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WriteContext(100ms) behind a blocked Write = %v; want 0, context.DeadlineExceeded", err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if r := recv(ctx, t, res, "the blocked write"); !errors.Is(r.err, proc.ErrClosed) {
		t.Errorf("Write(10 MiB) blocked during Close = %d, %v; want ErrClosed", r.n, r.err)
	}
}

// TestTTYCloseStdinBlockedWrite pins that CloseStdin on a terminal does
// not hang behind a Write blocked on a full input queue (the program reads
// nothing), as it does not with a pipe: CloseStdin takes no context, so
// nothing else could end it. The blocked write ends with ErrInvalid, like a
// write that CloseStdin interrupts on a pipe, and so do later writes.
func TestTTYCloseStdinBlockedWrite(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	// Non-canonical, so that one byte makes the terminal readable.
	req := helperReq("interactive-input-then-wait")
	// "set" once the terminal no longer echoes: a write before that would
	// echo megabytes of x's into the output the test waits on.
	req.Command = "stty -icanon -echo && echo set && exec " + iaShellQuote(req.Args[0])
	req.Args = nil
	req.TTY = true
	const size = 4 << 20
	p, res := iaBlockedWrite(ctx, t, m, req, "set\r\n", size, false) // nobody reads it

	err, ok := iaBounded(ctx, t, m, "CloseStdin() behind a blocked Write on a terminal", p.CloseStdin)
	if !ok {
		return
	}
	// Whether ^D fits into the full queue is the kernel's business, so the
	// result is not pinned; only that CloseStdin returns and closes.
	t.Logf("CloseStdin() = %v", err)
	iaRefused(ctx, t, p, "after CloseStdin", proc.ErrInvalid, "Write")
	r := recv(ctx, t, res, "the blocked write")
	if r.n >= size || !errors.Is(r.err, proc.ErrInvalid) {
		t.Errorf("Write(4 MiB) interrupted by CloseStdin = %d, %v; want n < %d, ErrInvalid", r.n, r.err, size)
	}
}

// TestExitedRefusesStdin: once the child was reaped, Write, WriteContext
// and CloseStdin fail at once with ErrNotRunning, although the record is
// not final (a background child holds stdout and the mock clock keeps the
// drain open).
func TestExitedRefusesStdin(t *testing.T) {
	t.Parallel()
	ctx, mClock, m := testMockManager(t, proc.Options{})
	quietTrap := mClock.Trap().NewTimer("drain", "quiet")
	defer quietTrap.Close()

	p := mustStart(t, m, proc.StartRequest{Command: "sleep 30 & exit 0", Stdin: true})
	quietTrap.MustWait(ctx).MustRelease(ctx)

	iaRefused(ctx, t, p, "exited, draining", proc.ErrNotRunning, iaStdinCalls...)
	lcCheckRunning(t, p.Info())

	mClock.Advance(proc.DefaultDrainQuiet).MustWait(ctx)
	s := waitFinal(ctx, t, p)
	lcCheckFinal(t, s.Info)
	wantExit(t, s, 0)
	iaRefused(ctx, t, p, "final", proc.ErrNotRunning, iaStdinCalls...)
	if err := p.Signal(proc.Kill); err != nil {
		t.Errorf("Signal(Kill) after final, background sleep alive = %v; want nil", err)
	}
}
