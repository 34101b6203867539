package proc

import (
	"context"
	"testing"
	"time"
)

// outputRecovered calls b.Output on a goroutine of its own and returns
// what it returned, or that it panicked; it fails t if the call has not
// returned when ctx ends (a caller left waiting for good).
func outputRecovered(ctx context.Context, t *testing.T, b *HeadTailBuffer) (out Output, panicked bool) {
	t.Helper()
	type result struct {
		out      Output
		panicked bool
	}
	done := make(chan result, 1) // one sender, never blocks
	// Ends when Output returns or panics.
	go func() {
		defer func() {
			if recover() != nil {
				done <- result{panicked: true}
			}
		}()
		done <- result{out: b.Output()}
	}()
	select {
	case r := <-done:
		return r.out, r.panicked
	case <-ctx.Done():
		t.Fatalf("Output() still waiting after a render panicked: %v", ctx.Err())
		return Output{}, false
	}
}

// TestOutputAfterRenderPanic pins that a render that panics (a bug of
// ours, recovered by the caller) leaves neither later callers waiting for
// it for good nor a broken rendering behind as the buffer's final one: a
// later Output renders again. A lineMax below zero, which no constructor
// makes, stands in for the bug: the line cutter reads past the end.
func TestOutputAfterRenderPanic(t *testing.T) {
	t.Parallel()
	bothWays(t, "running", "finished", func(t *testing.T, finished bool) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		b := NewHeadTailBuffer(16, 16, 0)
		_, _ = b.Write([]byte("a\n"))
		if finished {
			b.Finish()
		}
		b.lineMax = -1 // the bug; nothing else reads it concurrently
		if _, panicked := outputRecovered(ctx, t, b); !panicked {
			t.Fatalf("Output() with lineMax -1 did not panic; the test needs a render that does")
		}
		// The next caller is not left waiting for the panicked
		// rendering: it renders, and panics, itself.
		if _, panicked := outputRecovered(ctx, t, b); !panicked {
			t.Errorf("second Output() with the bug did not panic; want it to render again")
		}
		b.lineMax = DefaultMaxLineLength // the bug fixed
		if out, panicked := outputRecovered(ctx, t, b); panicked || out.Text != "a\n" {
			t.Errorf("Output() after the panics = %q (panicked %v); want %q", out.Text, panicked, "a\n")
		}
	})
}

// TestOutputWaitingIsNotPolling pins that a caller that finds the
// rendering of the current bytes still being made, and waits for it,
// does not count as a poller of an unchanged rendering (b.polled, the
// Manager's signal): it shares the rendering of a change. Only a call
// that returns a made rendering again does.
func TestOutputWaitingIsNotPolling(t *testing.T) {
	t.Parallel()
	b, peers := sharingBuffer("abc")
	// A rendering of the current bytes under way, whose maker is done
	// (released), so that the call below does not block whether it
	// arrives before or after the release.
	r := &rendering{at: 3, out: Output{Text: "under way"}}
	r.pending.Store(true)
	b.rendered.Store(r)
	if out := b.Output(); out.Text != "under way" {
		t.Fatalf("Output() = %q with a rendering of every byte under way; want that one, %q", out.Text, "under way")
	}
	if b.polledLately() {
		t.Errorf("after an Output() that waited for a rendering under way: polled %v, Manager's signal %v; want both false",
			b.polled.Load(), peers.Load())
	}
	r.pending.Store(false) // made
	if out := b.Output(); out.Text != "under way" {
		t.Fatalf("Output() = %q with a made rendering of every byte; want that one, %q", out.Text, "under way")
	}
	if !b.polled.Load() || !peers.Load() {
		t.Errorf("after an Output() that returned a made rendering again: polled %v, Manager's signal %v; want both true",
			b.polled.Load(), peers.Load())
	}
}

// TestPollersStepAside pins when a caller that returns a rendering again
// also offers its thread's CPU (stepsAside): while a pump of its Manager
// tries its pipe between pollers' turns, whether the record is running
// (its pollers see something new only once that pump has read it) or
// final; never while no pump does, so that a one-off caller is not made
// to wait for another thread's time slice, nor for a buffer of no
// Manager.
func TestPollersStepAside(t *testing.T) {
	t.Parallel()
	b, sig := sharingBuffer("abcdefghij")
	if b.stepsAside() {
		t.Errorf("running buffer, no pump trying: steps aside; want not")
	}
	sig.pumps.Add(1)
	if !b.stepsAside() {
		t.Errorf("running buffer, a pump trying: does not step aside; want it to")
	}
	b.Finish()
	if !b.stepsAside() {
		t.Errorf("finished buffer, a pump trying: does not step aside; want it to")
	}
	sig.pumps.Add(-1)
	if b.stepsAside() {
		t.Errorf("finished buffer, no pump trying: steps aside; want not")
	}
	if NewHeadTailBuffer(4, 4, 0).stepsAside() {
		t.Errorf("buffer of no Manager: steps aside; want not")
	}
}
