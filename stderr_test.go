package proc_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/procvisor/proc"
)

// The stderr stream of a record: SeparateStderr and its cursor reads.

// ecoCheckStreamBytes fails unless data is the stream name of helper
// interactive-streams (64-byte lines iaStreamLine) at offset off.
func ecoCheckStreamBytes(t *testing.T, name string, off int64, data []byte) {
	t.Helper()
	const line = 64
	for i, c := range data {
		o := off + int64(i)
		if want := iaStreamLine(name, int(o/line))[o%line]; c != want {
			t.Fatalf("%s byte at offset %d = %q; want %q (line %d of that stream)", name, o, c, want, o/line)
		}
	}
}

func TestReadStderrSince(t *testing.T) {
	t.Parallel()

	// Both streams flood small buffers at once: a follower of stderr gets
	// only stderr's bytes, each at its offset, and what it receives plus
	// what it is told it lost is exactly what the child wrote to stderr.
	withManager(t, "flood", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		const lines = 5000
		const written = 64 * lines
		req := helperReq("interactive-streams", strconv.Itoa(lines))
		req.SeparateStderr = true
		req.HeadBytes, req.TailBytes = 4096, 4096
		p := mustStart(t, m, req)
		// First live, as the child writes (a fast follower may lose
		// nothing), then again from 0 once final, when only 8 KiB of the
		// stream is left and the rest must be counted as lost.
		for pass, max := range []int{0, 1000} {
			received, lost := iaFollow(ctx, t, p, true, max, func(off int64, data []byte) { ecoCheckStreamBytes(t, "err", off, data) })
			if received+lost != written {
				t.Errorf("pass %d (max %d): received %d + lost %d = %d; want the %d bytes written to stderr",
					pass, max, received, lost, received+lost, written)
			}
			if pass == 1 && received != 8192 {
				t.Errorf("reading the final record from 0 received %d bytes; want the 8192 retained", received)
			}
		}
		if info := p.Info(); info.OutputBytes != 2*written {
			t.Errorf("Info().OutputBytes = %d; want %d (both streams)", info.OutputBytes, 2*written)
		}
		if c := p.ReadSince(0, 0); c.End != written {
			t.Errorf("ReadSince(0, 0).End = %d; want the %d bytes of stdout alone", c.End, written)
		}
	})

	withManager(t, "exact", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		req := cvReq("out:to stdout\n", "err:hello\n")
		req.SeparateStderr = true
		p := mustStart(t, m, req)
		waitFinal(ctx, t, p)
		for _, tc := range []struct {
			cursor    int64
			max       int
			data      string
			next, end int64
		}{
			{0, 0, "hello\n", 6, 6},
			{3, 2, "lo", 5, 6},
			{-5, 1, "h", 1, 6},
			{6, 0, "", 6, 6},
			{100, 0, "", 100, 6},
		} {
			c := p.ReadStderrSince(tc.cursor, tc.max)
			if string(c.Data) != tc.data || c.Next != tc.next || c.End != tc.end || c.Lost != 0 || c.EOF != (tc.next >= tc.end) {
				t.Errorf("ReadStderrSince(%d, %d) = %q next %d end %d lost %d eof %v; want %q next %d end %d lost 0 eof %v",
					tc.cursor, tc.max, c.Data, c.Next, c.End, c.Lost, c.EOF, tc.data, tc.next, tc.end, tc.next >= tc.end)
			}
		}
	})

	// WaitStderr waits for stderr, not for stdout.
	withManager(t, "wait", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		req := cvReq("out:first\n", "wait", "err:late\n", "sleep")
		req.SeparateStderr = true
		p := startStdin(t, m, req)
		if err := p.WaitOutput(ctx, 0); err != nil {
			t.Fatalf("WaitOutput(0) = %v", err)
		}
		over, cancel := context.WithCancel(ctx)
		cancel()
		if err := p.WaitStderr(over, 0); !errors.Is(err, context.Canceled) {
			t.Errorf("WaitStderr(ended ctx, 0) with stdout written and stderr empty = %v; want an error wrapping context.Canceled", err)
		}
		if _, err := p.Write([]byte("\n")); err != nil {
			t.Fatalf("Write = %v", err)
		}
		if err := p.WaitStderr(ctx, 0); err != nil {
			t.Fatalf("WaitStderr(0) = %v", err)
		}
		if c := p.ReadStderrSince(0, 0); string(c.Data) != "late\n" || c.EOF {
			t.Errorf("ReadStderrSince(0, 0) = %q, EOF %v; want %q, false while running", c.Data, c.EOF, "late\n")
		}
		if err := p.CloseStdin(); err != nil {
			t.Fatalf("CloseStdin = %v", err)
		}
		if err := p.WaitStderr(ctx, 5); err != nil {
			t.Fatalf("WaitStderr(5) until final = %v", err)
		}
		if c := p.ReadStderrSince(5, 0); !c.EOF || p.Info().Running {
			t.Errorf("after WaitStderr(5) returned at the end: EOF %v, running %v; want a final record and EOF", c.EOF, p.Info().Running)
		}
	})

	// Without SeparateStderr, stderr is in the Output stream and the stderr
	// stream is empty: no data, EOF only once the record is final, and
	// WaitStderr returns once it is.
	withManager(t, "without-separate-stderr", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		p := startStdin(t, m, cvReq("err:to stderr\n", "sleep"))
		waitText(ctx, t, p, "to stderr\n")
		if c := p.ReadStderrSince(0, 0); len(c.Data) != 0 || c.End != 0 || c.Lost != 0 || c.EOF {
			t.Errorf("ReadStderrSince(0, 0) while running = %q end %d lost %d eof %v; want empty, not EOF", c.Data, c.End, c.Lost, c.EOF)
		}
		over, cancel := context.WithCancel(ctx)
		cancel()
		if err := p.WaitStderr(over, 0); !errors.Is(err, context.Canceled) {
			t.Errorf("WaitStderr(ended ctx) while running = %v; want an error wrapping context.Canceled", err)
		}
		if err := p.CloseStdin(); err != nil {
			t.Fatalf("CloseStdin = %v", err)
		}
		if err := p.WaitStderr(ctx, 0); err != nil {
			t.Fatalf("WaitStderr(0) until final = %v", err)
		}
		if p.Info().Running {
			t.Errorf("WaitStderr(0) returned nil while the record is running")
		}
		if c := p.ReadStderrSince(0, 0); len(c.Data) != 0 || c.End != 0 || !c.EOF {
			t.Errorf("ReadStderrSince(0, 0) once final = %q end %d eof %v; want empty and EOF", c.Data, c.End, c.EOF)
		}
	})
}

func TestSeparateStderr(t *testing.T) {
	t.Parallel()

	// stdout "a", stderr "b", stdout "c", one after the other: kept apart,
	// or combined in order; cursors address stdout alone.
	for _, tc := range []struct {
		separate       bool
		output, stderr string
	}{{true, "a\nc\n", "b\n"}, {false, "a\nb\nc\n", ""}} {
		t.Run(fmt.Sprintf("separate=%v", tc.separate), func(t *testing.T) {
			t.Parallel()
			ctx, m := testManager(t, proc.Options{})
			req := cvReq(`out:a\n`, `err:b\n`, `out:c\n`)
			req.SeparateStderr = tc.separate
			p := mustStart(t, m, req)
			snap := waitFinal(ctx, t, p)
			if snap.Output.Text != tc.output || snap.Stderr.Text != tc.stderr || p.Output().Text != tc.output || p.Stderr().Text != tc.stderr {
				t.Errorf("Snapshot() Output, Stderr = %q, %q; Output(), Stderr() = %q, %q; want %q, %q",
					snap.Output.Text, snap.Stderr.Text, p.Output().Text, p.Stderr().Text, tc.output, tc.stderr)
			}
			if !tc.separate && (snap.Stderr != (proc.Output{}) || p.Stderr() != (proc.Output{})) {
				t.Errorf("Stderr() = %+v, Snapshot().Stderr = %+v; want empty without SeparateStderr", p.Stderr(), snap.Stderr)
			}
			if snap.Info.OutputBytes != 6 {
				t.Errorf("Info.OutputBytes = %d; want 6 (both streams)", snap.Info.OutputBytes)
			}
			n := int64(len(tc.output))
			if c := p.ReadSince(0, 0); string(c.Data) != tc.output || c.End != n || c.Next != n || !c.EOF {
				t.Errorf("ReadSince(0, 0) = %q next %d end %d eof %v; want %q next %d end %d eof true",
					c.Data, c.Next, c.End, c.EOF, tc.output, n, n)
			}
		})
	}

	withManager(t, "concurrent-writers", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		const n = 2000
		req := helperReq("interactive-streams", strconv.Itoa(n))
		req.SeparateStderr = true
		req.HeadBytes = 2 * n * 64
		p := mustStart(t, m, req)
		snap := waitFinal(ctx, t, p)
		if code := exitCode(t, snap.Info); code != 0 {
			t.Fatalf("exit code = %d; want 0", code)
		}
		if snap.Info.OutputBytes != 2*n*64 {
			t.Errorf("Info.OutputBytes = %d; want %d", snap.Info.OutputBytes, 2*n*64)
		}
		for _, s := range []struct {
			name string
			out  proc.Output
		}{{"out", snap.Output}, {"err", snap.Stderr}} {
			if s.out.Truncation != nil {
				t.Errorf("%s: Truncation = %+v; want nil", s.name, *s.out.Truncation)
			}
			var want strings.Builder
			for i := range n {
				want.WriteString(iaStreamLine(s.name, i))
			}
			if s.out.Text != want.String() {
				lines := strings.SplitAfter(s.out.Text, "\n")
				for i, l := range lines {
					if i >= n || l != iaStreamLine(s.name, i) {
						t.Fatalf("%s: line %d of %d = %q; want every line whole and in order", s.name, i, len(lines), l)
					}
				}
				t.Fatalf("%s: %d bytes differ from the %d written", s.name, len(s.out.Text), want.Len())
			}
		}
	})

	t.Run("TTY-refused", func(t *testing.T) {
		t.Parallel()
		m := newManager(t, proc.Options{})
		req := mgrExitReq(0)
		req.TTY = true
		req.SeparateStderr = true
		if p, err := m.Start(req); !errors.Is(err, proc.ErrInvalid) {
			t.Errorf("Start(TTY and SeparateStderr) = %v, %v; want ErrInvalid", p, err)
		}
		if infos := m.List(); len(infos) != 0 {
			t.Errorf("List() after a refused start = %d records; want 0", len(infos))
		}
	})
}
