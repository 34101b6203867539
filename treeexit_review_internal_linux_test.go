//go:build linux && !proc_otherunix

package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/quartz"
)

// blockingWriter is a tee whose Writes block until release is closed.
type blockingWriter struct{ release chan struct{} }

func (w *blockingWriter) Write(b []byte) (int, error) {
	<-w.release
	return len(b), nil
}

// TestHandoffGrandchildDrainBounded pins that a grandchild holding the
// pipe past the child's exit, writing all the while (so the quiet window
// never ends it), holds the record at most DrainTimeout after the exit:
// the exit watch makes the exit goroutine, whose drain is capped, while
// the grandchild still runs (it ignores SIGPIPE: the closed pipe does
// not end it), and Signal still reaches it.
func TestHandoffGrandchildDrainBounded(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := handoffManager(t)
	p, err := m.Start(StartRequest{
		Command:      "(trap '' PIPE; while :; do echo x; sleep 0.01; done) & echo hi; exit 4",
		DrainQuiet:   time.Minute,
		DrainTimeout: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("Start = %v", err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait() = %v (the grandchild held the record past DrainTimeout)", err)
	}
	if got := p.end.owner.Load(); got != endByExit {
		t.Errorf("ended by %d; want the exit goroutine (%d)", got, endByExit)
	}
	// The background loop may print before the shell's echo does.
	if info := p.Info(); info.ExitCode == nil || *info.ExitCode != 4 || !strings.Contains("\n"+p.Output().Text, "\nhi\n") {
		t.Errorf("exit %v, output %q; want 4, with the line %q", info.ExitCode, p.Output().Text, "hi")
	}
	if err := p.Signal(Kill); err != nil {
		t.Errorf("Signal(Kill) after final, grandchild alive = %v; want nil", err)
	}
}

// TestHandoffClosedOutputRunsOn pins a child that closes its output and
// runs on: the pump takes the end at its EOF, the record stays running
// (Done open, Running true) until the child exits, Signal reaches it, and
// only its exit makes the record final, with the signal.
func TestHandoffClosedOutputRunsOn(t *testing.T) {
	t.Parallel()
	ctx, _, p := handoffStart(t, StartRequest{Command: "echo out; exec >&- 2>&-; exec sleep 60"})
	spinUntil(ctx, t, "the pump takes the end at its EOF", func() bool { return p.end.owner.Load() == endByPump })
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	err := p.Wait(short)
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait while the child runs with its output closed = %v; want the context's end", err)
	}
	if !p.Info().Running {
		t.Fatal("not running while the child runs with its output closed")
	}
	if err := p.Signal(Terminate); err != nil {
		t.Fatalf("Signal(Terminate) = %v", err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	if info := p.Info(); info.Signal == "" || p.Output().Text != "out\n" {
		t.Errorf("signal %q, output %q; want a signal, %q", info.Signal, p.Output().Text, "out\n")
	}
}

// TestHandoffTeeBlocks pins that an OutputTee that blocks for good does
// not hold the record past DrainTimeout after the exit, whichever way the
// end is taken.
func TestHandoffTeeBlocks(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := handoffManager(t)
	tee := &blockingWriter{release: make(chan struct{})}
	// Released after Close: the tee's Write then returns (goleak).
	t.Cleanup(func() { close(tee.release) })
	for _, cmd := range []string{"echo hi; exit 2", "echo hi; exec >&- 2>&-; exit 2"} {
		p, err := m.Start(StartRequest{Command: cmd, OutputTee: tee, DrainTimeout: 100 * time.Millisecond})
		if err != nil {
			t.Fatalf("Start = %v", err)
		}
		if err := p.Wait(ctx); err != nil {
			t.Fatalf("%q: Wait() = %v (a blocked tee held the record)", cmd, err)
		}
		if code := p.Info().ExitCode; code == nil || *code != 2 {
			t.Errorf("%q: exit %v; want 2", cmd, code)
		}
	}
}

// TestHandoffCloseWhilePumpWaits pins Manager.Close while the pump owns
// the end and waits for the exit watch to see the child's exit: Close
// stops the child, the record becomes final, Close returns.
func TestHandoffCloseWhilePumpWaits(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := NewManager(Options{Containment: ContainGroup})
	var ps []*Process
	for range 4 {
		p, err := m.Start(StartRequest{Command: "exec >&- 2>&-; exec sleep 60"})
		if err != nil {
			_ = m.Close()
			t.Fatalf("Start = %v", err)
		}
		ps = append(ps, p)
	}
	for _, p := range ps {
		spinUntil(ctx, t, "the pump takes the end at its EOF", func() bool { return p.end.owner.Load() == endByPump })
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	wantSignalled(t, ps...)
}

// TestHandoffFailOverPumpWaits pins the exit watch's fail-over for a
// record whose pump owns the end and waits for the exit the watch was to
// report: the goroutine each such record gets sees it.
func TestHandoffFailOverPumpWaits(t *testing.T) {
	t.Parallel()
	ctx, m, p := handoffStart(t, StartRequest{Command: "exec >&- 2>&-; read x; exit 6", Stdin: true})
	spinUntil(ctx, t, "the pump takes the end at its EOF", func() bool { return p.end.owner.Load() == endByPump })
	w := &m.trees.exits
	w.mu.Lock()
	ep, done := w.ep, w.done
	w.mu.Unlock()
	_ = ep.Close()
	<-done
	closeStdinExits(ctx, t, p, 6)
}

// TestHandoffStartsRaceClose pins that starts racing Manager.Close give
// every child the shared /dev/null as its stdin, never a descriptor Close
// closed and another file took: each child that got to print names
// /dev/null. Close ends the rest.
func TestHandoffStartsRaceClose(t *testing.T) {
	t.Parallel()
	for round := range 5 {
		m := NewManager(Options{Containment: ContainGroup})
		var (
			mu    sync.Mutex
			procs []*Process
			wg    sync.WaitGroup
		)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					p, err := m.Start(StartRequest{Command: "readlink /proc/self/fd/0"})
					if err != nil {
						if !errors.Is(err, ErrClosed) {
							t.Errorf("Start = %v; want nil or ErrClosed", err)
						}
						return
					}
					mu.Lock()
					procs = append(procs, p)
					mu.Unlock()
				}
			}()
		}
		for {
			mu.Lock()
			n := len(procs)
			mu.Unlock()
			if n >= 10*(round+1) {
				break
			}
			runtime.Gosched()
		}
		if err := m.Close(); err != nil {
			t.Fatalf("Close() = %v", err)
		}
		wg.Wait()
		for _, p := range procs {
			if out := p.Output().Text; out != "" && out != "/dev/null\n" {
				t.Errorf("round %d: a child's stdin was %q; want /dev/null", round, out)
			}
			if p.Info().Running {
				t.Errorf("round %d: running after Close", round)
			}
		}
	}
}

// TestHandoffTimeoutAfterOutputClosed pins a timeout that fires while the
// pump owns the end (the child closed its output and runs on): the child
// is timed out, and the record says so once its exit is seen.
func TestHandoffTimeoutAfterOutputClosed(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mClock := quartz.NewMock(t)
	trap := mClock.Trap().AfterFunc("process", "timeout")
	defer trap.Close()
	m := NewManager(Options{Containment: ContainGroup, Clock: mClock})
	t.Cleanup(func() { _ = m.Close() })
	const timeout = time.Second
	started := make(chan *Process, 1)
	go func() {
		p, err := m.Start(StartRequest{Command: "exec >&- 2>&-; exec sleep 60", Timeout: timeout})
		if err != nil {
			t.Errorf("Start = %v", err)
		}
		started <- p
	}()
	trap.MustWait(ctx).MustRelease(ctx)
	p := <-started
	if p == nil {
		return
	}
	spinUntil(ctx, t, "the pump takes the end at its EOF", func() bool { return p.end.owner.Load() == endByPump })
	mClock.Advance(timeout).MustWait(ctx)
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	if info := p.Info(); !info.TimedOut || info.ExitCode == nil || *info.ExitCode != ExitTimedOut {
		t.Errorf("timed out %v, exit %v; want true, %d", info.TimedOut, info.ExitCode, ExitTimedOut)
	}
}

// TestHandoffModes runs the hand-over's ways to end in group and cgroup
// mode, plain and sandboxed: `true` (the pump at EOF), a child that
// closes its output and is then signalled (the pump waiting for the
// exit), a grandchild that holds the pipe (the exit goroutine, whose
// drain is capped), and Close while the pump waits. Each record is final
// with its exit.
func TestHandoffModes(t *testing.T) {
	t.Parallel()
	for _, mode := range []Containment{ContainGroup, ContainCgroup} {
		for _, sandboxed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s-sandbox-%v", mode, sandboxed), func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				opts := Options{Containment: mode}
				if sandboxed {
					opts.Sandbox = &Sandbox{}
				}
				m := NewManager(opts)
				closed := false
				t.Cleanup(func() {
					if !closed {
						_ = m.Close()
					}
				})
				start := func(req StartRequest) *Process {
					t.Helper()
					p, err := m.Start(req)
					if errors.Is(err, ErrUnsupported) {
						t.Skipf("Start(%+v) = %v", req, err)
					}
					if err != nil {
						t.Fatalf("Start(%+v) = %v", req, err)
					}
					return p
				}
				p := start(StartRequest{Command: "echo a; exit 3"})
				if err := p.Wait(ctx); err != nil {
					t.Fatalf("Wait() = %v", err)
				}
				if code := p.Info().ExitCode; code == nil || *code != 3 || p.Output().Text != "a\n" {
					t.Errorf("exit %v, output %q; want 3, %q", code, p.Output().Text, "a\n")
				}

				p = start(StartRequest{Command: "echo b; exec >&- 2>&-; exec sleep 60"})
				spinUntil(ctx, t, "the pump takes the end at its EOF", func() bool { return p.end.owner.Load() == endByPump })
				if err := p.Signal(Kill); err != nil {
					t.Fatalf("Signal(Kill) = %v", err)
				}
				if err := p.Wait(ctx); err != nil {
					t.Fatalf("Wait() = %v", err)
				}
				if info := p.Info(); info.Signal != "SIGKILL" || p.Output().Text != "b\n" {
					t.Errorf("signal %q, output %q; want SIGKILL, %q", info.Signal, p.Output().Text, "b\n")
				}

				p = start(StartRequest{Command: "(trap '' PIPE; while :; do echo x; sleep 0.01; done) & echo c; exit 4", DrainQuiet: time.Minute, DrainTimeout: 100 * time.Millisecond})
				if err := p.Wait(ctx); err != nil {
					t.Fatalf("Wait() = %v", err)
				}
				// The background loop may print before the echo does.
				if code := p.Info().ExitCode; code == nil || *code != 4 || !strings.Contains("\n"+p.Output().Text, "\nc\n") {
					t.Errorf("exit %v, output %q; want 4, with the line %q", code, p.Output().Text, "c")
				}
				if err := p.Signal(Kill); err != nil {
					t.Errorf("Signal(Kill) to the grandchild left = %v", err)
				}

				waiting := start(StartRequest{Command: "exec >&- 2>&-; exec sleep 60"})
				spinUntil(ctx, t, "the pump takes the end at its EOF", func() bool { return waiting.end.owner.Load() == endByPump })
				closed = true
				if err := m.Close(); err != nil {
					t.Fatalf("Close() = %v", err)
				}
				wantSignalled(t, waiting)
			})
		}
	}
}

// TestHandoffEndDelivers pins, for each way a handed-over record ends
// (the pump at EOF with the exit, the pump waiting for a child that closed
// its output, the exit goroutine for a grandchild that holds the pipe), that
// a follower reads every byte before io.EOF, a WaitFor of the last line
// finds it, and the watches' matched events (one literal, matched on the
// pump's path, one without, matched beside) come before the final one.
func TestHandoffEndDelivers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m := handoffManager(t)
	const lines = 2000
	body := fmt.Sprintf("i=0; while [ $i -lt %d ]; do echo line$i; i=$((i+1)); done; echo last-line", lines)
	for _, tt := range []struct {
		name, cmd string
		stdin     bool
	}{
		{"exits", body, false},
		{"closes-output", body + "; exec >&- 2>&-; read x", true},
		{"grandchild", "sleep 2 & " + body, false},
	} {
		p, err := m.Start(StartRequest{
			Command: tt.cmd, Stdin: tt.stdin, DrainQuiet: 20 * time.Millisecond,
			Watch: []Watch{{Name: "near", Pattern: "last-line"}, {Name: "beside", Pattern: `^l.st-l.ne$`}},
		})
		if err != nil {
			t.Fatalf("%s: Start = %v", tt.name, err)
		}
		f, err := p.Follow(0, FollowOptions{Window: MaxFollowWindow})
		if err != nil {
			t.Fatalf("%s: Follow = %v", tt.name, err)
		}
		line, err := p.WaitFor(ctx, regexp.MustCompile(`^last-line$`), true)
		if err != nil || line != "last-line" {
			t.Fatalf("%s: WaitFor = %q, %v; want last-line", tt.name, line, err)
		}
		if tt.stdin {
			spinUntil(ctx, t, "the pump takes the end at its EOF", func() bool { return p.end.owner.Load() == endByPump })
			if err := p.CloseStdin(); err != nil {
				t.Fatalf("%s: CloseStdin() = %v", tt.name, err)
			}
		}
		var got strings.Builder
		buf := make([]byte, 4096)
		for {
			c, err := f.Read(ctx, buf)
			got.Write(c.Data)
			if c.Lost != 0 {
				t.Errorf("%s: follower lost %d bytes", tt.name, c.Lost)
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: Read = %v", tt.name, err)
			}
		}
		_ = f.Close()
		if !p.isFinal() {
			t.Errorf("%s: follower at io.EOF before the record is final", tt.name)
		}
		if !strings.HasSuffix(got.String(), "line1999\nlast-line\n") || strings.Count(got.String(), "\n") != lines+1 {
			t.Errorf("%s: follower read %d lines ending %q; want %d ending in last-line", tt.name, strings.Count(got.String(), "\n"), tail(got.String()), lines+1)
		}
		evs, _, _ := m.Events(0, 0)
		var kinds []string
		for _, ev := range evs {
			if ev.ID == p.ID() {
				kinds = append(kinds, string(ev.Kind)+":"+ev.Watch)
			}
		}
		if !slices.Equal(kinds, []string{"started:", "matched:near", "matched:beside", "final:"}) && !slices.Equal(kinds, []string{"started:", "matched:beside", "matched:near", "final:"}) {
			t.Errorf("%s: events %q; want started, both matched, final", tt.name, kinds)
		}
	}
}

func tail(s string) string { return s[max(0, len(s)-40):] }
