//go:build unix

package proc

import (
	"context"
	"regexp"
	"testing"
	"time"
)

// TestWaitForIsPoller pins that WaitFor registers no follower: it waits
// as a poller (WaitOutput, the shared window) and never holds the child.
func TestWaitForIsPoller(t *testing.T) {
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
		return pumpTestLocked(p.out, func() bool { return p.out.waiters == 1 })
	})
	if pumpTestLocked(p.out, func() bool { return len(p.out.flow.followers) != 0 }) {
		t.Errorf("WaitFor registered a follower; want none")
	}
	if _, err := p.Write([]byte("\n")); err != nil {
		t.Fatalf("Write() = %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("WaitFor(ready) = %v; want nil", err)
	}
	if _, err := p.Write([]byte("\n")); err != nil {
		t.Fatalf("Write() = %v", err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
}
