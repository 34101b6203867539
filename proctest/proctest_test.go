//go:build unix

package proctest_test

import (
	"context"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/procvisor/proc"
	"github.com/procvisor/proc/proctest"
)

// TestNewManager pins that the Manager NewManager returns is closed when
// the test ends, on a real clock and on a mock one (where the close must
// advance the clock through the kill grace of a child that ignores
// SIGTERM), and that the close leaves nothing running.
func TestNewManager(t *testing.T) {
	for _, mock := range []bool{false, true} {
		t.Run(map[bool]string{false: "real-clock", true: "mock-clock"}[mock], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			tb := &exampleT{}
			opts := proc.Options{KillGrace: time.Minute}
			if mock {
				opts.Clock = quartz.NewMock(t)
			}
			m := proctest.NewManager(tb, opts)
			p, err := m.Start(proc.StartRequest{Command: `trap "" TERM; echo ready; sleep 60`})
			if err != nil {
				t.Fatalf("Start() = %v", err)
			}
			if _, err := p.WaitFor(ctx, regexp.MustCompile("ready"), true); err != nil {
				t.Fatalf("WaitFor(ready) = %v", err)
			}
			if len(tb.cleanups) != 1 {
				t.Fatalf("NewManager registered %d cleanups; want 1", len(tb.cleanups))
			}
			if !mock {
				// On a real clock the close would wait the minute out.
				if err := p.Signal(proc.Kill); err != nil {
					t.Fatalf("Signal(kill) = %v", err)
				}
			}
			tb.cleanup()
			if tb.failed {
				t.Fatal("the cleanup failed the test")
			}
			if info := p.Info(); info.Running || info.ExitCode == nil {
				t.Errorf("after the cleanup Info() = %+v; want a final record", info)
			}
			if _, err := m.Start(proc.StartRequest{Command: "true"}); !errors.Is(err, proc.ErrClosed) {
				t.Errorf("Start() after the cleanup = %v; want ErrClosed", err)
			}
		})
	}
}
