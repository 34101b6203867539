//go:build linux && !proc_otherunix

package proc_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/procvisor/proc"
)

// listen-line waits for a line on stdin, then listens on a TCP port of
// 127.0.0.1, prints "listening PID PORT", and exits at the end of stdin.
var _ = helper("listen-line", func([]string) int {
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		fmt.Println("read:", err)
		return 3
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		fmt.Println("listen:", err)
		return 3
	}
	defer l.Close()
	fmt.Printf("listening %d %d\n", os.Getpid(), l.Addr().(*net.TCPAddr).Port)
	_, _ = io.Copy(io.Discard, in)
	return 0
})

// TestWaitListening drives WaitListening with a mock clock, for a child
// and for a grandchild that listens: it looks at once, then at each tick
// of a ticker tagged "activity", "listen" (25 ms: noticed within 50), and
// returns the listener the tree opened, with the PID that holds it; one
// the tree has already is returned at once, even to an ended ctx; a port
// the tree does not listen on waits until ctx ends, or until the record
// is final (ErrNotRunning).
func TestWaitListening(t *testing.T) {
	t.Parallel()
	proc.BothWays(t, "child", "grandchild", func(t *testing.T, grandchild bool) {
		ctx, mClock, m := testMockManager(t, proc.Options{})
		trap := mClock.Trap().NewTicker("activity", "listen")
		defer trap.Close()
		req := helperReq("listen-line")
		req.Stdin = true
		if grandchild {
			// An asynchronous list reads /dev/null unless told.
			req.Args = append([]string{"sh", "-c", `exec 3<&0; "$@" <&3 3<&- & wait`, "sh"}, req.Args...)
		}
		p := mustStart(t, m, req)
		type result struct {
			l   proc.Listener
			err error
		}
		res := make(chan result, 1)
		// Ends at the listener, or with ctx.
		go func() {
			l, err := p.WaitListening(ctx, 0)
			res <- result{l, err}
		}()
		call := trap.MustWait(ctx) // the first look found none
		if call.Duration > 25*time.Millisecond {
			t.Errorf("WaitListening polls every %v; want 25ms at most (noticed within 50ms)", call.Duration)
		}
		call.MustRelease(ctx)
		trap.Close()
		if _, err := p.Write([]byte("listen\n")); err != nil {
			t.Fatal(err)
		}
		var pid, port int
		line := waitLine(ctx, t, p, regexp.MustCompile(`^(listening|listen:|read:) `))
		if _, err := fmt.Sscanf(line, "listening %d %d", &pid, &port); err != nil {
			t.Fatalf("helper: %q", line)
		}
		select {
		case r := <-res:
			t.Fatalf("WaitListening returned %+v, %v before the clock ticked", r.l, r.err)
		default:
		}
		mClock.Advance(call.Duration).MustWait(ctx)
		want := proc.Listener{Network: "tcp", Address: fmt.Sprintf("127.0.0.1:%d", port), Port: port, PID: pid}
		if r := recv(ctx, t, res, "WaitListening"); r.err != nil || r.l != want {
			t.Fatalf("WaitListening(0) = %+v, %v; want %+v", r.l, r.err, want)
		}
		if grandchild == (pid == p.Info().PID) {
			t.Errorf("listener PID %d, child PID %d: grandchild %v", pid, p.Info().PID, grandchild)
		}

		over, cancel := context.WithCancel(ctx)
		cancel()
		if l, err := p.WaitListening(over, port); err != nil || l != want {
			t.Errorf("WaitListening(ended ctx, %d) = %+v, %v; want %+v at once (it listens already)", port, l, err, want)
		}
		other := port%65535 + 1
		if l, err := p.WaitListening(over, other); !errors.Is(err, context.Canceled) {
			t.Errorf("WaitListening(ended ctx, %d) = %+v, %v; want context.Canceled", other, l, err)
		}

		// The record becomes final first: ErrNotRunning.
		bctx := newCVBlockedCtx(ctx)
		// Ends when the record is final.
		go func() {
			l, err := p.WaitListening(bctx, other)
			res <- result{l, err}
		}()
		select {
		case <-bctx.waiting.Done():
		case r := <-res:
			t.Fatalf("WaitListening(%d) = %+v, %v; want it to wait", other, r.l, r.err)
		}
		if err := p.CloseStdin(); err != nil {
			t.Fatal(err)
		}
		if r := recv(ctx, t, res, "WaitListening"); !errors.Is(r.err, proc.ErrNotRunning) {
			t.Errorf("WaitListening(%d) across the exit = %+v, %v; want ErrNotRunning", other, r.l, r.err)
		}
		waitFinal(ctx, t, p)
		if l, err := p.WaitListening(ctx, 0); !errors.Is(err, proc.ErrNotRunning) {
			t.Errorf("WaitListening of a final record = %+v, %v; want ErrNotRunning", l, err)
		}
	})
}

// TestWaitListeningReal: on the real clock, listeners a tree has already
// (two grandchildren's) are found at once: the lowest port for 0, each by
// its port.
func TestWaitListeningReal(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	listen := helperReq("activity-listen", "tcp4", "127.0.0.1:0")
	req := listen
	req.Args = append([]string{"sh", "-c", `"$@" & "$@" & wait`, "sh"}, listen.Args...)
	p := startIn(t, treeModes[0], req)
	a := waitActivity(ctx, t, p, "two listeners", func(a proc.Activity) bool { return len(a.Listeners) == 2 })
	if a.Listeners[0].Port >= a.Listeners[1].Port {
		t.Fatalf("Activity().Listeners = %+v; want them sorted by port", a.Listeners)
	}
	if l, err := p.WaitListening(ctx, 0); err != nil || l != a.Listeners[0] {
		t.Errorf("WaitListening(0) = %+v, %v; want the lowest port's %+v", l, err, a.Listeners[0])
	}
	for _, want := range a.Listeners {
		if l, err := p.WaitListening(ctx, want.Port); err != nil || l != want {
			t.Errorf("WaitListening(%d) = %+v, %v; want %+v", want.Port, l, err, want)
		}
	}
}
