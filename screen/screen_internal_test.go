package screen

import (
	"bytes"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// watchFeeds makes s check, for every piece the emulator reads, that the
// lock is held and the piece is at most feedChunk bytes, and returns the
// largest piece seen so far.
func watchFeeds(t *testing.T, s *Screen) func() int {
	var mu sync.Mutex
	largest := 0
	write := s.write
	s.write = func(b []byte) {
		if s.mu.TryLock() {
			s.mu.Unlock()
			t.Errorf("the emulator read %d bytes without the lock", len(b))
		}
		if len(b) > feedChunk {
			t.Errorf("the emulator read %d bytes under the lock at once; want at most %d", len(b), feedChunk)
		}
		mu.Lock()
		largest = max(largest, len(b))
		mu.Unlock()
		write(b)
	}
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return largest
	}
}

// TestLockHeldForAChunk: whatever the pump hands over at once, through the
// backlog or past it, the emulator reads it under the lock in pieces of at
// most feedChunk bytes, and a reader sees every byte handed over before
// it.
func TestLockHeldForAChunk(t *testing.T) {
	t.Parallel()
	s := newScreen(24, 80)
	close(s.started)
	largest := watchFeeds(t, s)
	tee := &tee{scr: s}
	// One write larger than the backlog (the pump feeds the emulator
	// itself), then many small ones (the backlog and its feeder), each
	// ending with a line the screen then shows.
	big := bytes.Repeat([]byte("x"), 3*maxBacklog)
	big = append(big, "\r\nbig done\r\n"...)
	tee.Write(big)
	if text := s.Text(); !strings.Contains(text, "big done") {
		t.Fatalf("after one large write: Text() = %q; want it to show %q", text, "big done")
	}
	small := bytes.Repeat([]byte("y"), 1000)
	for i := range 300 {
		tee.Write(small)
		if i%100 == 0 {
			s.Text()
		}
	}
	tee.Write([]byte("\r\nsmall done"))
	if text := s.Text(); !strings.HasSuffix(text, "\nsmall done") {
		t.Fatalf("after small writes: Text() ends %q; want %q", text[max(len(text)-40, 0):], "small done")
	}
	if got := largest(); got != feedChunk {
		t.Errorf("largest piece read under the lock: %d bytes; want %d", got, feedChunk)
	}
	waitFeeder(s)
}

// waitFeeder waits for the goroutine feeding s's backlog to end (it ends
// when the emulator read every byte handed over, which Text just made
// so).
func waitFeeder(s *Screen) {
	yieldWhile(&s.inMu, &s.feeding)
}

// yieldWhile yields the processor while *flag, read under mu, is true.
func yieldWhile(mu *sync.Mutex, flag *bool) {
	for {
		mu.Lock()
		set := *flag
		mu.Unlock()
		if !set {
			return
		}
		runtime.Gosched()
	}
}

// TestQueryFloodBounded: a program that asks a flood of questions and
// reads no answer gets at most maxReply bytes of answers queued, however
// many it asks; the pump never waits for them.
func TestQueryFloodBounded(t *testing.T) {
	t.Parallel()
	s := newScreen(24, 80)
	// No process: the replies wait in the queue, as they do while the
	// program does not read its terminal, and the goroutine that would
	// write them waits for the start.
	tee := &tee{scr: s}
	chunk := bytes.Repeat([]byte("\x1b[6n\x1b[c\x1b[>c\x1b]11;?\x07\x1b[?2004$p"), 1000)
	for range 20 {
		tee.Write(chunk)
	}
	tee.Write([]byte("asked"))
	if got := s.Text(); got != "asked" {
		t.Errorf("Text() = %q; want %q", got, "asked")
	}
	s.mu.Lock()
	queued, pending := len(s.replies), len(s.term.reply)
	s.mu.Unlock()
	// Replies are queued a chunk's worth at a time, whole or not at all.
	if queued > maxReply || queued < maxReply/2 || pending != 0 {
		t.Errorf("replies queued: %d bytes, pending in the emulator %d; want %d to %d and 0", queued, pending, maxReply/2, maxReply)
	}
	waitFeeder(s)
	// The goroutine waiting to write them ends with no process to write
	// to.
	close(s.started)
	yieldWhile(&s.mu, &s.answering)
}
