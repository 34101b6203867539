package proc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/procvisor/proc"
)

// Stdin (stdin.go): Write, WriteContext and CloseStdin on a pipe. The
// Unix cases (grandchildren holding stdin, blocked writes, terminals) are
// in stdin_unix_test.go.

func TestStdinWriteThenCloseStdin(t *testing.T) {
	t.Parallel()
	_, snap := iaEcho(testCtx(t), t, 0, []byte("hello\n"), []byte(""), []byte("world\n"))
	if want := "hello\nworld\n"; snap.Output.Text != want {
		t.Errorf("Output().Text = %q; want %q", snap.Output.Text, want)
	}
}

// TestStdinLargeEcho writes 1 MiB in several writes to a child that echoes
// it: stdin and stdout fill and drain at once, and nothing is lost or
// reordered.
func TestStdinLargeEcho(t *testing.T) {
	t.Parallel()
	const size = 1 << 20
	data := iaPattern(0, size)
	var chunks [][]byte
	for off := 0; off < size; {
		k := min(64<<10+123, size-off) // not aligned with the pipe buffer
		chunks = append(chunks, data[off:off+k])
		off += k
	}
	p, snap := iaEcho(testCtx(t), t, 2*size, chunks...)
	if snap.Output.Truncation != nil {
		t.Errorf("Output().Truncation = %+v; want nil", *snap.Output.Truncation)
	}
	iaCheckPattern(t, "echoed stdin", 0, iaReadAll(t, p))
}

// TestStdinRefused pins the stdin calls refused by the record's state.
func TestStdinRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		req   proc.StartRequest // mgr-block never reads stdin
		stdin bool
		// to brings the record to the state under test.
		to    func(ctx context.Context, t *testing.T, m *proc.Manager, p *proc.Process)
		want  error
		calls []string
	}{
		{"without-Stdin", mgrBlockReq(), false, nil, proc.ErrInvalid, append(iaStdinCalls, "Resize")},
		{"after-CloseStdin", mgrBlockReq(), true, func(_ context.Context, t *testing.T, _ *proc.Manager, p *proc.Process) {
			if err := p.CloseStdin(); err != nil {
				t.Fatalf("CloseStdin() = %v; want nil", err)
			}
			if err := p.CloseStdin(); err != nil {
				t.Errorf("second CloseStdin() = %v; want nil", err)
			}
			if !p.Info().Running {
				t.Errorf("Info().Running = false; want true (the helper sleeps on after its stdin closes)")
			}
		}, proc.ErrInvalid, iaStdinCalls[:2]},
		{"after-exit", mgrExitReq(0), true, func(ctx context.Context, t *testing.T, _ *proc.Manager, p *proc.Process) {
			waitFinal(ctx, t, p)
		}, proc.ErrNotRunning, iaStdinCalls},
		{"after-Close", mgrBlockReq(), true, func(_ context.Context, t *testing.T, m *proc.Manager, _ *proc.Process) {
			if err := m.Close(); err != nil {
				t.Fatalf("Close() = %v; want nil", err)
			}
		}, proc.ErrClosed, []string{"Write", "CloseStdin"}},
	} {
		withManager(t, tc.name, proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
			req := tc.req
			req.Stdin = tc.stdin
			p := mustStart(t, m, req)
			if tc.to != nil {
				tc.to(ctx, t, m, p)
			}
			iaRefused(ctx, t, p, tc.name, tc.want, tc.calls...)
		})
	}
}

// TestWriteContextDeadline pins a write cut short by its context: it
// returns the bytes written so far and an error wrapping ctx.Err(), quickly;
// exactly those bytes reach the child, and later writes still work.
func TestWriteContextDeadline(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	gate := filepath.Join(t.TempDir(), "gate")
	const size = 10 << 20
	req := helperReq("interactive-gate", gate)
	req.HeadBytes = size + 1 // keep whatever the child echoes
	p := startStdin(t, m, req)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if n, err := p.WriteContext(cancelled, []byte("never\n")); n != 0 || !errors.Is(err, context.Canceled) {
		t.Errorf("WriteContext(cancelled ctx) = %d, %v; want 0, context.Canceled", n, err)
	}

	// The child reads nothing yet: the write fills the pipe and blocks
	// until the deadline, which is the bound under test.
	data := iaPattern(0, size)
	wctx, wcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer wcancel()
	start := time.Now()
	n, err := p.WriteContext(wctx, data)
	elapsed := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WriteContext(10 MiB, 100ms) = %d, %v; want an error wrapping context.DeadlineExceeded", n, err)
	}
	if in := mgrSentinelsIn(err); len(in) != 0 {
		t.Errorf("WriteContext(10 MiB, 100ms) error %v wraps %v; want only ctx.Err()", err, in)
	}
	if n < 0 || n >= size {
		t.Errorf("WriteContext(10 MiB, 100ms) wrote %d bytes; want 0 <= n < %d", n, size)
	}
	if elapsed > 3*time.Second {
		t.Errorf("WriteContext(10 MiB, 100ms) took %v; want about 100ms", elapsed)
	}

	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if n2, err := p.WriteContext(ctx, []byte("after\n")); n2 != 6 || err != nil {
		t.Fatalf("WriteContext after a timed-out write = %d, %v; want 6, nil", n2, err)
	}
	if err := p.CloseStdin(); err != nil {
		t.Fatalf("CloseStdin() = %v; want nil", err)
	}
	snap := waitFinal(ctx, t, p)
	if code := exitCode(t, snap.Info); code != 0 {
		t.Fatalf("exit code = %d; want 0; stderr-and-stdout %q", code, snap.Output.Text)
	}
	got := iaReadAll(t, p)
	if len(got) != n+6 {
		t.Fatalf("child read %d bytes; want the %d the cut write reported plus 6", len(got), n)
	}
	iaCheckPattern(t, "bytes of the cut write", 0, got[:n])
	if tail := string(got[n:]); tail != "after\n" {
		t.Errorf("child read %q after the cut write; want %q", tail, "after\n")
	}
}

// TestWriteSerialised pins that concurrent writes land whole, one after the
// other: the child reads the concatenation of whole blocks in some order.
func TestWriteSerialised(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	const (
		writers   = 4
		perWriter = 4
		block     = 64 << 10
	)
	req := helperReq("interactive-cat")
	req.HeadBytes = writers * perWriter * block
	p := startStdin(t, m, req)

	start := make(chan struct{})
	errc := make(chan error, writers)
	for w := range writers {
		go func() {
			<-start
			for j := range perWriter {
				b := bytes.Repeat([]byte{byte('A' + w*perWriter + j)}, block)
				if n, err := p.Write(b); n != block || err != nil {
					errc <- fmt.Errorf("Write(block %c) = %d, %v; want %d, nil", b[0], n, err, block)
					return
				}
			}
			errc <- nil
		}()
	}
	close(start)
	for range writers {
		if err := recv(ctx, t, errc, "a writer"); err != nil {
			t.Error(err)
		}
	}
	if err := p.CloseStdin(); err != nil {
		t.Fatalf("CloseStdin() = %v; want nil", err)
	}
	waitFinal(ctx, t, p)
	got := iaReadAll(t, p)
	if len(got) != writers*perWriter*block {
		t.Fatalf("child read %d bytes; want %d", len(got), writers*perWriter*block)
	}
	seen := map[byte]bool{}
	for off := 0; off < len(got); off += block {
		b := got[off : off+block]
		if i := bytes.IndexFunc(b, func(r rune) bool { return byte(r) != b[0] }); i >= 0 {
			t.Fatalf("block at offset %d starts with %q but holds %q at %d: writes interleaved", off, b[0], b[i], off+i)
		}
		if seen[b[0]] {
			t.Fatalf("block %q appears twice", b[0])
		}
		seen[b[0]] = true
	}
}
