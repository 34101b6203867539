//go:build unix

package proc_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/procvisor/proc"
)

// WaitFor on a terminal.

// A terminal ends lines in \r\n; WaitFor returns them without the \r.
func TestWaitForTTY(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	p := mustStart(t, m, proc.StartRequest{Command: "echo booting; echo 'listening on :8080'", TTY: true})
	line, err := p.WaitFor(ctx, regexp.MustCompile(`^listening on :\d+$`), true)
	if err != nil || line != "listening on :8080" {
		t.Errorf("WaitFor() on a TTY = %q, %v; want %q", line, err, "listening on :8080")
	}
	snap := waitFinal(ctx, t, p)
	if !strings.Contains(snap.Output.Text, "listening on :8080\r\n") {
		t.Errorf("TTY output %q has no \\r\\n line ending; the test does not exercise \\r removal", snap.Output.Text)
	}
}
