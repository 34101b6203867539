package proc

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// headTailStorage returns the capacities of the buffer's head and tail.
func headTailStorage(b *HeadTailBuffer) (head, tail int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return cap(b.head), cap(b.tail)
}

func TestHeadTailBufferStorage(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name               string
		writes             []string
		wantHead, wantTail int // capacities after Finish
	}{
		{name: "empty", wantHead: 0, wantTail: 0},
		{name: "ten-bytes", writes: []string{"0123456789"}, wantHead: 10, wantTail: 0},
		{name: "ten-one-byte-writes", writes: strings.Split("0123456789", ""), wantHead: 10, wantTail: 0},
		{
			name:     "head-and-some-tail",
			writes:   []string{strings.Repeat("h", 16384), "tail"},
			wantHead: 16384,
			wantTail: 4,
		},
		{
			name:     "full-wrapped-ring",
			writes:   []string{strings.Repeat("h", 16384), strings.Repeat("t", 16383), "xy"},
			wantHead: 16384,
			wantTail: 16384,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := NewHeadTailBuffer(0, 0, 0)
			var total int
			for _, w := range tt.writes {
				total += len(w)
				if _, err := b.Write([]byte(w)); err != nil {
					t.Fatalf("Write: %v", err)
				}
			}
			// Storage grows with what was written, never past it by
			// more than doubling.
			if head, tail := headTailStorage(b); head+tail > 2*total {
				t.Errorf("before Finish: cap(head)+cap(tail) = %d; want at most %d", head+tail, 2*total)
			}
			before := b.Output()
			b.Finish()
			head, tail := headTailStorage(b)
			if head != tt.wantHead || tail != tt.wantTail {
				t.Errorf("after Finish: cap(head), cap(tail) = %d, %d; want %d, %d", head, tail, tt.wantHead, tt.wantTail)
			}
			if after := b.Output(); after.Text != before.Text {
				t.Errorf("Output() after Finish = %q; want %q", after.Text, before.Text)
			}
		})
	}
}

// TestHeadTailBufferTailGrowth checks the tail grows by doubling up to its
// limit and is then reused as a ring without reallocation.
func TestHeadTailBufferTailGrowth(t *testing.T) {
	t.Parallel()
	b := NewHeadTailBuffer(1, 100, 0)
	var caps []int
	for range 300 {
		if _, err := b.Write([]byte("x")); err != nil {
			t.Fatalf("Write: %v", err)
		}
		if _, tail := headTailStorage(b); len(caps) == 0 || caps[len(caps)-1] != tail {
			caps = append(caps, tail)
		}
	}
	want := []int{0, 1, 2, 4, 8, 16, 32, 64, 100}
	if !slices.Equal(caps, want) {
		t.Fatalf("tail capacities = %v; want %v", caps, want)
	}
}

// TestHeadTailBufferWaitOutputBlocked makes sure WaitOutput is parked on
// its channel before the Write, so the wake-up path (not the early return)
// is what the test exercises.
func TestHeadTailBufferWaitOutputBlocked(t *testing.T) {
	t.Parallel()

	wake := map[string]func(b *HeadTailBuffer){
		"write":  func(b *HeadTailBuffer) { _, _ = b.Write([]byte("x")) },
		"finish": func(b *HeadTailBuffer) { b.Finish() },
	}
	for name, fn := range wake {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			b := NewHeadTailBuffer(4, 4, 0)
			errc := make(chan error, 1)
			go func() { errc <- b.WaitOutput(ctx, 0) }()

			spinUntil(ctx, t, "WaitOutput blocking", func() bool { return headTailHasWaiter(b) })
			fn(b)
			if err := <-errc; err != nil { // by ctx's end at the latest
				t.Errorf("WaitOutput(ctx, 0) = %v; want nil", err)
			}
			if headTailHasWaiter(b) {
				t.Errorf("waiter channel still set after wake-up")
			}
		})
	}
}

func headTailHasWaiter(b *HeadTailBuffer) bool {
	return pumpTestLocked(b, func() bool { return b.waitc != nil })
}
