//go:build linux

package sandbox

import (
	"context"
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// watchedPipe makes a notifier whose listener is a pipe's read end, in
// w: closing the write end (returned) hangs it up as a listener hangs up
// once no task uses its filter, and a byte written makes it readable as
// a routed call does.
func watchedPipe(t *testing.T, w *listeners) (*notifier, int) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	n, err := newNotifier(p[0], nil, func(int, int) bool { return false }, w)
	if err != nil {
		unix.Close(p[1])
		t.Fatal(err)
	}
	if n.watch != w {
		unix.Close(p[1])
		t.Fatal("the watch did not take the listener")
	}
	return n, p[1]
}

// await waits for ch to close, or fails t once ctx ends.
func await(ctx context.Context, t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatalf("%s: %v", what, ctx.Err())
	}
}

// closedNow reports whether n's listener was closed: its descriptor
// refers to another object now, or to none. (Not a write to the pipe,
// which a child forked meanwhile can hold open until its exec.)
func closedNow(t *testing.T, n *notifier, was string) bool {
	t.Helper()
	now, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(n.listener))
	return err != nil || now != was
}

// target is what descriptor fd refers to.
func target(t *testing.T, fd int) string {
	t.Helper()
	was, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		t.Fatal(err)
	}
	return was
}

// TestWatchHangUp: listeners that hang up are closed by the watch, each
// notifier's end is published, and the watch's goroutine ends once none
// waits.
func TestWatchHangUp(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	var w listeners
	defer w.close()
	var ns []*notifier
	var writers []int
	for range 3 {
		n, wr := watchedPipe(t, &w)
		ns, writers = append(ns, n), append(writers, wr)
	}
	for i, n := range ns {
		unix.Close(writers[i])
		await(ctx, t, n.done, "a hung-up listener's end")
	}
	w.mu.Lock()
	ran, waiting, served := w.ran, len(w.waiting), ns[0].served
	w.mu.Unlock()
	await(ctx, t, ran, "the watch's goroutine, none waiting")
	if waiting != 0 || served {
		t.Errorf("after the hang-ups: %d listeners wait, served %v; want none, false", waiting, served)
	}
}

// TestWatchStop: Stop ends a listener still in the watch at once: it is
// closed and leaves the watch.
func TestWatchStop(t *testing.T) {
	t.Parallel()
	var w listeners
	defer w.close()
	n, wr := watchedPipe(t, &w)
	defer unix.Close(wr)
	was := target(t, n.listener)
	n.Stop()
	n.Stop() // a second Stop is a no-op
	w.mu.Lock()
	waiting := len(w.waiting)
	w.mu.Unlock()
	if closed := closedNow(t, n, was); waiting != 0 || !closed {
		t.Errorf("after Stop: %d listeners wait, listener closed %v; want none, true", waiting, closed)
	}
}

// TestWatchHandsOff: a listener with something to read (a routed call)
// leaves the watch for a notifier goroutine of its own, which Stop then
// ends.
func TestWatchHandsOff(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	var w listeners
	defer w.close()
	n, wr := watchedPipe(t, &w)
	defer unix.Close(wr)
	was := target(t, n.listener)
	w.mu.Lock()
	ran := w.ran
	w.mu.Unlock()
	if _, err := unix.Write(wr, []byte{1}); err != nil {
		t.Fatal(err)
	}
	// Nothing else waits: the watch's goroutine ends once it handed the
	// listener over.
	await(ctx, t, ran, "the watch's goroutine, the listener handed over")
	w.mu.Lock()
	served, waiting := n.served, len(w.waiting)
	w.mu.Unlock()
	if !served || waiting != 0 {
		t.Fatalf("after a call came: served %v, %d listeners wait; want true, none", served, waiting)
	}
	n.Stop()
	if !closedNow(t, n, was) {
		t.Error("after Stop the listener is open; want it closed")
	}
}

// TestWatchClose: closing the watch ends the listeners still in it, and
// a notifier made after is served from the start.
func TestWatchClose(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	var w listeners
	n, wr := watchedPipe(t, &w)
	defer unix.Close(wr)
	was := target(t, n.listener)
	w.close()
	await(ctx, t, n.done, "a listener's end at the watch's close")
	if !closedNow(t, n, was) {
		t.Error("after the watch's close the listener is open; want it closed")
	}
	n.Stop() // returns at once: it ended
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[1])
	later, err := newNotifier(p[0], nil, func(int, int) bool { return false }, &w)
	if err != nil {
		t.Fatal(err)
	}
	defer later.Stop()
	if later.watch != nil {
		t.Error("a notifier made after the watch's close is in it; want it served from the start")
	}
}
