//go:build linux && !proc_otherunix

package proc

import (
	"testing"

	"github.com/coder/quartz"
)

// blockingTee is a tee's Writer that reports each Write's entry on entered
// and returns only once release is closed.
type blockingTee struct {
	entered chan int32 // buffered; what pumps counted on entry
	sig     *pollSignal
	release chan struct{}
}

func (w *blockingTee) Write(p []byte) (int, error) {
	select {
	case w.entered <- w.sig.pumps.Load():
	default:
	}
	<-w.release
	return len(p), nil
}

// TestPolledPumpUncountedInTee pins that a polled pump held in a tee's
// Write is not counted in its Manager's signal meanwhile: it tries no
// pipe, so pollers of a final record do not step aside for it
// (HeadTailBuffer.stepsAside) for as long as the tee's owner holds it.
func TestPolledPumpUncountedInTee(t *testing.T) {
	t.Parallel()
	ctx, r, w, sig, b := polledPumpSetup(t)
	tw := &blockingTee{entered: make(chan int32, 1), sig: sig, release: make(chan struct{})}
	var shared tees
	done := make(chan struct{}, 1) // the pump's one send
	pu := &pump{r: r, dst: b, tee: newTee(tw, "output tee", &shared), clock: quartz.NewReal(),
		activity: make(chan struct{}, 1), done: done}
	// Ends at EOF: w is closed below (or by the deferred Close).
	go pu.run()
	if _, err := w.Write([]byte("abc")); err != nil {
		t.Fatalf("write to the pipe: %v", err)
	}
	select {
	case n := <-tw.entered:
		if n != 0 {
			t.Errorf("pump held in its tee's Write: counted %d; want 0", n)
		}
	case <-ctx.Done():
		t.Fatalf("tee's Write not called: %v", ctx.Err())
	}
	close(tw.release)
	_ = w.Close()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("pump did not end at EOF: %v", ctx.Err())
	}
	if n := sig.pumps.Load(); n != 0 {
		t.Errorf("pump that reached EOF: counted %d; want 0", n)
	}
	if got := b.Len(); got != 4 {
		t.Errorf("Len() = %d; want 4", got)
	}
}
