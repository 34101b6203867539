package proc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/procvisor/proc"
)

func headTailChunkString(c proc.Chunk) string {
	return fmt.Sprintf("{Data:%q Next:%d Lost:%d End:%d EOF:%v}", c.Data, c.Next, c.Lost, c.End, c.EOF)
}

func TestHeadTailBufferReadSince(t *testing.T) {
	t.Parallel()

	type read struct {
		cursor int64
		max    int
		want   proc.Chunk
	}
	tests := []struct {
		name       string
		head, tail int
		writes     []string
		finish     bool
		reads      []read
	}{
		{"empty", 4, 4, nil, false, []read{{0, 0, proc.Chunk{}}, {5, 0, proc.Chunk{Next: 5}}}},
		{"empty-finished", 4, 4, nil, true, []read{{0, 0, proc.Chunk{EOF: true}}}},
		{"spanning-head-and-tail", 4, 8, []string{"abcdefghij"}, false, []read{
			{0, 0, proc.Chunk{Data: []byte("abcdefghij"), Next: 10, End: 10}},
			{2, 0, proc.Chunk{Data: []byte("cdefghij"), Next: 10, End: 10}},
			{6, 0, proc.Chunk{Data: []byte("ghij"), Next: 10, End: 10}},
			{10, 0, proc.Chunk{Next: 10, End: 10}},
		}},
		{"cursor-in-gap", 4, 4, []string{"abcd", "0123456789", "wxyz"}, false, []read{
			// The head ends the read; the next one reports the gap.
			{0, 0, proc.Chunk{Data: []byte("abcd"), Next: 4, End: 18}},
			{4, 0, proc.Chunk{Data: []byte("wxyz"), Next: 18, Lost: 10, End: 18}},
			{7, 0, proc.Chunk{Data: []byte("wxyz"), Next: 18, Lost: 7, End: 18}},
			{13, 0, proc.Chunk{Data: []byte("wxyz"), Next: 18, Lost: 1, End: 18}},
			{14, 0, proc.Chunk{Data: []byte("wxyz"), Next: 18, End: 18}},
			{16, 0, proc.Chunk{Data: []byte("yz"), Next: 18, End: 18}},
		}},
		{"max-limits", 4, 4, []string{"abcd", "0123456789", "wxyz"}, false, []read{
			{0, 3, proc.Chunk{Data: []byte("abc"), Next: 3, End: 18}},
			{3, 3, proc.Chunk{Data: []byte("d"), Next: 4, End: 18}},
			{4, 3, proc.Chunk{Data: []byte("wxy"), Next: 17, Lost: 10, End: 18}},
			{17, 3, proc.Chunk{Data: []byte("z"), Next: 18, End: 18}},
			{0, -1, proc.Chunk{Data: []byte("abcd"), Next: 4, End: 18}},
		}},
		{"max-across-seam", 4, 8, []string{"abcdefghij"}, false, []read{{2, 4, proc.Chunk{Data: []byte("cdef"), Next: 6, End: 10}}}},
		{"wrapped-ring", 2, 4, []string{"ab", "cde", "fgh"}, false, []read{
			{0, 0, proc.Chunk{Data: []byte("ab"), Next: 2, End: 8}},
			{2, 0, proc.Chunk{Data: []byte("efgh"), Next: 8, Lost: 2, End: 8}},
			{5, 2, proc.Chunk{Data: []byte("fg"), Next: 7, End: 8}},
		}},
		{"negative-cursor", 4, 4, []string{"ab"}, false, []read{{-5, 0, proc.Chunk{Data: []byte("ab"), Next: 2, End: 2}}}},
		{"cursor-beyond-end", 4, 4, []string{"abcdef"}, false, []read{{100, 0, proc.Chunk{Next: 100, End: 6}}}},
		{"cursor-beyond-end-finished", 4, 4, []string{"abcdef"}, true, []read{{100, 0, proc.Chunk{Next: 100, End: 6, EOF: true}}}},
		{"eof-after-finish", 4, 4, []string{"abcd", "0123456789", "wxyz"}, true, []read{
			{0, 0, proc.Chunk{Data: []byte("abcd"), Next: 4, End: 18}},
			{4, 0, proc.Chunk{Data: []byte("wxyz"), Next: 18, Lost: 10, End: 18, EOF: true}},
			{4, 2, proc.Chunk{Data: []byte("wx"), Next: 16, Lost: 10, End: 18}},
			{18, 0, proc.Chunk{Next: 18, End: 18, EOF: true}},
		}},
		{"no-eof-before-finish", 4, 4, []string{"abcdef"}, false, []read{
			{0, 0, proc.Chunk{Data: []byte("abcdef"), Next: 6, End: 6}},
			{6, 0, proc.Chunk{Next: 6, End: 6}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := proc.NewHeadTailBuffer(tt.head, tt.tail, 0)
			for _, w := range tt.writes {
				if _, err := b.Write([]byte(w)); err != nil {
					t.Fatalf("Write(%q): %v", w, err)
				}
			}
			if tt.finish {
				b.Finish()
			}
			for _, r := range tt.reads {
				got := b.ReadSince(r.cursor, r.max)
				if g, w := headTailChunkString(got), headTailChunkString(r.want); g != w {
					t.Errorf("ReadSince(%d, %d) = %s; want %s", r.cursor, r.max, g, w)
				}
			}
		})
	}
}

// TestHeadTailBufferReadSinceCopies checks that callers own Data.
func TestHeadTailBufferReadSinceCopies(t *testing.T) {
	t.Parallel()
	b := proc.NewHeadTailBuffer(4, 4, 0)
	if _, err := b.Write([]byte("abcdef")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	c := b.ReadSince(0, 0)
	for i := range c.Data {
		c.Data[i] = '!'
	}
	if got := b.ReadSince(0, 0); string(got.Data) != "abcdef" {
		t.Errorf("ReadSince(0, 0) after changing an earlier Data = %q; want %q", got.Data, "abcdef")
	}
}

// TestHeadTailBufferReadLoop reads everything in small pieces while
// checking the accounting invariant.
func TestHeadTailBufferReadLoop(t *testing.T) {
	t.Parallel()
	b := proc.NewHeadTailBuffer(5, 7, 0)
	var all strings.Builder
	for i := range 20 {
		w := fmt.Sprintf("%d,", i)
		all.WriteString(w)
		if _, err := b.Write([]byte(w)); err != nil {
			t.Fatalf("Write(%q): %v", w, err)
		}
	}
	b.Finish()
	s := all.String()
	want := s[:5] + s[len(s)-7:]

	var got []byte
	var cursor, accounted int64
	for i := 0; ; i++ {
		if i > len(s) {
			t.Fatalf("ReadSince did not reach EOF after %d reads", i)
		}
		c := b.ReadSince(cursor, 3)
		if c.Next != cursor+c.Lost+int64(len(c.Data)) {
			t.Fatalf("ReadSince(%d, 3) = %s; want Next = cursor+Lost+len(Data)", cursor, headTailChunkString(c))
		}
		got = append(got, c.Data...)
		accounted += c.Lost + int64(len(c.Data))
		cursor = c.Next
		if c.EOF {
			break
		}
	}
	if string(got) != want {
		t.Errorf("data read = %q; want %q", got, want)
	}
	if accounted != int64(len(s)) || accounted != b.Len() {
		t.Errorf("sum of Lost+len(Data) = %d; want %d", accounted, len(s))
	}
}

func TestHeadTailBufferWriteAfterFinish(t *testing.T) {
	t.Parallel()
	b := proc.NewHeadTailBuffer(4, 4, 0)
	if n, err := b.Write([]byte("abc")); n != 3 || err != nil {
		t.Fatalf("Write(%q) = %d, %v; want 3, nil", "abc", n, err)
	}
	b.Finish()
	b.Finish() // idempotent
	if !b.Finished() {
		t.Errorf("Finished() = false; want true")
	}
	n, err := b.Write([]byte("def"))
	if n != 0 || !errors.Is(err, proc.ErrClosed) {
		t.Errorf("Write(%q) after Finish = %d, %v; want 0, an error wrapping ErrClosed", "def", n, err)
	}
	if got := b.Len(); got != 3 {
		t.Errorf("Len() = %d; want 3", got)
	}
	if got := b.Output(); got.Text != "abc" {
		t.Errorf("Output() = %q; want %q", got.Text, "abc")
	}
}

func TestHeadTailBufferEmptyWrite(t *testing.T) {
	t.Parallel()
	b := proc.NewHeadTailBuffer(4, 4, 0)
	if n, err := b.Write(nil); n != 0 || err != nil {
		t.Errorf("Write(nil) = %d, %v; want 0, nil", n, err)
	}
	if got := b.Len(); got != 0 {
		t.Errorf("Len() = %d; want 0", got)
	}
	if got := b.Output(); got.Text != "" || got.Truncation != nil {
		t.Errorf("Output() = %q, %s; want \"\", nil", got.Text, headTailTruncString(got.Truncation))
	}
}

func TestHeadTailBufferWaitOutput(t *testing.T) {
	t.Parallel()

	t.Run("bytes-already-there", func(t *testing.T) {
		t.Parallel()
		b := proc.NewHeadTailBuffer(4, 4, 0)
		if _, err := b.Write([]byte("ab")); err != nil {
			t.Fatalf("Write: %v", err)
		}
		// Even an ended context does not matter when bytes exist.
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := b.WaitOutput(ctx, 1); err != nil {
			t.Errorf("WaitOutput(ctx, 1) = %v; want nil", err)
		}
		if err := b.WaitOutput(ctx, -1); err != nil {
			t.Errorf("WaitOutput(ctx, -1) = %v; want nil", err)
		}
		if err := b.WaitOutput(ctx, 2); !errors.Is(err, context.Canceled) {
			t.Errorf("WaitOutput(ctx, 2) = %v; want an error wrapping context.Canceled", err)
		}
	})

	// A blocked WaitOutput returns when a write passes its cursor, when the
	// buffer is finished (which then never blocks, whatever the cursor), or
	// with its context's error.
	for _, tt := range []struct {
		name string
		wake func(b *proc.HeadTailBuffer, cancel context.CancelFunc)
		want error
	}{
		{"write-from-goroutine", func(b *proc.HeadTailBuffer, _ context.CancelFunc) { _, _ = b.Write([]byte("c")) }, nil},
		{"finish", func(b *proc.HeadTailBuffer, _ context.CancelFunc) { b.Finish() }, nil},
		{"cancel", func(_ *proc.HeadTailBuffer, cancel context.CancelFunc) { cancel() }, context.Canceled},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(testCtx(t))
			b := proc.NewHeadTailBuffer(4, 4, 0)
			_, _ = b.Write([]byte("ab"))
			woken := make(chan struct{})
			go func() { defer close(woken); tt.wake(b, cancel) }()
			defer func() { <-woken }()
			if err := b.WaitOutput(ctx, 2); !errors.Is(err, tt.want) {
				t.Fatalf("WaitOutput(ctx, 2) = %v; want %v", err, tt.want)
			}
			switch tt.name {
			case "write-from-goroutine":
				if got := b.Len(); got != 3 {
					t.Errorf("Len() after WaitOutput = %d; want 3", got)
				}
			case "finish":
				if !b.Finished() {
					t.Errorf("Finished() after WaitOutput = false; want true")
				}
				if err := b.WaitOutput(ctx, 100); err != nil {
					t.Errorf("WaitOutput(ctx, 100) after Finish = %v; want nil", err)
				}
			}
		})
	}

	t.Run("deadline", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithDeadline(t.Context(), time.Unix(0, 0))
		defer cancel()
		b := proc.NewHeadTailBuffer(4, 4, 0)
		err := b.WaitOutput(ctx, 0)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("WaitOutput(ctx, 0) = %v; want an error wrapping context.DeadlineExceeded", err)
		}
	})

	t.Run("many-waiters", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		b := proc.NewHeadTailBuffer(4, 4, 0)
		const waiters = 8
		errc := make(chan error, waiters) // one slot per sender
		for range waiters {
			go func() { errc <- b.WaitOutput(ctx, 0) }()
		}
		if _, err := b.Write([]byte("x")); err != nil {
			t.Fatalf("Write: %v", err)
		}
		for range waiters { // each returns by ctx's end at the latest
			if err := <-errc; err != nil {
				t.Errorf("WaitOutput(ctx, 0) = %v; want nil", err)
			}
		}
	})
}

// TestHeadTailBufferConcurrent runs writers and readers together; run it
// with -race.
func TestHeadTailBufferConcurrent(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	b := proc.NewHeadTailBuffer(64, 64, 16)
	const writers, writes = 4, 200
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range writes {
				_, _ = b.Write([]byte("0123456789\n"))
			}
		}()
	}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		var cursor int64
		for {
			if err := b.WaitOutput(ctx, cursor); err != nil {
				return
			}
			c := b.ReadSince(cursor, 7)
			_ = b.Output()
			cursor = c.Next
			if c.EOF {
				return
			}
		}
	}()
	wg.Wait()
	b.Finish()
	<-readerDone // its WaitOutput returns by ctx's end at the latest
	if got, want := b.Len(), int64(writers*writes*11); got != want {
		t.Errorf("Len() = %d; want %d", got, want)
	}
	if tr := b.Output().Truncation; tr == nil || tr.RetainedBytes != 128 {
		t.Errorf("Output().Truncation = %s; want RetainedBytes 128", headTailTruncString(tr))
	}
}

// TestHeadTailBufferReaderAllocs pins what a poller costs: Output of a
// running full buffer that nothing was written to since the last Output
// allocates nothing (the rendering is reused), after a Write it allocates
// its text and its rendering only (the copy it renders from is pooled),
// and a follower passing its own buffer to ReadSinceInto allocates
// nothing.
//
// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
func TestHeadTailBufferReaderAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops entries under -race")
	}
	b := proc.NewHeadTailBuffer(0, 0, 0)
	line := []byte(strings.Repeat("z", 79) + "\n")
	for range 1000 {
		_, _ = b.Write(line)
	}
	if n := testing.AllocsPerRun(100, func() { _ = b.Output() }); n != 0 {
		t.Errorf("Output() of an unchanged running buffer: %v allocations; want 0", n)
	}
	fin := proc.NewHeadTailBuffer(0, 0, 0)
	_, _ = fin.Write(line)
	fin.Finish()
	if n := testing.AllocsPerRun(100, func() { _ = fin.Output() }); n != 0 {
		t.Errorf("Output() of a finished buffer: %v allocations; want 0 (rendered once)", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		_, _ = b.Write(line)
		_ = b.Output()
	}); n > 2 {
		t.Errorf("Write + Output() of a running buffer: %v allocations; want <= 2", n)
	}
	buf := make([]byte, 4096)
	cursor := int64(0)
	n := testing.AllocsPerRun(100, func() {
		_, _ = b.Write(line)
		c := b.ReadSinceInto(cursor, buf)
		cursor = c.Next
	})
	if n != 0 {
		t.Errorf("Write + ReadSinceInto: %v allocations; want 0", n)
	}
}

func TestHeadTailBufferReadSinceInto(t *testing.T) {
	t.Parallel()
	b := proc.NewHeadTailBuffer(4, 4, 0)
	_, _ = b.Write([]byte("abcdefghijkl")) // head "abcd", tail "ijkl", 4 lost
	buf := make([]byte, 3)
	for _, tt := range []struct {
		cursor int64
		buf    []byte
		want   string
	}{
		{0, buf, `{Data:"abc" Next:3 Lost:0 End:12 EOF:false}`},
		{3, buf, `{Data:"d" Next:4 Lost:0 End:12 EOF:false}`},
		{4, buf, `{Data:"ijk" Next:11 Lost:4 End:12 EOF:false}`},
		{5, nil, `{Data:"" Next:8 Lost:3 End:12 EOF:false}`},
		{11, buf, `{Data:"l" Next:12 Lost:0 End:12 EOF:false}`},
		{12, buf, `{Data:"" Next:12 Lost:0 End:12 EOF:false}`},
		{-5, make([]byte, 10), `{Data:"abcd" Next:4 Lost:0 End:12 EOF:false}`},
	} {
		c := b.ReadSinceInto(tt.cursor, tt.buf)
		if got := headTailChunkString(c); got != tt.want {
			t.Errorf("ReadSinceInto(%d, [%d]byte) = %s; want %s", tt.cursor, len(tt.buf), got, tt.want)
		}
		if len(c.Data) > 0 && &c.Data[0] != &tt.buf[0] {
			t.Errorf("ReadSinceInto(%d) returned Data outside the caller's buffer", tt.cursor)
		}
	}
}
