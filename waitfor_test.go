package proc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/procvisor/proc"
)

// WaitFor (waitfor.go): waiting for a line of output.

func TestWaitFor(t *testing.T) {
	t.Parallel()

	// A line that arrives one byte at a time is matched whole: an
	// unanchored pattern that a fragment would satisfy still returns the
	// full line.
	for _, fromStart := range []bool{false, true} {
		t.Run(fmt.Sprintf("bytewise-fromStart=%v", fromStart), func(t *testing.T) {
			t.Parallel()
			ctx, m := testManager(t, proc.Options{})
			p := startStdin(t, m, cvReq("out:booting\n", "wait", "bytes:listening on :8080\n", "sleep"))
			defer cvStop(ctx, t, p)
			re := regexp.MustCompile(`listening on :\d+`)
			line, err := cvWaitForThen(ctx, t, p, re, fromStart, cvGo(p))
			if err != nil || line != "listening on :8080" {
				t.Errorf("WaitFor(%q) = %q, %v; want %q, nil", re, line, err, "listening on :8080")
			}
		})
	}

	withManager(t, "fromStart-finds-retained", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		p := startStdin(t, m, cvReq("out:first\nready 1\nlast\n", "sleep"))
		defer cvStop(ctx, t, p)
		waitLen(ctx, t, p, int64(len("first\nready 1\nlast\n")))
		line, err := p.WaitFor(ctx, regexp.MustCompile(`^ready \d$`), true)
		if err != nil || line != "ready 1" {
			t.Errorf("WaitFor(fromStart) of a line printed before the call = %q, %v; want %q, nil", line, err, "ready 1")
		}
	})

	// Without fromStart, lines completed before the call do not count: the
	// child prints "ready 2" only once WaitFor is blocked.
	withManager(t, "not-fromStart-skips-completed", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		p := startStdin(t, m, cvReq("out:ready 1\n", "wait", "out:ready 2\n", "sleep"))
		defer cvStop(ctx, t, p)
		re := regexp.MustCompile(`^ready \d$`)
		if line, err := p.WaitFor(ctx, re, true); err != nil || line != "ready 1" {
			t.Fatalf("WaitFor(fromStart) = %q, %v; want %q", line, err, "ready 1")
		}
		line, err := cvWaitForThen(ctx, t, p, re, false, cvGo(p))
		if err != nil || line != "ready 2" {
			t.Errorf("WaitFor(not fromStart) = %q, %v; want %q (not the line completed before the call)", line, err, "ready 2")
		}
	})

	// The same when the output is larger than what is retained: the lines
	// completed before the call sit in the tail, after omitted bytes.
	for _, tc := range []struct {
		name       string
		head, tail int
		lines      int
	}{
		{"not-fromStart-skips-completed-in-tail-default-buffers", 0, 0, 3000}, // 39 KB: more than head+tail, under head+64 KiB
		{"not-fromStart-skips-completed-in-tail-1KiB-buffers", 1 << 10, 1 << 10, 300},
		{"not-fromStart-skips-completed-in-tail-past-64KiB", 1 << 10, 1 << 10, 6000},
	} {
		withManager(t, tc.name, proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
			req := cvReq("lines:"+strconv.Itoa(tc.lines), "out:old marker\nafter old\n", "wait", "out:new marker\n", "sleep")
			req.HeadBytes, req.TailBytes = tc.head, tc.tail
			p := startStdin(t, m, req)
			defer cvStop(ctx, t, p)
			if line, err := p.WaitFor(ctx, regexp.MustCompile(`^after old$`), true); err != nil {
				t.Fatalf("WaitFor(fromStart, after old) = %q, %v", line, err)
			}
			if tr := p.Output().Truncation; tr == nil || tr.OmittedBytes == 0 {
				t.Fatalf("Output().Truncation = %+v; the test needs omitted bytes", tr)
			}
			re := regexp.MustCompile(`marker$`)
			line, err := cvWaitForThen(ctx, t, p, re, false, cvGo(p))
			if err != nil || line != "new marker" {
				t.Errorf("WaitFor(%q, not fromStart) = %q, %v; want %q (a line completed before the call matched)", re, line, err, "new marker")
			}
		})
	}

	// A line begun before the call (and finished after it) matches.
	for _, tc := range []struct {
		name, before, after, re, want string
	}{
		{"line-begun-before-call", "done before\npart", "ial done\n", `done$`, "partial done"},
		{"first-line-begun-before-call", "part", "ial\n", `^partial$`, "partial"},
	} {
		withManager(t, tc.name, proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
			p := startStdin(t, m, cvReq("out:"+tc.before, "wait", "out:"+tc.after, "sleep"))
			defer cvStop(ctx, t, p)
			waitLen(ctx, t, p, int64(len(tc.before)))
			re := regexp.MustCompile(tc.re)
			line, err := cvWaitForThen(ctx, t, p, re, false, cvGo(p))
			if err != nil || line != tc.want {
				t.Errorf("WaitFor(%q, not fromStart) = %q, %v; want %q, the line begun before the call", re, line, err, tc.want)
			}
		})
	}

	// Lines far longer than the buffer: matched on what is retained, never
	// on a fragment, and WaitFor never hangs.
	withManager(t, "long-lines", proc.Options{HeadBytes: 1 << 10, TailBytes: 1 << 10}, func(t *testing.T, ctx context.Context, m *proc.Manager) {

		p := mustStart(t, m, cvReq("out:start", "fill:102400", "out:END\nready\n"))
		for _, tc := range []struct {
			re      string
			want    string
			wantErr error
		}{
			{`^ready$`, "ready", nil},
			{`END`, "", proc.ErrNotRunning}, // only in a fragment whose line began 100 KiB earlier
			{`^x+END$`, "", proc.ErrNotRunning},
		} {
			line, err := p.WaitFor(ctx, regexp.MustCompile(tc.re), true)
			if line != tc.want || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Errorf("WaitFor(%q, fromStart) = %q, %v; want %q, %v", tc.re, line, err, tc.want, tc.wantErr)
			}
		}

		p = startStdin(t, m, cvReq("wait", "fill:102400", "out:\nready\n", "sleep"))
		defer cvStop(ctx, t, p)
		line, err := cvWaitForThen(ctx, t, p, regexp.MustCompile(`^ready$`), false, cvGo(p))
		if err != nil || line != "ready" {
			t.Errorf("WaitFor(ready) after a 100 KiB line = %q, %v; want %q", line, err, "ready")
		}

		p = mustStart(t, m, cvReq("fill:102400", "out:\n"))
		line, err = p.WaitFor(ctx, regexp.MustCompile(`ready`), false)
		if !errors.Is(err, proc.ErrNotRunning) {
			t.Errorf("WaitFor(ready) on a process that never prints it = %q, %v; want ErrNotRunning", line, err)
		}
	})

	// The omitted bytes end exactly with a newline: the next line is
	// retained from its first byte and must be matched.
	withManager(t, "line-starting-right-after-omitted-bytes", proc.Options{HeadBytes: 1 << 10, TailBytes: 1 << 10}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		ready := "ready " + strings.Repeat("y", 1017) // + "\n": exactly the 1 KiB tail
		p := mustStart(t, m, cvReq("fill:5000", "out:\n"+ready+"\n"))
		snap := waitFinal(ctx, t, p)
		if c := p.ReadSince(1<<10, 0); c.Lost != 3977 || !bytes.HasPrefix(c.Data, []byte("ready ")) || snap.Info.OutputBytes != 6025 {
			t.Fatalf("ReadSince(1024) = lost %d, data %.10q; want 3977 bytes omitted right before the ready line", c.Lost, c.Data)
		}
		line, err := p.WaitFor(ctx, regexp.MustCompile(`^ready y+$`), true)
		if err != nil || line != ready {
			t.Errorf("WaitFor(^ready y+$, fromStart) = %.20q (%d bytes), %v; want the fully retained %d-byte line", line, len(line), err, len(ready))
		}
	})

	withManager(t, "first-64KiB-of-a-line", proc.Options{HeadBytes: 256 << 10, TailBytes: 256 << 10}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		p := mustStart(t, m, cvReq("fill:70000", "out:TAIL\nend\n"))
		if line, err := p.WaitFor(ctx, regexp.MustCompile(`TAIL`), true); !errors.Is(err, proc.ErrNotRunning) {
			t.Errorf("WaitFor(TAIL) past the first 64 KiB of a line = %.20q, %v; want ErrNotRunning", line, err)
		}
		line, err := p.WaitFor(ctx, regexp.MustCompile(`^x+$`), true)
		if err != nil || len(line) < 64<<10 || len(line) > 70000 || strings.Trim(line, "x") != "" {
			t.Errorf("WaitFor(^x+$) = %d bytes, %v; want the line's first 64 KiB of x", len(line), err)
		}
		if line, err := p.WaitFor(ctx, regexp.MustCompile(`^end$`), true); err != nil || line != "end" {
			t.Errorf("WaitFor(^end$) after the long line = %q, %v; want %q", line, err, "end")
		}
	})

	withManager(t, "no-match", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		p := mustStart(t, m, cvReq("out:a\nb\n"))
		for _, fromStart := range []bool{true, false} {
			line, err := p.WaitFor(ctx, regexp.MustCompile(`^c$`), fromStart)
			if !errors.Is(err, proc.ErrNotRunning) || line != "" {
				t.Errorf("WaitFor(^c$, %v) = %q, %v; want an error wrapping ErrNotRunning", fromStart, line, err)
			}
		}
		if p.Info().Running {
			t.Errorf("WaitFor returned ErrNotRunning but the record is not final")
		}
		// Called on a final record.
		if _, err := p.WaitFor(ctx, regexp.MustCompile(`^c$`), false); !errors.Is(err, proc.ErrNotRunning) {
			t.Errorf("WaitFor on a final record = %v; want ErrNotRunning", err)
		}
		if line, err := p.WaitFor(ctx, regexp.MustCompile(`^b$`), true); err != nil || line != "b" {
			t.Errorf("WaitFor(^b$, fromStart) on a final record = %q, %v; want %q", line, err, "b")
		}
	})

	withManager(t, "unterminated-last-line", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		p := startStdin(t, m, cvReq("out:first\nno newline", "wait"))
		waitLen(ctx, t, p, int64(len("first\nno newline")))
		// It counts only once the process is final: the child ends only
		// after WaitFor blocked.
		line, err := cvWaitForThen(ctx, t, p, regexp.MustCompile(`^no newline$`), true, p.CloseStdin)
		if err != nil || line != "no newline" {
			t.Errorf("WaitFor(unterminated last line) = %q, %v; want %q", line, err, "no newline")
		}
		if p.Info().Running {
			t.Errorf("WaitFor matched an unterminated line before the process was final")
		}
	})

	withManager(t, "carriage-return", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		p := mustStart(t, m, cvReq(`out:crlf line\r\nnext\r\n`))
		line, err := p.WaitFor(ctx, regexp.MustCompile(`^crlf line$`), true)
		if err != nil || line != "crlf line" {
			t.Errorf("WaitFor(^crlf line$) = %q, %v; want %q without \\r", line, err, "crlf line")
		}
	})

	withManager(t, "ctx-canceled", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		p := startStdin(t, m, cvReq("out:hello\n", "sleep"))
		defer cvStop(ctx, t, p)
		waitCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		line, err := cvWaitForThen(waitCtx, t, p, regexp.MustCompile(`never`), true, func() error { cancel(); return nil })
		if !errors.Is(err, context.Canceled) || errors.Is(err, proc.ErrNotRunning) || line != "" {
			t.Errorf("WaitFor() with a canceled ctx = %q, %v; want an error wrapping context.Canceled", line, err)
		}
		if !p.Info().Running {
			t.Errorf("the process ended when WaitFor's ctx did")
		}
		// Already over before the call.
		_, err = p.WaitFor(waitCtx, regexp.MustCompile(`never`), false)
		// One prefix: WaitFor's, not WaitOutput's under it.
		if want := fmt.Sprintf("wait for %q in %q: %v", "never", p.Info().ID, context.Canceled); !errors.Is(err, context.Canceled) || err.Error() != want {
			t.Errorf("WaitFor() with an ended ctx = %v; want %q", err, want)
		}
	})

	withManager(t, "nil-regexp", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		p := mustStart(t, m, cvReq("out:x\n"))
		if _, err := p.WaitFor(ctx, nil, true); !errors.Is(err, proc.ErrInvalid) {
			t.Errorf("WaitFor(nil) = %v; want ErrInvalid", err)
		}
		waitFinal(ctx, t, p)
	})
}
