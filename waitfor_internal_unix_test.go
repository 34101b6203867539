//go:build unix

package proc

import (
	"context"
	"regexp"
	"testing"
	"time"
)

// TestWaitForLeavesNoLease pins that WaitFor, once it matched, holds no
// lease: woken from its wait by the matching line, it read as a follower
// does, and a lease left behind would hold the pump back for
// followBound as soon as the child wrote a tail's worth more.
func TestWaitForLeavesNoLease(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	m := NewManager(Options{})
	defer func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	}()
	p, err := m.Start(StartRequest{Command: "read x; echo ready; read x", Stdin: true})
	if err != nil {
		t.Fatalf("Start() = %v", err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := p.WaitFor(ctx, regexp.MustCompile(`^ready$`), true)
		errc <- err
	}()
	spinUntil(ctx, t, "WaitFor waiting", func() bool {
		return pumpTestLocked(p.out, func() bool { return p.out.flow != nil && len(p.out.flow.waiting) == 1 })
	})
	if _, err := p.Write([]byte("\n")); err != nil {
		t.Fatalf("Write() = %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("WaitFor(ready) = %v; want nil", err)
	}
	pumpTestLocked(p.out, func() bool {
		if f := p.out.flow; f != nil && (len(f.leases) != 0 || len(f.waiting) != 0) {
			t.Errorf("after WaitFor matched: leases %v, waiting %v; want none", f.leases, f.waiting)
		}
		return true
	})
	if _, err := p.Write([]byte("\n")); err != nil {
		t.Fatalf("Write() = %v", err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
}
