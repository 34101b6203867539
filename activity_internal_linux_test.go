//go:build linux

package proc

import "testing"

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
