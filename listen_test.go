package proc_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/procvisor/proc"
)

// TestWaitListeningInvalid: a port outside 0-65535 is ErrInvalid naming
// it, on every OS; where activity is not supported, a valid port is
// ErrUnsupported at once. (The Manager's Close stops the record.)
func TestWaitListeningInvalid(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	p := mustStart(t, m, mgrBlockReq())
	for _, port := range []int{-1, 65536, math.MaxInt, math.MinInt} {
		if l, err := p.WaitListening(ctx, port); !errors.Is(err, proc.ErrInvalid) || !strings.Contains(err.Error(), "port") {
			t.Errorf("WaitListening(%d) = %+v, %v; want ErrInvalid naming the port", port, l, err)
		}
	}
	if watchActivityErr != nil {
		if l, err := p.WaitListening(ctx, 0); !errors.Is(err, watchActivityErr) {
			t.Errorf("WaitListening(0) = %+v, %v; want %v", l, err, watchActivityErr)
		}
	}
}
