//go:build unix

package proc_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/procvisor/proc"
)

// TestResizeSizeCap pins that Resize above 1,000,000 cells is refused,
// leaves the terminal as it was, and that the cap itself is allowed.
func TestResizeSizeCap(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	p := iaTTY(t, m, "read x; stty size", proc.TermSize{Rows: 24, Cols: 80})
	for _, size := range []proc.TermSize{{Rows: 65535, Cols: 65535}, {Rows: 1000, Cols: 1001}, {Rows: 65535, Cols: 16}} {
		mgrCheckErr(t, fmt.Sprintf("Resize(%+v)", size), p.Resize(size), proc.ErrInvalid, "1000000")
	}
	if err := p.Resize(proc.TermSize{Rows: 1000, Cols: 1000}); err != nil {
		t.Fatalf("Resize(1000x1000) = %v; want nil (at the cap)", err)
	}
	if _, err := p.Write([]byte("\n")); err != nil {
		t.Fatalf("Write() = %v", err)
	}
	if snap := waitFinal(ctx, t, p); !strings.Contains(snap.Output.Text, "1000 1000") {
		t.Errorf("stty size after the refused resizes = %q; want 1000 1000", snap.Output.Text)
	}
}
