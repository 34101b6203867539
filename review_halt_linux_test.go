//go:build linux

package proc_test

import (
	"context"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/procvisor/proc"
)

// TestReviewTimeoutLostToSIGCONT: the timeout's decision (onTimeout →
// haltChild) sends SIGSTOP to the child and then blocks in
// waitid(WSTOPPED|WEXITED) with no bound. Any SIGCONT that reaches the
// child in between — and every Process.Signal(Terminate/Interrupt) sends
// one to the whole tree — discards the pending SIGSTOP (or continues the
// child before waitid looks), so waitid never returns while the child
// lives. The timeout is then lost for good: the child runs on past
// Timeout + KillGrace, and Close, which waits for timer callbacks in flight
// (m.background.Wait) before it stops any tree, hangs as well.
//
// The child ignores SIGINT (a shell with `trap ” INT`, as many scripts
// are), and a caller forwards Ctrl-C as Signal(Interrupt) around the
// deadline.
func TestReviewTimeoutLostToSIGCONT(t *testing.T) {
	t.Parallel()
	for _, mode := range treeModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t, 60*time.Second)
			opts := treeOptions(t, mode)
			opts.KillGrace = 100 * time.Millisecond
			m := proc.NewManager(opts)
			var procs []*proc.Process
			defer func() {
				// Free a lost timeout by hand, or Close hangs (see below).
				for _, p := range procs {
					_ = syscall.Kill(-p.Info().PID, syscall.SIGKILL)
				}
				closed := make(chan error, 1)
				go func() { closed <- m.Close() }()
				select {
				case <-closed:
				case <-time.After(10 * time.Second):
					t.Errorf("Close did not return within 10s")
				}
			}()
			const rounds = 20
			for i := 0; i < rounds; i++ {
				p := mustStart(t, m, proc.StartRequest{
					Command: `trap '' INT; echo ready; while :; do sleep 1; done`,
					Timeout: 150 * time.Millisecond,
				})
				procs = append(procs, p)
				if _, err := p.WaitFor(ctx, regexp.MustCompile(`^ready$`), true); err != nil {
					t.Fatal(err)
				}
			}
			// Ctrl-C forwarded until each record is final.
			var wg sync.WaitGroup
			for _, p := range procs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-p.Done():
							return
						case <-ctx.Done():
							return
						default:
						}
						_ = p.Signal(proc.Interrupt)
					}
				}()
			}
			// Timeout + KillGrace + drain is well under a second; allow 5.
			bound, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			lost := 0
			for _, p := range procs {
				if err := p.Wait(bound); err != nil {
					lost++
					continue
				}
				if info := p.Info(); !info.TimedOut || exitCode(t, info) != proc.ExitTimedOut {
					t.Errorf("%s: TimedOut=%v code=%d; want a timeout (124)", info.ID, info.TimedOut, exitCode(t, info))
				}
			}
			if lost > 0 {
				buf := make([]byte, 1<<20)
				stacks := string(buf[:runtime.Stack(buf, true)])
				for _, g := range strings.Split(stacks, "\n\n") {
					if strings.Contains(g, "haltChild") {
						t.Logf("blocked timer callback:\n%s", g)
						break
					}
				}
				t.Errorf("%d of %d children with Timeout 150ms, KillGrace 100ms were still running 5s later: the timeout was lost (haltChild blocks in waitid once a SIGCONT beat its SIGSTOP)", lost, rounds)
			}
			// Stop the hammering first.
			for _, p := range procs {
				_ = syscall.Kill(-p.Info().PID, syscall.SIGKILL)
			}
			wg.Wait()
		})
	}
}
