//go:build windows

package screen_test

import (
	"errors"
	"testing"

	"github.com/procvisor/proc"
	"github.com/procvisor/proc/proctest"
	"github.com/procvisor/proc/screen"
)

// TestStartUnsupported: proc has no terminals on Windows; Start says so
// and starts nothing.
func TestStartUnsupported(t *testing.T) {
	t.Parallel()
	m := proctest.NewManager(t, proc.Options{})
	if _, err := screen.Start(m, proc.StartRequest{Args: []string{"cmd", "/c", "echo"}}); !errors.Is(err, proc.ErrUnsupported) {
		t.Errorf("Start = %v; want ErrUnsupported", err)
	}
	if n := len(m.List()); n != 0 {
		t.Errorf("%d records after the failed start", n)
	}
}
