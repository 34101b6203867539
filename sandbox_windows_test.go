//go:build windows

package proc_test

import (
	"errors"
	"testing"

	"github.com/procvisor/proc"
)

// TestSandboxUnsupportedOS: Windows has no sandbox; a sandboxed start is
// ErrUnsupported and starts nothing.
func TestSandboxUnsupportedOS(t *testing.T) {
	t.Parallel()
	m := newManager(t, proc.Options{})
	if p, err := m.Start(proc.StartRequest{Args: []string{"cmd", "/c", "exit"}, Sandbox: &proc.Sandbox{}}); !errors.Is(err, proc.ErrUnsupported) {
		t.Fatalf("sandboxed Start = %v, %v; want ErrUnsupported", p, err)
	}
	if n := len(m.List()); n != 0 {
		t.Fatalf("%d records; want none", n)
	}
}
