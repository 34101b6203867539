//go:build unix

package proc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procvisor/proc"
)

// Terminals (TTY, resize), and the Unix helpers that stdin's tests
// (stdin_unix_test.go) share: grandchildren holding pipes, writes blocked
// on pipes nobody reads, closing fd 0.

// interactive-leave-holder starts a grandchild that holds stdin and
// stdout open without reading (sleep 30), then exits at once.
var _ = helper("interactive-leave-holder", iaSteps(iaStartHolder))

// interactive-exit-on-input starts a holder like
// interactive-leave-holder, reads nothing, and exits once bytes arrive
// on its stdin: a write larger than the pipe is then in progress, and
// nobody will ever read it.
var _ = helper("interactive-exit-on-input", iaSteps(iaStartHolder, iaWaitStdinInput))

// interactive-input-then-wait reads nothing, prints "input" once bytes
// arrive on its stdin, and lives on.
var _ = helper("interactive-input-then-wait", iaSteps(iaWaitStdinInput, iaSayAndLive("input")))

// interactive-close-stdin closes its stdin, prints "closed" and lives
// on.
var _ = helper("interactive-close-stdin", iaSteps(os.Stdin.Close, iaSayAndLive("closed")))

// iaSteps returns a helper that runs steps in turn and exits 0, or 1 at
// the first that fails, saying why on stderr.
func iaSteps(steps ...func() error) func([]string) int {
	return func([]string) int {
		for _, step := range steps {
			if err := step(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		return 0
	}
}

// iaSayAndLive returns a step that prints text and lives on for 30 s.
func iaSayAndLive(text string) func() error {
	return func() error {
		fmt.Println(text)
		time.Sleep(30 * time.Second)
		return nil
	}
}

var _ = helper("interactive-winch", iaHelperWinch)

// iaHelperWinch (interactive-winch) prints "ready", waits for SIGWINCH and
// prints the terminal size it then has.
func iaHelperWinch([]string) int {
	if !readyForSignal(unix.SIGWINCH) {
		fmt.Println("no SIGWINCH")
		return 1
	}
	ws, err := unix.IoctlGetWinsize(0, unix.TIOCGWINSZ)
	if err != nil {
		fmt.Println("TIOCGWINSZ:", err)
		return 1
	}
	fmt.Printf("winch %d %d\n", ws.Row, ws.Col)
	return 0
}

// iaStartHolder starts sleep 30 with this process's stdin and stdout, and
// does not wait for it.
func iaStartHolder() error {
	cmd := exec.Command("sleep", "30")
	cmd.Stdin, cmd.Stdout = os.Stdin, os.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start holder: %w", err)
	}
	return nil
}

// iaWaitStdinInput returns once stdin has bytes to read, without reading
// them, and then lets 50ms pass so that a writer larger than the pipe has
// most likely filled it and waits.
func iaWaitStdinInput() error {
	fds := []unix.PollFd{{Fd: 0, Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 30000)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll stdin: %w", err)
		}
		if n == 0 {
			return errors.New("no input on stdin within 30s")
		}
		if fds[0].Revents&unix.POLLIN == 0 {
			return fmt.Errorf("poll stdin: revents %#x", fds[0].Revents)
		}
		time.Sleep(50 * time.Millisecond)
		return nil
	}
}

// iaKillAndWait kills what is left of p's group and waits until p is final.
func iaKillAndWait(ctx context.Context, t *testing.T, p *proc.Process) {
	t.Helper()
	if err := p.Signal(proc.Kill); err != nil {
		t.Fatalf("Signal(Kill) to the leftover holder = %v; want nil", err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait() after killing the holder = %v", err)
	}
}

// iaTTY starts command under a terminal and returns the record.
func iaTTY(t *testing.T, m *proc.Manager, command string, size proc.TermSize) *proc.Process {
	t.Helper()
	return mustStart(t, m, proc.StartRequest{Command: command, TTY: true, Stdin: true, Size: size})
}

func TestTTY(t *testing.T) {
	t.Parallel()

	// Each child runs to its end under a terminal, exit 0 and output want,
	// after the test waited for ready (if any) and then took steps: a
	// string is written, a TermSize resizes, nil closes stdin.
	final := []struct {
		name    string
		command string // or, if empty, helper runs
		helper  string
		size    proc.TermSize
		ready   string
		steps   []any
		want    string
	}{
		{"is-a-terminal", "test -t 0 && test -t 1 && test -t 2 && echo tty", "", proc.TermSize{}, "", nil, "tty\r\n"},
		{"default-size", "stty size", "", proc.TermSize{}, "", nil, "24 80\r\n"},
		{"size", "stty size", "", proc.TermSize{Rows: 30, Cols: 100}, "", nil, "30 100\r\n"},
		{"stderr-merged", "echo out; echo err >&2", "", proc.TermSize{}, "", nil, "out\r\nerr\r\n"},
		// The terminal echoes what was typed, then the shell answers.
		{"write-types", "read x; echo got:$x", "", proc.TermSize{}, "", []any{"hello\n"}, "hello\r\ngot:hello\r\n"},
		// Echo, then cat.
		{"CloseStdin-sends-EOF", "cat", "", proc.TermSize{}, "", []any{"hello\n", nil}, "hello\r\nhello\r\n"},
		{"resize", "echo ready; read line; stty size", "", proc.TermSize{}, "ready\r\n", []any{proc.TermSize{Rows: 40, Cols: 120}, "go\n"}, "ready\r\ngo\r\n40 120\r\n"},
		{"resize-SIGWINCH", "", "interactive-winch", proc.TermSize{}, "ready\r\n", []any{proc.TermSize{Rows: 40, Cols: 120}}, "ready\r\nwinch 40 120\r\n"},
	}
	for _, tt := range final {
		withManager(t, tt.name, proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
			req := proc.StartRequest{Command: tt.command, TTY: true, Stdin: true, Size: tt.size}
			if tt.helper != "" {
				req = helperReq(tt.helper)
				req.TTY, req.Stdin = true, true
			}
			p := mustStart(t, m, req)
			if tt.ready != "" {
				waitText(ctx, t, p, tt.ready)
			}
			for _, step := range tt.steps {
				var err error
				switch step := step.(type) {
				case string:
					var n int
					if n, err = p.Write([]byte(step)); err == nil && n != len(step) {
						err = fmt.Errorf("wrote %d bytes", n)
					}
				case proc.TermSize:
					err = p.Resize(step)
				default:
					err = p.CloseStdin()
				}
				if err != nil {
					t.Fatalf("%s: step %#v = %v; want nil", tt.name, step, err)
				}
			}
			snap := waitFinal(ctx, t, p)
			if snap.Output.Text != tt.want {
				t.Errorf("output of %s = %q; want %q", tt.name, snap.Output.Text, tt.want)
			}
			if code := exitCode(t, snap.Info); code != 0 {
				t.Errorf("exit code of %s = %d; want 0", tt.name, code)
			}
		})
	}

	t.Run("no-Stdin-no-writes", func(t *testing.T) {
		// The terminal is the child's stdin either way, but only
		// StartRequest.Stdin lets the caller type into it (section 8:
		// Write without Stdin is ErrInvalid); Resize still works.
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
		p := mustStart(t, m, proc.StartRequest{Command: "read x; echo got:$x", TTY: true})
		if n, err := p.Write([]byte("hello\n")); n != 0 || !errors.Is(err, proc.ErrInvalid) || !strings.Contains(err.Error(), "Stdin") {
			t.Errorf("Write without Stdin = %d, %v; want 0, ErrInvalid naming Stdin", n, err)
		}
		if err := p.CloseStdin(); !errors.Is(err, proc.ErrInvalid) {
			t.Errorf("CloseStdin without Stdin = %v; want ErrInvalid", err)
		}
		if err := p.Resize(proc.TermSize{Rows: 30, Cols: 100}); err != nil {
			t.Errorf("Resize without Stdin = %v; want nil", err)
		}
		if err := p.Signal(proc.Kill); err != nil {
			t.Fatalf("Signal(Kill) = %v", err)
		}
		if snap := waitFinal(ctx, t, p); strings.Contains(snap.Output.Text, "got:") {
			t.Errorf("output %q: the child read input nobody was allowed to type", snap.Output.Text)
		}
	})

	withManager(t, "after-CloseStdin", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		p := iaTTY(t, m, "echo ready; exec sleep 30", proc.TermSize{})
		waitText(ctx, t, p, "ready\r\n")
		if err := p.CloseStdin(); err != nil {
			t.Fatalf("CloseStdin() = %v; want nil", err)
		}
		if err := p.CloseStdin(); err != nil {
			t.Errorf("second CloseStdin() = %v; want nil", err)
		}
		iaRefused(ctx, t, p, "after CloseStdin", proc.ErrInvalid, "Write")
		if err := p.Resize(proc.TermSize{Rows: 10, Cols: 20}); err != nil {
			t.Errorf("Resize after CloseStdin = %v; want nil (the terminal is still there)", err)
		}
	})

	withManager(t, "resize-refused", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		p := iaTTY(t, m, "echo ready; read line", proc.TermSize{})
		waitText(ctx, t, p, "ready\r\n")
		for _, size := range []proc.TermSize{{Rows: 0, Cols: 80}, {Rows: 24, Cols: 0}, {}} {
			mgrCheckErr(t, fmt.Sprintf("Resize(%+v)", size), p.Resize(size), proc.ErrInvalid)
		}
		if err := p.Resize(proc.TermSize{Rows: 30, Cols: 100}); err != nil {
			t.Errorf("Resize(30x100) after refused sizes = %v; want nil", err)
		}
		if err := p.CloseStdin(); err != nil {
			t.Fatalf("CloseStdin() = %v", err)
		}
		waitFinal(ctx, t, p)
		if err := p.Resize(proc.TermSize{Rows: 40, Cols: 120}); !errors.Is(err, proc.ErrNotRunning) {
			t.Errorf("Resize after exit = %v; want ErrNotRunning", err)
		}
		iaRefused(ctx, t, p, "after exit", proc.ErrNotRunning, "Write", "CloseStdin")
	})

	withManager(t, "write-deadline", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		// Nobody reads the terminal: its input queue fills and the write
		// blocks until the deadline.
		p := iaTTY(t, m, "stty -icanon -echo; echo ready; exec sleep 30", proc.TermSize{})
		waitText(ctx, t, p, "ready\r\n")
		const size = 4 << 20
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		n, err := p.WriteContext(wctx, []byte(strings.Repeat("x", size)))
		if !errors.Is(err, context.DeadlineExceeded) || n >= size {
			t.Errorf("WriteContext(4 MiB, 100ms) to a terminal nobody reads = %d, %v; want n < %d, context.DeadlineExceeded", n, err, size)
		}
		if elapsed := time.Since(start); elapsed > 3*time.Second {
			t.Errorf("WriteContext(4 MiB, 100ms) took %v; want about 100ms", elapsed)
		}
	})
}

// iaBlockedWrite starts req (a child that prints "input" once bytes reach
// its stdin, and reads nothing) with Stdin, waits for the text first (if
// any), and writes size bytes to it on a goroutine of its own
// (WriteContext(ctx) if withCtx, else Write), which sends the result. It
// returns once the write is in progress: bytes reach stdin only from that
// write, which cannot finish.
func iaBlockedWrite(ctx context.Context, t *testing.T, m *proc.Manager, req proc.StartRequest, first string, size int, withCtx bool) (*proc.Process, <-chan iaWriteResult) {
	t.Helper()
	req.Stdin = true
	p := mustStart(t, m, req)
	if first != "" {
		waitText(ctx, t, p, first)
	}
	res := make(chan iaWriteResult, 1)
	go func() {
		data := []byte(strings.Repeat("x", size))
		write := p.Write
		if withCtx {
			write = func(b []byte) (int, error) { return p.WriteContext(ctx, b) }
		}
		n, err := write(data)
		res <- iaWriteResult{n, err}
	}()
	ready := "input\n"
	if req.TTY {
		ready = "input\r\n"
	}
	waitText(ctx, t, p, ready)
	return p, res
}

// iaBounded runs call and returns its error. A call that is not back after
// 5s (many times any expected delay) fails the test: the manager is closed
// to release it, and ok is false.
func iaBounded(ctx context.Context, t *testing.T, m *proc.Manager, what string, call func() error) (err error, ok bool) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	bound := time.NewTimer(5 * time.Second)
	defer bound.Stop()
	select {
	case err := <-done:
		return err, true
	case <-bound.C:
		t.Errorf("%s has not returned after 5s", what)
		if err := m.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
		t.Logf("after Close: %s = %v", what, recv(ctx, t, done, what))
		return nil, false
	}
}

// iaShellQuote quotes s for sh.
func iaShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
