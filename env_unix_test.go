//go:build unix

package proc_test

import (
	"testing"

	"github.com/procvisor/proc"
)

// TestNonInteractiveTTY: under a terminal NonInteractive leaves TERM alone
// (a program on a terminal needs to know which), and sets the rest.
func TestNonInteractiveTTY(t *testing.T) {
	t.Parallel()
	m := newManager(t, proc.Options{UpdateEnv: envUpdate})
	env, _ := envChild(t, m, func(r *proc.StartRequest) { r.NonInteractive, r.TTY = true, true })
	if env["TERM"] != "xterm-256color" || env["NO_COLOR"] != "1" || env["PAGER"] != "cat" {
		t.Errorf("NonInteractive under a TTY: TERM=%q NO_COLOR=%q PAGER=%q; want the inherited xterm-256color, 1, cat",
			env["TERM"], env["NO_COLOR"], env["PAGER"])
	}
}
