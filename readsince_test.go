package proc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/procvisor/proc"
)

// Tests of cursor reads (ReadSince, WaitOutput), and the helpers they
// share with the stderr, request and stdin tests (stderr_test.go,
// request_test.go, stdin_test.go). The terminal's tests are in
// interactive_unix_test.go.

// interactive-cat copies stdin to stdout, like cat.
var _ = helper("interactive-cat", func([]string) int {
	if _, err := io.Copy(os.Stdout, os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "copy:", err)
		return 1
	}
	return 0
})

// interactive-gate PATH reads nothing until the file PATH exists, then
// copies stdin to stdout.
var _ = helper("interactive-gate", func(args []string) int {
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(args[0]); err == nil {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "gate never opened")
			return 3
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := io.Copy(os.Stdout, os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "copy:", err)
		return 1
	}
	return 0
})

// interactive-streams N writes N lines to stdout and N lines to stderr
// from two goroutines at once, one write per line (see iaStreamLine).
var _ = helper("interactive-streams", func(args []string) int {
	n, err := strconv.Atoi(args[0])
	if err != nil {
		return 2
	}
	var wg sync.WaitGroup
	failed := make(chan struct{}, 2)
	for _, s := range []struct {
		f    *os.File
		name string
	}{{os.Stdout, "out"}, {os.Stderr, "err"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				if _, err := s.f.WriteString(iaStreamLine(s.name, i)); err != nil {
					failed <- struct{}{}
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(failed) > 0 {
		return 1
	}
	return 0
})

// interactive-pattern N CHUNK PAUSE_MS [wait] writes iaPattern(0, N) to
// stdout in writes of CHUNK bytes, pausing PAUSE_MS between writes;
// with "wait" it then reads stdin until end-of-file before it exits.
var _ = helper("interactive-pattern", func(args []string) int {
	n, err1 := strconv.Atoi(args[0])
	chunk, err2 := strconv.Atoi(args[1])
	pause, err3 := strconv.Atoi(args[2])
	if err1 != nil || err2 != nil || err3 != nil || chunk <= 0 {
		return 2
	}
	data := iaPattern(0, n)
	for len(data) > 0 {
		k := min(chunk, len(data))
		if _, err := os.Stdout.Write(data[:k]); err != nil {
			return 1
		}
		data = data[k:]
		if pause > 0 && len(data) > 0 {
			time.Sleep(time.Duration(pause) * time.Millisecond)
		}
	}
	if len(args) > 3 && args[3] == "wait" {
		_, _ = io.Copy(io.Discard, os.Stdin)
	}
	return 0
})

// iaStreamLine is line i of stream name of interactive-streams: 64 bytes.
func iaStreamLine(name string, i int) string {
	return fmt.Sprintf("%s %06d %s\n", name, i, strings.Repeat("x", 64-len(name)-9))
}

// iaPattern returns the bytes [off, off+n) of an endless stream of 16-byte
// lines "%015x\n" numbering themselves, so that every byte's position can
// be checked.
func iaPattern(off int64, n int) []byte {
	const (
		rec    = 16
		digits = "0123456789abcdef"
	)
	skip := int(off % rec)
	b := make([]byte, (skip+n+rec-1)/rec*rec)
	for i, r := 0, off/rec; i < len(b); i, r = i+rec, r+1 {
		v := r
		for j := rec - 2; j >= 0; j-- {
			b[i+j] = digits[v&15]
			v >>= 4
		}
		b[i+rec-1] = '\n'
	}
	return b[skip : skip+n]
}

// iaCheckPattern fails unless data is iaPattern(off, len(data)).
func iaCheckPattern(t *testing.T, what string, off int64, data []byte) {
	t.Helper()
	want := iaPattern(off, len(data))
	if bytes.Equal(data, want) {
		return
	}
	i := 0
	for i < len(data) && data[i] == want[i] {
		i++
	}
	lo, hi := max(i-16, 0), min(i+16, len(data))
	t.Fatalf("%s: %d bytes at offset %d differ from the stream at offset %d: got %q, want %q",
		what, len(data), off, off+int64(i), data[lo:hi], want[lo:hi])
}

// iaMarker is the omission marker of a rendering.
func iaMarker(n int64) string {
	return fmt.Sprintf("\n... [omitted %d bytes] ...\n", n)
}

// iaReadAll reads the whole retained Output stream of p from cursor 0 and
// fails if any byte was not retained.
func iaReadAll(t *testing.T, p *proc.Process) []byte {
	t.Helper()
	var out []byte
	for cursor := int64(0); ; {
		c := p.ReadSince(cursor, 0)
		if c.Lost != 0 {
			t.Fatalf("ReadSince(%d, 0).Lost = %d; want 0 (buffers too small for the test)", cursor, c.Lost)
		}
		out = append(out, c.Data...)
		if c.Next >= c.End {
			return out
		}
		cursor = c.Next
	}
}

type iaWriteResult struct {
	n   int
	err error
}

// iaEcho writes chunks to a cat with HeadBytes head (0: the default), one
// call each, WriteContext and Write in turn; it closes its stdin and checks
// that the cat ended at end-of-file (exit 0) with every byte counted, and
// returns the final snapshot.
func iaEcho(ctx context.Context, t *testing.T, head int, chunks ...[]byte) (*proc.Process, proc.Snapshot) {
	t.Helper()
	m := newManager(t, proc.Options{})
	req := helperReq("interactive-cat")
	req.HeadBytes = head
	p := startStdin(t, m, req)
	total := 0
	for i, c := range chunks {
		write := p.Write
		if i%2 == 0 {
			write = func(b []byte) (int, error) { return p.WriteContext(ctx, b) }
		}
		if n, err := write(c); n != len(c) || err != nil {
			t.Fatalf("write %d (%d bytes at %d) = %d, %v; want %d, nil", i, len(c), total, n, err, len(c))
		}
		total += len(c)
	}
	if err := p.CloseStdin(); err != nil {
		t.Fatalf("CloseStdin() = %v; want nil", err)
	}
	snap := waitFinal(ctx, t, p)
	wantExit(t, snap, 0)
	if snap.Info.OutputBytes != int64(total) {
		t.Errorf("Info.OutputBytes = %d; want %d", snap.Info.OutputBytes, total)
	}
	return p, snap
}

// iaStdinCalls are the calls that iaRefused makes, by name.
var iaStdinCalls = []string{"Write", "WriteContext", "CloseStdin"}

// iaRefused checks that each of p's calls (iaStdinCalls, or "Resize")
// fails with an error wrapping want, writing nothing; when names p's state.
func iaRefused(ctx context.Context, t *testing.T, p *proc.Process, when string, want error, calls ...string) {
	t.Helper()
	for _, call := range calls {
		var n int
		var err error
		switch call {
		case "Write":
			n, err = p.Write([]byte("x"))
		case "WriteContext":
			n, err = p.WriteContext(ctx, []byte("x"))
		case "CloseStdin":
			err = p.CloseStdin()
		case "Resize":
			err = p.Resize(proc.TermSize{Rows: 10, Cols: 10})
		default:
			t.Fatalf("iaRefused: no call %q", call)
		}
		if n != 0 || !errors.Is(err, want) {
			t.Errorf("%s %s = %d, %v; want 0, an error wrapping %v", call, when, n, err, want)
		}
	}
}

// iaFollow reads p's Output stream (with stderr, its Stderr stream) from
// cursor 0 until EOF as a poller would, at most max bytes a read, and
// passes every chunk to check with its offset. It returns the bytes it
// received and the bytes it was told it lost.
func iaFollow(ctx context.Context, t *testing.T, p *proc.Process, stderr bool, max int, check func(off int64, data []byte)) (received, lost int64) {
	t.Helper()
	wait, read, name := p.WaitOutput, p.ReadSince, "ReadSince"
	if stderr {
		wait, read, name = p.WaitStderr, p.ReadStderrSince, "ReadStderrSince"
	}
	for cursor := int64(0); ; {
		if err := wait(ctx, cursor); err != nil {
			t.Fatalf("waiting for %s(%d) = %v", name, cursor, err)
		}
		c := read(cursor, max)
		if c.Lost < 0 || c.Next != cursor+c.Lost+int64(len(c.Data)) || c.Next > c.End || (max > 0 && len(c.Data) > max) ||
			(cursor < c.End && len(c.Data) == 0) {
			t.Fatalf("%s(%d, %d) = %d bytes, lost %d, next %d, end %d; want next = cursor+lost+len <= end, 0 < len <= max",
				name, cursor, max, len(c.Data), c.Lost, c.Next, c.End)
		}
		check(c.Next-int64(len(c.Data)), c.Data)
		received += int64(len(c.Data))
		lost += c.Lost
		cursor = c.Next
		if c.EOF {
			if p.Info().Running {
				t.Fatalf("%s(%d) reported EOF while Info().Running is true", name, cursor)
			}
			return received, lost
		}
	}
}

// iaStream is iaFollow of p's Output stream, checked against iaPattern.
func iaStream(ctx context.Context, t *testing.T, p *proc.Process, max int) (received, lost int64) {
	t.Helper()
	return iaFollow(ctx, t, p, false, max, func(off int64, data []byte) {
		iaCheckPattern(t, fmt.Sprintf("ReadSince(%d, %d)", off, max), off, data)
	})
}

// TestReadSinceStreamSmall pins that a poller following a process whose
// output fits in head and tail receives every byte, while it runs.
func TestReadSinceStreamSmall(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	const size = 20000 // under the default 16 KiB + 16 KiB
	p := mustStart(t, m, helperReq("interactive-pattern", strconv.Itoa(size), "100", "1"))
	received, lost := iaStream(ctx, t, p, 0)
	if received != size || lost != 0 {
		t.Errorf("streamed %d bytes, lost %d; want %d, 0", received, lost, size)
	}
	if info := p.Info(); info.OutputBytes != size {
		t.Errorf("Info().OutputBytes = %d; want %d", info.OutputBytes, size)
	}
}

// TestReadSinceStreamLarge pins the accounting of a poller that falls
// behind a large output: every byte it gets is the stream's byte at that
// offset, and received + lost is the stream's length.
func TestReadSinceStreamLarge(t *testing.T) {
	t.Parallel()
	const size = 10 << 20
	for _, max := range []int{0, 4096} {
		t.Run(fmt.Sprintf("max-%d", max), func(t *testing.T) {
			t.Parallel()
			ctx, m := testManager(t, proc.Options{})
			p := mustStart(t, m, helperReq("interactive-pattern", strconv.Itoa(size), strconv.Itoa(64<<10), "0"))
			received, lost := iaStream(ctx, t, p, max)
			t.Logf("received %d bytes, lost %d", received, lost)
			info := p.Info()
			if info.OutputBytes != size {
				t.Fatalf("Info().OutputBytes = %d; want %d", info.OutputBytes, size)
			}
			if received+lost != info.OutputBytes {
				t.Errorf("streamed %d bytes + lost %d = %d; want Info.OutputBytes %d", received, lost, received+lost, info.OutputBytes)
			}
			if received < proc.DefaultHeadBytes+proc.DefaultTailBytes {
				t.Errorf("streamed %d bytes; want at least head + tail = %d", received, proc.DefaultHeadBytes+proc.DefaultTailBytes)
			}
		})
	}
}

// TestReadSinceFallenBehind reads a large output only after it was all
// written, while the process still runs, then after it is final.
func TestReadSinceFallenBehind(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	const (
		size = 10 << 20
		head = proc.DefaultHeadBytes
		tail = proc.DefaultTailBytes
	)
	p := startStdin(t, m, helperReq("interactive-pattern", strconv.Itoa(size), strconv.Itoa(64<<10), "0", "wait"))
	waitLen(ctx, t, p, size)

	type read struct {
		cursor    int64
		max       int
		dataOff   int64 // where Data starts
		dataLen   int
		lost, end int64
	}
	// kept is what cursor reads see after the head: while the record
	// runs, the 1 MiB window kept for WaitOutput's callers (waitLen's),
	// then the tail alone (design section 20).
	reads := func(kept int64) []read {
		return []read{
			{cursor: 0, max: 0, dataOff: 0, dataLen: head, end: size},
			{cursor: -5, max: 10, dataOff: 0, dataLen: 10, end: size},
			{cursor: 100, max: 10, dataOff: 100, dataLen: 10, end: size},
			{cursor: head - 5, max: 10, dataOff: head - 5, dataLen: 5, end: size}, // stops at the head
			{cursor: head, max: 0, dataOff: size - kept, dataLen: int(kept), lost: size - kept - head, end: size},
			{cursor: 20000, max: 100, dataOff: size - kept, dataLen: 100, lost: size - kept - 20000, end: size},
			{cursor: size - 10, max: 100, dataOff: size - 10, dataLen: 10, end: size},
			{cursor: size, max: 0, dataOff: size, dataLen: 0, end: size},
		}
	}
	check := func(final bool) {
		t.Helper()
		kept := int64(1 << 20)
		if final {
			kept = tail
		}
		for _, r := range reads(kept) {
			c := p.ReadSince(r.cursor, r.max)
			next := r.dataOff + int64(r.dataLen)
			if len(c.Data) != r.dataLen || c.Lost != r.lost || c.Next != next || c.End != r.end || c.EOF != (final && next == size) {
				t.Errorf("ReadSince(%d, %d) = %d bytes, lost %d, next %d, end %d, eof %v; want %d, %d, %d, %d, %v",
					r.cursor, r.max, len(c.Data), c.Lost, c.Next, c.End, c.EOF,
					r.dataLen, r.lost, next, r.end, final && next == size)
				continue
			}
			iaCheckPattern(t, fmt.Sprintf("ReadSince(%d, %d)", r.cursor, r.max), r.dataOff, c.Data)
		}
		// A cursor past the end reads nothing and stays where it is.
		c := p.ReadSince(size+5, 0)
		if len(c.Data) != 0 || c.Lost != 0 || c.Next != size+5 || c.End != size || c.EOF != final {
			t.Errorf("ReadSince(end+5, 0) = %d bytes, lost %d, next %d, end %d, eof %v; want 0, 0, %d, %d, %v",
				len(c.Data), c.Lost, c.Next, c.End, c.EOF, size+5, size, final)
		}
	}
	check(false)

	expired, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.WaitOutput(expired, size); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitOutput(cancelled, end) while running = %v; want context.Canceled", err)
	}
	if err := p.WaitOutput(expired, size-1); err != nil {
		t.Errorf("WaitOutput(cancelled, end-1) = %v; want nil (a byte is there)", err)
	}

	if err := p.CloseStdin(); err != nil {
		t.Fatalf("CloseStdin() = %v", err)
	}
	if err := p.WaitOutput(ctx, size); err != nil {
		t.Fatalf("WaitOutput(end) = %v; want nil once final", err)
	}
	if p.Info().Running {
		t.Fatalf("WaitOutput(end) returned with Info().Running true and no new bytes")
	}
	check(true)

	out := p.Output()
	wantText := string(iaPattern(0, head)) + iaMarker(size-head-tail) + string(iaPattern(size-tail, tail))
	if out.Text != wantText {
		t.Errorf("Output().Text (%d bytes) is not head + marker + tail (%d bytes)", len(out.Text), len(wantText))
	}
	if tr := out.Truncation; tr == nil || tr.OriginalBytes != size || tr.RetainedBytes != head+tail || tr.OmittedBytes != size-head-tail {
		t.Errorf("Output().Truncation = %+v; want original %d, retained %d, omitted %d", tr, size, head+tail, size-head-tail)
	}
}

// TestReadSinceSpansHeadAndTail pins that one read spans head and tail when
// nothing between them was dropped.
func TestReadSinceSpansHeadAndTail(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	const size = 20000
	p := mustStart(t, m, helperReq("interactive-pattern", strconv.Itoa(size), "4096", "0"))
	waitFinal(ctx, t, p)
	c := p.ReadSince(0, 0)
	if len(c.Data) != size || c.Lost != 0 || c.Next != size || !c.EOF {
		t.Fatalf("ReadSince(0, 0) = %d bytes, lost %d, next %d, eof %v; want %d, 0, %d, true", len(c.Data), c.Lost, c.Next, c.EOF, size, size)
	}
	iaCheckPattern(t, "ReadSince(0, 0)", 0, c.Data)
	c = p.ReadSince(16000, 1000)
	if len(c.Data) != 1000 || c.Lost != 0 || c.Next != 17000 || c.EOF {
		t.Fatalf("ReadSince(16000, 1000) = %d bytes, lost %d, next %d, eof %v; want 1000, 0, 17000, false", len(c.Data), c.Lost, c.Next, c.EOF)
	}
	iaCheckPattern(t, "ReadSince(16000, 1000)", 16000, c.Data)
}

// TestReadSinceKeepsUp pins that a poller that keeps up with a process
// receives everything, however much more than head and tail it writes.
func TestReadSinceKeepsUp(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	const (
		lines = 200
		line  = 1024
	)
	p := startStdin(t, m, helperReq("interactive-cat"))

	var got []byte
	cursor := int64(0)
	for i := range lines {
		off := int64(i * line)
		if n, err := p.Write(iaPattern(off, line)); n != line || err != nil {
			t.Fatalf("Write(line %d) = %d, %v", i, n, err)
		}
		for cursor < off+line {
			if err := p.WaitOutput(ctx, cursor); err != nil {
				t.Fatalf("WaitOutput(%d) = %v", cursor, err)
			}
			c := p.ReadSince(cursor, 0)
			if c.Lost != 0 {
				t.Fatalf("ReadSince(%d) lost %d bytes of a reader that keeps up", cursor, c.Lost)
			}
			got = append(got, c.Data...)
			cursor = c.Next
		}
	}
	if err := p.CloseStdin(); err != nil {
		t.Fatalf("CloseStdin() = %v", err)
	}
	snap := waitFinal(ctx, t, p)
	if c := p.ReadSince(cursor, 0); len(c.Data) != 0 || !c.EOF {
		t.Errorf("ReadSince(%d) after final = %d bytes, eof %v; want 0, true", cursor, len(c.Data), c.EOF)
	}
	if len(got) != lines*line {
		t.Fatalf("received %d bytes; want %d", len(got), lines*line)
	}
	iaCheckPattern(t, "received", 0, got)
	if tr := snap.Output.Truncation; tr == nil || tr.OmittedBytes != lines*line-proc.DefaultHeadBytes-proc.DefaultTailBytes {
		t.Errorf("Output().Truncation = %+v; want %d bytes omitted from the rendering", tr, lines*line-proc.DefaultHeadBytes-proc.DefaultTailBytes)
	}
}

// TestWaitOutput pins the wake-ups of WaitOutput: new bytes, finality and
// the end of its context.
func TestWaitOutput(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	p := startStdin(t, m, helperReq("interactive-cat"))

	short, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	if err := p.WaitOutput(short, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitOutput(1ms, 0) with no output = %v; want context.DeadlineExceeded", err)
	} else if in := mgrSentinelsIn(err); len(in) != 0 {
		t.Errorf("WaitOutput(1ms, 0) error %v wraps %v; want only ctx.Err()", err, in)
	}

	// New bytes.
	woke := make(chan error, 1)
	go func() { woke <- p.WaitOutput(ctx, 0) }()
	select {
	case err := <-woke:
		t.Fatalf("WaitOutput(0) returned %v before any output", err)
	default:
	}
	if _, err := p.Write([]byte("x\n")); err != nil {
		t.Fatalf("Write() = %v", err)
	}
	if err := recv(ctx, t, woke, "WaitOutput on new bytes"); err != nil {
		t.Fatalf("WaitOutput(0) = %v; want nil after output", err)
	}
	waitLen(ctx, t, p, 2)
	if c := p.ReadSince(0, 0); string(c.Data) != "x\n" || c.Next != 2 || c.EOF {
		t.Fatalf("ReadSince(0, 0) = %q next %d eof %v; want %q next 2 eof false", c.Data, c.Next, c.EOF, "x\n")
	}

	// The context ends.
	cctx, ccancel := context.WithCancel(ctx)
	go func() { woke <- p.WaitOutput(cctx, 2) }()
	ccancel()
	if err := recv(ctx, t, woke, "WaitOutput on cancel"); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitOutput(cancelled, 2) = %v; want context.Canceled", err)
	}

	// Finality.
	go func() { woke <- p.WaitOutput(ctx, 2) }()
	if err := p.CloseStdin(); err != nil {
		t.Fatalf("CloseStdin() = %v", err)
	}
	if err := recv(ctx, t, woke, "WaitOutput on finality"); err != nil {
		t.Fatalf("WaitOutput(2) = %v; want nil once final", err)
	}
	if p.Info().Running {
		t.Errorf("WaitOutput(2) returned nil without new bytes while Info().Running is true")
	}
	if c := p.ReadSince(2, 0); len(c.Data) != 0 || !c.EOF {
		t.Errorf("ReadSince(2, 0) after final = %q eof %v; want empty, EOF", c.Data, c.EOF)
	}
}

// TestWaitOutputFinalBeforeContext pins that a final process answers
// WaitOutput with nil whatever its context, as Wait does: the condition is
// checked before the context. (Repeated: a select between the two picks
// the context half of the time.)
func TestWaitOutputFinalBeforeContext(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	p := mustStart(t, m, cvReq(`out:a\n`, `err:b\n`, `out:c\n`))
	waitFinal(ctx, t, p)
	expired, cancel := context.WithCancel(ctx)
	cancel()
	for i := range 20 {
		if err := p.WaitOutput(expired, 6); err != nil {
			t.Fatalf("WaitOutput(cancelled ctx, end) of a final process, try %d = %v; want nil", i, err)
		}
	}
	if err := p.Wait(expired); err != nil {
		t.Fatalf("Wait(cancelled ctx) of a final process = %v; want nil", err)
	}
}
