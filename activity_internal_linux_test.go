//go:build linux && !proc_otherunix

package proc

import (
	"testing"
	"time"
)

// TestActivityLooksClose: closing what looks keep never waits for a look
// under way; the look closes it when it ends, and a later look keeps
// nothing.
func TestActivityLooksClose(t *testing.T) {
	t.Parallel()
	var l activityLooks
	l.mu.Lock() // a look under way
	l.close()
	if l.closed {
		t.Fatalf("closed under a look")
	}
	l.unlock()
	if !l.closed {
		t.Fatalf("not closed when the look ended")
	}

	var free activityLooks
	free.close()
	if !free.closed {
		t.Fatalf("not closed at once without a look")
	}
	if _, listed := free.look(goneTree, inputID{}, true, false); !listed || free.closed != true {
		t.Fatalf("a look after close: listed %v, closed %v", listed, free.closed)
	}
}

// TestActivityLooksDroppedAtFinal: what looks at a record's tree keep
// (descriptors held open) is closed and forgotten once the record is
// final.
func TestActivityLooksDroppedAtFinal(t *testing.T) {
	t.Parallel()
	ctx, m := internalManager(t, 30*time.Second, Options{Containment: ContainGroup})
	p, err := m.Start(StartRequest{Command: "read x", Stdin: true})
	if err != nil {
		t.Fatalf("Start() = %v", err)
	}
	for {
		a, err := p.Activity()
		if err != nil {
			t.Fatalf("Activity() = %v", err)
		}
		if a.WaitingForInput {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the shell never waited for input")
		}
	}
	l := p.looks.Load()
	if l == nil {
		t.Fatalf("nothing kept after a look")
	}
	if err := p.CloseStdin(); err != nil {
		t.Fatalf("CloseStdin() = %v", err)
	}
	select {
	case <-p.Done():
	case <-ctx.Done():
		t.Fatalf("the shell did not end: %v", ctx.Err())
	}
	m.waitEnded([]*Process{p})
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if !closed || p.looks.Load() != nil {
		t.Errorf("after the final record: closed %v, still kept %v; want closed and forgotten", closed, p.looks.Load() != nil)
	}
}
