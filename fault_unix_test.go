//go:build unix

package proc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/procvisor/proc"
)

// Fault injection (reliability): children that misbehave — close their
// output early, die from outside, ignore SIGTERM, flood at exit, write
// bytes that are not text — and starts that fail late or race with Close.

// fault-close-stdout writes "before\n" on stdout, closes its stdout
// and stderr (only stdout with the argument "keep-stderr"), confirms
// on descriptor 3 with "closed\n", then reads stdin until end-of-file,
// writes "stderr-after\n" on stderr if it kept it, and exits 3.
var _ = helper("fault-close-stdout", faultCloseStdout)

func faultCloseStdout(args []string) int {
	keepStderr := args[0] == "keep-stderr"
	if _, err := os.Stdout.WriteString("before\n"); err != nil {
		return 10
	}
	if err := syscall.Close(1); err != nil {
		return 11
	}
	if !keepStderr {
		if err := syscall.Close(2); err != nil {
			return 12
		}
	}
	ack := os.NewFile(3, "ack")
	if _, err := ack.WriteString("closed\n"); err != nil {
		return 13
	}
	_ = ack.Close()
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		return 14
	}
	if keepStderr {
		if _, err := os.Stderr.WriteString("stderr-after\n"); err != nil {
			return 15
		}
	}
	return 3
}

// fault-flood writes the first args[0] bytes of faultFloodBytes to
// stdout as fast as it can and exits at once.
var _ = helper("fault-flood", faultFlood)

func faultFlood(args []string) int {
	n, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || n%faultFloodLine != 0 {
		fmt.Fprintln(os.Stderr, "fault-flood: want a multiple of", faultFloodLine, "got", args)
		return 2
	}
	// Line k is k in nine decimal digits and a newline; the digits are
	// counted up in place (fmt per line is slow under -race).
	line := []byte("000000000\n")
	chunk := make([]byte, 0, (1<<20)/faultFloodLine*faultFloodLine)
	for k := int64(0); k < n/faultFloodLine; k++ {
		chunk = append(chunk, line...)
		for i := faultFloodLine - 2; i >= 0; i-- {
			if line[i] < '9' {
				line[i]++
				break
			}
			line[i] = '0'
		}
		if len(chunk) == cap(chunk) {
			if _, err := os.Stdout.Write(chunk); err != nil {
				return 3
			}
			chunk = chunk[:0]
		}
	}
	if _, err := os.Stdout.Write(chunk); err != nil {
		return 3
	}
	return 0 // at once: the last bytes are still in the pipe
}

// fault-bytes writes faultJunk(args[0], args[1]) to stdout and exits.
var _ = helper("fault-bytes", faultBytes)

func faultBytes(args []string) int {
	seed, err1 := strconv.ParseUint(args[0], 10, 64)
	n, err2 := strconv.Atoi(args[1])
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "fault-bytes: bad arguments", args)
		return 2
	}
	if _, err := os.Stdout.Write(faultJunk(seed, n)); err != nil {
		return 3
	}
	return 0
}

// faultFloodLine is the length of each line of the flood: "%09d\n".
const faultFloodLine = 10

// faultFloodBytes returns bytes [off, off+n) of the flood stream, line k
// being "%09d\n" of k.
func faultFloodBytes(off, n int64) []byte {
	out := make([]byte, 0, n+faultFloodLine)
	for k := off / faultFloodLine; int64(len(out)) < n+off%faultFloodLine; k++ {
		out = fmt.Appendf(out, "%09d\n", k)
	}
	return out[off%faultFloodLine:][:n]
}

// faultJunk returns n >= 258 bytes that are not text: every byte value
// once (NUL, invalid UTF-8 leads and continuations, controls), then
// pseudo-random bytes from seed, ending inside a character (a valid prefix
// of "€" whose last byte never comes).
func faultJunk(seed uint64, n int) []byte {
	b := make([]byte, 0, n)
	for i := range 256 {
		b = append(b, byte(i))
	}
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for len(b) < n-2 {
		b = append(b, byte(r.Uint32()))
	}
	return append(b, "\xe2\x82"...)[:n]
}

// faultReadAll reads p's Output stream with cursor reads of at most max
// bytes from 0 to EOF, and returns the bytes, the bytes reported lost and
// the last cursor. It fails t if EOF takes more than reads reads.
func faultReadAll(t *testing.T, p *proc.Process, max, reads int) (data []byte, lost, next int64) {
	t.Helper()
	for range reads {
		c := p.ReadSince(next, max)
		data = append(data, c.Data...)
		lost += c.Lost
		next = c.Next
		if c.EOF {
			return data, lost, next
		}
	}
	t.Fatalf("ReadSince loop: no EOF after %d reads (cursor %d)", reads, next)
	return nil, 0, 0
}

// TestFaultStdoutClosedEarly pins that the end of the output pipes is not
// the end of the process: a child that closes its stdout (and stderr) and
// lives on stays Running, its output unfinished, until it exits; then the
// record is final with the output written before the close.
func TestFaultStdoutClosedEarly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, arg  string
		separate   bool
		wantOutput string
		wantStderr string
	}{
		{name: "combined", arg: "close-both", wantOutput: "before\n"},
		{name: "separate-stderr", arg: "keep-stderr", separate: true, wantOutput: "before\n", wantStderr: "stderr-after\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			// The child confirms on an extra pipe (its descriptor 3) that
			// it has closed its output: nothing else could tell us.
			ackR, ackW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ackR.Close() })
			m := newManager(t, proc.Options{CommandContext: withExtraFiles(ackW)})
			req := helperReq("fault-close-stdout", tc.arg)
			req.SeparateStderr, req.Stdin = tc.separate, true
			p := mustStart(t, m, req)
			_ = ackW.Close() // the child holds its own copy

			if ack := readPipe(ctx, t, ackR, len("closed\n")); ack != "closed\n" {
				t.Fatalf("child confirmation = %q; want %q", ack, "closed\n")
			}
			// The ack proves the child wrote its output, not that the
			// pump has stored it: wait for that first.
			if err := p.WaitOutput(ctx, int64(len(tc.wantOutput))-1); err != nil {
				t.Fatalf("WaitOutput(%q) = %v", tc.wantOutput, err)
			}
			// The stdout pump sees end-of-file now. Give it a window to
			// (wrongly) end the record: WaitOutput past the end must block
			// for as long as the child lives.
			wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			err = p.WaitOutput(wctx, int64(len(tc.wantOutput)))
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("WaitOutput(past the end) while the child lives without stdout = %v; want context.DeadlineExceeded", err)
			}
			lcCheckRunning(t, p.Info())
			if c := p.ReadSince(0, 0); string(c.Data) != tc.wantOutput || c.EOF {
				t.Errorf("ReadSince(0) while running = %q, EOF %v; want %q, EOF false", c.Data, c.EOF, tc.wantOutput)
			}
			if isDone(p) {
				t.Errorf("Done() closed while the child lives")
			}
			// The child still reads its stdin: it is alive and supervised.
			if n, err := p.WriteContext(ctx, []byte("payload\n")); err != nil || n != len("payload\n") {
				t.Errorf("WriteContext after stdout closed = %d, %v; want %d, nil", n, err, len("payload\n"))
			}
			if err := p.CloseStdin(); err != nil {
				t.Errorf("CloseStdin() = %v; want nil", err)
			}
			snap := waitFinal(ctx, t, p)
			if code := exitCode(t, snap.Info); code != 3 || snap.Info.Signal != "" {
				t.Errorf("exit = %d %q; want 3 and no signal", code, snap.Info.Signal)
			}
			if snap.Output.Text != tc.wantOutput || snap.Stderr.Text != tc.wantStderr {
				t.Errorf("final Output = %q, Stderr = %q; want %q, %q", snap.Output.Text, snap.Stderr.Text, tc.wantOutput, tc.wantStderr)
			}
			if want := int64(len(tc.wantOutput) + len(tc.wantStderr)); snap.Info.OutputBytes != want {
				t.Errorf("OutputBytes = %d; want %d", snap.Info.OutputBytes, want)
			}
		})
	}
}

// TestFaultKilledFromOutside pins that a child killed by SIGKILL from
// outside the library (not through Signal) is reported as such: exit code
// 137, signal "SIGKILL", not timed out; and that its group, now empty,
// refuses further signals with ErrNotRunning.
func TestFaultKilledFromOutside(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	p := mustStart(t, m, proc.StartRequest{Command: "echo ready; exec sleep 30"})
	waitText(ctx, t, p, "ready\n")
	pid := p.Info().PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill(%d, SIGKILL) = %v", pid, err)
	}
	snap := waitFinal(ctx, t, p)
	if code := exitCode(t, snap.Info); code != 137 || snap.Info.Signal != "SIGKILL" || snap.Info.TimedOut {
		t.Errorf("exit after an outside SIGKILL = %d, signal %q, timed out %v; want 137, SIGKILL, false",
			code, snap.Info.Signal, snap.Info.TimedOut)
	}
	if snap.Output.Text != "ready\n" {
		t.Errorf("Output = %q; want %q", snap.Output.Text, "ready\n")
	}
	lcCheckFinal(t, snap.Info)
	if err := p.Signal(proc.Terminate); !errors.Is(err, proc.ErrNotRunning) {
		t.Errorf("Signal(Terminate) after the group died = %v; want ErrNotRunning", err)
	}
}

// TestFaultCloseIgnoresTerm pins Close against a child (and its background
// child) that ignore SIGTERM: Close waits KillGrace after terminating, then
// kills the group, and returns with the child reaped and the background
// child dead or in its exit — with a mock clock exactly at the grace, and
// with the real clock within KillGrace + DrainTimeout plus headroom.
func TestFaultCloseIgnoresTerm(t *testing.T) {
	t.Parallel()
	const (
		killGrace    = 300 * time.Millisecond
		drainTimeout = 500 * time.Millisecond
		// The shell and its background sleep ignore SIGTERM (an ignored
		// signal stays ignored across fork and exec). The sleep holds the
		// output pipe, so the record is final only once it has closed its
		// files: then it is in its exit (PF_EXITING) at least.
		command = `trap '' TERM; sleep 30 & echo "background $!"; wait`
	)
	start := func(ctx context.Context, t *testing.T, m *proc.Manager) (p *proc.Process, group, bgPID int) {
		t.Helper()
		p = mustStart(t, m, proc.StartRequest{Command: command})
		text := waitOutput(ctx, t, p, "the background PID", func(s string) bool { return len(lcParsePIDs(t, s)) == 1 })
		return p, p.Info().PID, lcParsePIDs(t, text)[0]
	}
	checkDead := func(t *testing.T, p *proc.Process, group, bgPID int) {
		t.Helper()
		if !isDone(p) {
			t.Fatalf("record not final after Close returned")
		}
		info := p.Info()
		if code := exitCode(t, info); code != 137 || info.Signal != "SIGKILL" {
			t.Errorf("exit of a TERM-ignoring child stopped by Close = %d %q; want 137 SIGKILL", code, info.Signal)
		}
		for _, k := range liveMembers(t, group) {
			if k.pid != bgPID || k.flags&pfExiting == 0 {
				t.Errorf("after Close, a member of the child's group (background child %d) is alive: %v; want the child reaped and the background child dead or exiting", bgPID, k)
			}
		}
	}

	t.Run("mock-clock", func(t *testing.T) {
		t.Parallel()
		needProcFS(t)
		ctx, mClock, m := testMockManager(t, proc.Options{KillGrace: killGrace, DrainTimeout: drainTimeout})
		p, group, bgPID := start(ctx, t, m)

		trap := mClock.Trap().NewTimer("manager", "kill-grace")
		defer trap.Close()
		closed := goClose(m)
		releaseTrapped(ctx, t, trap, killGrace, "Close kill-grace timer")
		// SIGTERM was sent before the grace timer was made, and ignored:
		// everything still runs, and Close waits.
		if live := liveMembers(t, group); len(live) != 2 {
			t.Errorf("during the grace, live members of the group = %v; want the shell and its background sleep %d", live, bgPID)
		}
		if info := p.Info(); !info.Running {
			t.Errorf("Info().Running during the grace = false; want true (SIGTERM is ignored)")
		}
		select {
		case err := <-closed:
			t.Fatalf("Close() = %v before the kill grace passed; want it to wait", err)
		default:
		}
		mClock.Advance(killGrace).MustWait(ctx)
		if err := recv(ctx, t, closed, "Close after the kill grace"); err != nil {
			t.Errorf("Close() = %v; want nil", err)
		}
		checkDead(t, p, group, bgPID)
	})

	t.Run("real-clock", func(t *testing.T) {
		t.Parallel()
		needProcFS(t)
		ctx, m := testManager(t, proc.Options{KillGrace: killGrace, DrainTimeout: drainTimeout})
		p, group, bgPID := start(ctx, t, m)
		begin := time.Now()
		if err := m.Close(); err != nil {
			t.Errorf("Close() = %v; want nil", err)
		}
		elapsed := time.Since(begin)
		// Headroom for two shared cores under -race.
		if limit := killGrace + drainTimeout + 3*time.Second; elapsed < killGrace || elapsed > limit {
			t.Errorf("Close() took %v; want at least KillGrace %v (SIGTERM is ignored) and at most %v", elapsed, killGrace, limit)
		}
		checkDead(t, p, group, bgPID)
	})
}

// TestFaultFloodAtExit pins that 50 MiB written just before the child
// exits are all counted and the retained head and tail are exactly the
// first and last bytes written: the bytes still in the pipe at the exit
// are drained, none is lost to the end of the process.
func TestFaultFloodAtExit(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, time.Minute)
	const total = 50 << 20 // a multiple of faultFloodLine
	m := newManager(t, proc.Options{})
	p := mustStart(t, m, helperReq("fault-flood", strconv.Itoa(total)))
	snap := waitFinal(ctx, t, p)
	if code := exitCode(t, snap.Info); code != 0 {
		t.Fatalf("flood exit = %d; want 0; output tail %q", code, snap.Output.Text[max(0, len(snap.Output.Text)-200):])
	}
	if snap.Info.OutputBytes != total {
		t.Errorf("OutputBytes = %d; want %d", snap.Info.OutputBytes, total)
	}
	head, tail := int64(proc.DefaultHeadBytes), int64(proc.DefaultTailBytes)
	wantTrunc := proc.Truncation{OriginalBytes: total, RetainedBytes: head + tail, OmittedBytes: total - head - tail, Strategy: "head_tail"}
	if tr := snap.Output.Truncation; tr == nil || *tr != wantTrunc {
		t.Errorf("Truncation = %+v; want %+v", tr, wantTrunc)
	}
	wantHead, wantTail := faultFloodBytes(0, head), faultFloodBytes(total-tail, tail)
	want := string(wantHead) + fmt.Sprintf("\n... [omitted %d bytes] ...\n", total-head-tail) + string(wantTail)
	if snap.Output.Text != want {
		t.Errorf("Output().Text: got %d bytes ending %q; want %d bytes ending %q",
			len(snap.Output.Text), snap.Output.Text[max(0, len(snap.Output.Text)-40):], len(want), want[len(want)-40:])
	}
	// The cursor stream: the head, the omitted middle as Lost, the tail.
	data, lost, cursor := faultReadAll(t, p, 0, 10)
	if lost != total-head-tail || cursor != total || !bytes.Equal(data, append(wantHead, wantTail...)) {
		t.Errorf("ReadSince from 0 to EOF: %d bytes, lost %d, next %d; want head+tail %d bytes exact, lost %d, next %d (bytes equal: %v)",
			len(data), lost, cursor, head+tail, total-head-tail, total, bytes.Equal(data, append(wantHead, wantTail...)))
	}
}

// TestFaultBinaryOutput pins that output which is not text — NUL bytes,
// every byte value, invalid UTF-8, a character cut off at the end — passes
// through the cursor reads byte-exact and is counted exactly, and that
// rendering it (and encoding the snapshot as JSON) does not fail.
func TestFaultBinaryOutput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		n           int
		opts        proc.Options
		wantRetains int // head + tail when bytes are omitted; 0: all
	}{
		// Long line limit: the rendering is the bytes as they are.
		{name: "retained", n: 4096, opts: proc.Options{MaxLineLength: 1 << 20}},
		// Small head, tail and lines: the seams and the line cuts fall
		// inside junk.
		{name: "truncated", n: 10000, opts: proc.Options{HeadBytes: 100, TailBytes: 101, MaxLineLength: 16}, wantRetains: 201},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			const seed = 20240611
			junk := faultJunk(seed, tc.n)
			m := newManager(t, tc.opts)
			p := mustStart(t, m, helperReq("fault-bytes", strconv.Itoa(seed), strconv.Itoa(tc.n)))
			snap := waitFinal(ctx, t, p)
			if code := exitCode(t, snap.Info); code != 0 {
				t.Fatalf("fault-bytes exit = %d; want 0", code)
			}
			if snap.Info.OutputBytes != int64(tc.n) {
				t.Errorf("OutputBytes = %d; want %d", snap.Info.OutputBytes, tc.n)
			}
			wantData := junk
			wantLost := int64(0)
			if tc.wantRetains > 0 {
				head := tc.opts.HeadBytes
				tail := tc.wantRetains - head
				wantData = append(append([]byte(nil), junk[:head]...), junk[tc.n-tail:]...)
				wantLost = int64(tc.n - tc.wantRetains)
			}
			// Small reads: chunk edges inside characters.
			data, lost, cursor := faultReadAll(t, p, 7, tc.n)
			if !bytes.Equal(data, wantData) || lost != wantLost || cursor != int64(tc.n) {
				t.Errorf("ReadSince from 0 to EOF = %d bytes (equal: %v), lost %d, next %d; want %d bytes, lost %d, next %d",
					len(data), bytes.Equal(data, wantData), lost, cursor, len(wantData), wantLost, tc.n)
			}
			out := p.Output()
			if tc.wantRetains == 0 {
				if out.Text != string(junk) || out.Truncation != nil {
					t.Errorf("Output() = %d bytes (equal: %v), truncation %+v; want the %d bytes as written, no truncation",
						len(out.Text), out.Text == string(junk), out.Truncation, tc.n)
				}
			} else {
				tr := out.Truncation
				if tr == nil || tr.OriginalBytes != int64(tc.n) || tr.RetainedBytes != int64(tc.wantRetains) ||
					tr.OmittedBytes != wantLost || tr.Strategy != "head_tail" || tr.LinesCut == 0 {
					t.Errorf("Truncation = %+v; want original %d, retained %d, omitted %d, lines cut, head_tail",
						tr, tc.n, tc.wantRetains, wantLost)
				}
				if marker := fmt.Sprintf("\n... [omitted %d bytes] ...\n", wantLost); !strings.Contains(out.Text, marker) {
					t.Errorf("Output() = %q; want it to hold the marker %q", out.Text, marker)
				}
			}
			if _, err := json.Marshal(p.Snapshot()); err != nil {
				t.Errorf("json.Marshal(Snapshot()) = %v; want the snapshot encoded", err)
			}
		})
	}
}

// faultIsolated returns, in the isolated run of t (see isolated), a
// Manager on opts that is closed when the test ends, already warmed up (the
// runtime opens descriptors of its own once: the network poller, with the
// first pipe), and noLeaks' check from then on. In the other run it returns
// a nil Manager: the test returns at once.
func faultIsolated(t *testing.T, opts proc.Options) (context.Context, *proc.Manager, func(string)) {
	t.Helper()
	needProcFS(t)
	ctx := testCtx(t, time.Minute)
	if !isolated(ctx, t) {
		return ctx, nil, nil
	}
	m := proc.NewManager(opts)
	t.Cleanup(func() { _ = m.Close() })
	waitFinal(ctx, t, mustStart(t, m, proc.StartRequest{Args: []string{"true"}, Stdin: true}))
	// The warm-up's cgroup is readied for reuse in the background (its
	// files read after Done): not a descriptor of the starts counted.
	backgroundIdle(m)
	return ctx, m, noLeaks(t)
}

// TestFaultNotFound pins that a program that does not exist is refused with
// the OS error (exec.ErrNotFound, none of our sentinels), and leaves no
// record, no reserved ID, no descriptor (pipes, terminal) and no
// goroutine. It runs isolated, so that the descriptor and goroutine counts
// are its own.
func TestFaultNotFound(t *testing.T) {
	t.Parallel()
	ctx, m, checkLeaks := faultIsolated(t, proc.Options{})
	if m == nil {
		return
	}

	const prog = "proc-fault-no-such-program"
	for i, req := range []proc.StartRequest{
		{ID: "nf", Args: []string{prog}},
		{ID: "nf", Args: []string{prog, "arg"}, Stdin: true, SeparateStderr: true},
		{ID: "nf", Args: []string{prog}, TTY: true},
	} {
		p, err := m.Start(req)
		if p != nil || !errors.Is(err, exec.ErrNotFound) {
			t.Errorf("#%d: Start(%q) = %v, %v; want nil, an error wrapping exec.ErrNotFound", i, req.Args, p, err)
		}
		if in := mgrSentinelsIn(err); len(in) != 0 {
			t.Errorf("#%d: Start(%q) = %v; wraps our sentinels %v, want none", i, req.Args, err, in)
		}
		if _, err := m.Get("nf"); !errors.Is(err, proc.ErrNotFound) {
			t.Errorf("#%d: Get(nf) after a refused start = %v; want ErrNotFound", i, err)
		}
		if infos := m.List(); len(infos) != 1 {
			t.Errorf("#%d: List() after a refused start = %d records; want only the warm-up", i, len(infos))
		}
	}
	checkLeaks("after refused starts")
	// The ID was never taken.
	p := mustStart(t, m, proc.StartRequest{ID: "nf", Args: []string{"true"}})
	if code := exitCode(t, waitFinal(ctx, t, p).Info); code != 0 {
		t.Errorf("Start(nf, true) after refused starts: exit %d; want 0", code)
	}
}

// TestFaultWorkDirRemoved pins a start that the OS refuses after
// validation: the work dir exists when the request is validated but is
// removed before the child starts (by the CommandContext hook, which runs
// after validation). The error is the OS error (not ErrInvalid: the request
// was valid), and nothing is left: no record, descriptor or goroutine. It
// runs isolated, so that the counts are its own.
func TestFaultWorkDirRemoved(t *testing.T) {
	t.Parallel()
	var remove atomic.Pointer[string]
	_, m, checkLeaks := faultIsolated(t, proc.Options{
		CommandContext: func(ctx context.Context, name string, args ...string) *exec.Cmd {
			if dir := remove.Load(); dir != nil {
				if err := os.Remove(*dir); err != nil {
					t.Errorf("remove work dir in the CommandContext hook: %v", err)
				}
			}
			return exec.CommandContext(ctx, name, args...)
		},
	})
	if m == nil {
		return
	}
	base := t.TempDir()
	for i, req := range []proc.StartRequest{
		{Args: []string{"true"}},
		{Command: "true", Stdin: true, SeparateStderr: true},
		{Args: []string{"true"}, TTY: true},
	} {
		dir := filepath.Join(base, fmt.Sprintf("wd%d", i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		remove.Store(&dir)
		req.ID = "wd"
		req.WorkDir = dir
		p, err := m.Start(req)
		remove.Store(nil)
		if p != nil || !errors.Is(err, os.ErrNotExist) {
			t.Errorf("#%d: Start with a work dir removed before the start = %v, %v; want nil, an error wrapping os.ErrNotExist", i, p, err)
		}
		if in := mgrSentinelsIn(err); len(in) != 0 {
			t.Errorf("#%d: Start with a work dir removed before the start = %v; wraps our sentinels %v, want none (an OS refusal)", i, err, in)
		}
		if _, err := m.Get("wd"); !errors.Is(err, proc.ErrNotFound) {
			t.Errorf("#%d: Get(wd) after the refused start = %v; want ErrNotFound", i, err)
		}
	}
	if infos := m.List(); len(infos) != 1 {
		t.Errorf("List() after refused starts = %d records; want only the warm-up", len(infos))
	}
	checkLeaks("after refused starts")
}

// TestFaultCloseRacesStart pins Close against starts from many goroutines:
// every Start either returns a process that is final once Close has
// returned, or ErrClosed (nothing else); after Close no process that any
// start launched — returned or not — is alive.
func TestFaultCloseRacesStart(t *testing.T) {
	t.Parallel()
	needProcFS(t)
	ctx := testCtx(t, time.Minute)
	const (
		starters     = 64
		closeAfter   = 128 // successful starts before Close begins
		maxPerWorker = 1000
	)
	// A marker in argv finds every process launched here, also one that
	// a start launched but did not return: "sleep 10.000<nonce>".
	marker := fmt.Sprintf("10.000%09d", rand.Uint32N(1e9))
	m := proc.NewManager(proc.Options{KillGrace: 200 * time.Millisecond})
	t.Cleanup(func() { _ = m.Close() })

	var (
		mu        sync.Mutex
		procs     []*proc.Process
		started   atomic.Int64
		refused   atomic.Int64
		closeNow  = make(chan struct{})
		closeOnce sync.Once
		wg        sync.WaitGroup
	)
	for w := range starters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range maxPerWorker {
				p, err := m.Start(proc.StartRequest{ID: fmt.Sprintf("race-%d-%d", w, i), Args: []string{"sleep", marker}})
				if err != nil {
					if !errors.Is(err, proc.ErrClosed) {
						t.Errorf("Start racing Close = %v; want a process or ErrClosed", err)
					}
					refused.Add(1)
					return
				}
				mu.Lock()
				procs = append(procs, p)
				mu.Unlock()
				if started.Add(1) == closeAfter {
					closeOnce.Do(func() { close(closeNow) })
				}
			}
			t.Errorf("starter %d: %d starts and no ErrClosed", w, maxPerWorker)
		}()
	}
	select {
	case <-closeNow:
	case <-ctx.Done():
		// Still close and join the starters below.
		t.Errorf("%d starts before the deadline; want %d: %v", started.Load(), closeAfter, ctx.Err())
	}
	if err := m.Close(); err != nil {
		t.Errorf("Close() = %v; want nil", err)
	}
	// Every process returned so far was stopped by this Close.
	mu.Lock()
	returned := append([]*proc.Process(nil), procs...)
	mu.Unlock()
	for _, p := range returned {
		if !isDone(p) {
			t.Errorf("process %s (pid %d) not final after Close returned", p.ID(), p.Info().PID)
		}
	}
	wg.Wait()
	var groups []int
	for _, p := range procs {
		if !isDone(p) {
			t.Errorf("process %s (pid %d) returned by a start that raced Close is not final", p.ID(), p.Info().PID)
		}
		groups = append(groups, p.Info().PID)
	}
	if live := liveMembers(t, groups...); len(live) != 0 {
		t.Errorf("after Close, live members of the started groups: %v; want none", live)
	}
	// Also processes that a start launched without returning them.
	for _, k := range tasksWith(t, marker) {
		if !k.dead() {
			t.Errorf("after Close, a process launched by a racing start is alive: %v", k)
		}
	}
	if got := refused.Load(); got != starters {
		t.Errorf("%d starts refused with ErrClosed; want one per starter, %d", got, starters)
	}
	t.Logf("Close raced %d starters: %d starts returned a process (all final), %d returned ErrClosed", starters, started.Load(), refused.Load())
}

// TestFaultCloseEscapedFlood pins the bound of Close against output that
// never pauses: a background child that left the process group (setsid)
// keeps writing into the pipe, so neither end-of-file nor a quiet window
// ends the drain. Close must still return within KillGrace + DrainTimeout
// (plus headroom), with the record final and its output fixed.
func TestFaultCloseEscapedFlood(t *testing.T) {
	t.Parallel()
	needProcFS(t)
	needTool(t, "setsid")
	ctx := testCtx(t)
	const (
		killGrace    = 200 * time.Millisecond
		drainTimeout = 500 * time.Millisecond
	)
	m := newManager(t, proc.Options{KillGrace: killGrace, DrainTimeout: drainTimeout})
	// The flooder is out of the group's reach; it dies of SIGPIPE once
	// the record is final and the pipe's read end is closed. Its $0 is a
	// marker, so that cleanup finds it in any case. "ready" comes first,
	// so that it is in the head, never in the omitted middle.
	marker := fmt.Sprintf("proc-fault-flooder-%d", rand.Uint64())
	t.Cleanup(func() {
		for _, k := range tasksWith(t, marker) {
			_ = syscall.Kill(k.pid, syscall.SIGKILL)
		}
	})
	p := mustStart(t, m, proc.StartRequest{
		Command: fmt.Sprintf(`echo ready; setsid sh -c 'while :; do echo spam; done' %s & exec sleep 30`, marker),
	})
	waitText(ctx, t, p, "ready\n")
	if err := p.WaitOutput(ctx, int64(len("ready\n")+len("spam\n"))); err != nil {
		t.Fatalf("WaitOutput(flood) = %v", err)
	}

	begin := time.Now()
	if err := m.Close(); err != nil {
		t.Errorf("Close() = %v; want nil", err)
	}
	elapsed := time.Since(begin)
	if limit := killGrace + drainTimeout + 3*time.Second; elapsed > limit {
		t.Errorf("Close() against an endless writer took %v; want at most KillGrace + DrainTimeout + headroom = %v", elapsed, limit)
	}
	if !isDone(p) {
		t.Fatalf("record not final after Close returned")
	}
	snap := p.Snapshot()
	if code := exitCode(t, snap.Info); code != 143 || snap.Info.Signal != "SIGTERM" {
		t.Errorf("exit = %d %q; want 143 SIGTERM (the shell's exec'd sleep)", code, snap.Info.Signal)
	}
	if !strings.Contains(snap.Output.Text, "spam\n") || snap.Info.OutputBytes <= int64(len("ready\n")) {
		t.Errorf("final output of %d bytes = %.80q...; want the flood in it", snap.Info.OutputBytes, snap.Output.Text)
	}
	// I1: final output never changes, though the flooder may still write.
	if got := p.Output(); got.Text != snap.Output.Text || p.Info().OutputBytes != snap.Info.OutputBytes {
		t.Errorf("Output() changed after the record was final")
	}
}

// TestFaultCloseLeavesNoTimer pins that Close leaves nothing armed: a
// timed-out record arms a kill-grace timer that outlives its end (to kill
// leftovers of the group); when the record is dropped (Remove, retention)
// before Close, that timer must not survive Close either — it would run
// the closed manager's code later, and signal a process group ID that may
// have been reused by then.
func TestFaultCloseLeavesNoTimer(t *testing.T) {
	t.Parallel()
	const grace = time.Second
	ctx, mClock, m := testMockManager(t, proc.Options{KillGrace: grace})
	p := mustStart(t, m, proc.StartRequest{Command: "exec sleep 30", Timeout: time.Second})

	trap := mClock.Trap().NewTimer("process", "kill-grace")
	defer trap.Close()
	w := mClock.Advance(time.Second) // the timeout: terminate, arm the kill grace
	trap.MustWait(ctx).MustRelease(ctx)
	w.MustWait(ctx)
	snap := waitFinal(ctx, t, p)
	if code := exitCode(t, snap.Info); code != proc.ExitTimedOut || !snap.Info.TimedOut {
		t.Fatalf("exit after the timeout = %d, timed out %v; want 124, true", code, snap.Info.TimedOut)
	}
	if err := m.Remove(p.ID()); err != nil {
		t.Fatalf("Remove(%s) = %v; want nil", p.ID(), err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close() = %v; want nil", err)
	}
	if d, ok := mClock.Peek(); ok {
		t.Errorf("after Close, a timer is still armed, due in %v; want none (the kill grace of the removed record %s)", d, p.ID())
	}
}

// TestFaultCloseWaitsForGroupDeath pins I4 strictly: when Close returns, no
// member of a group it started is alive — not merely sent SIGKILL. Here
// the members that need the kill hold no pipe (so the drain does not wait
// for them), and there are several of them, so that some have not run
// their exit yet when the leader has been reaped.
func TestFaultCloseWaitsForGroupDeath(t *testing.T) {
	t.Parallel()
	needProcFS(t)
	ctx := testCtx(t)
	const (
		rounds  = 8
		members = 8
	)
	command := "trap '' TERM; for i in " + strings.Repeat("x ", members) +
		"; do sleep 30 >/dev/null 2>&1 & done; echo ready; wait"
	for round := range rounds {
		m := newManager(t, proc.Options{KillGrace: 100 * time.Millisecond})
		p := mustStart(t, m, proc.StartRequest{Command: command})
		waitText(ctx, t, p, "ready\n")
		if err := m.Close(); err != nil {
			t.Errorf("round %d: Close() = %v; want nil", round, err)
		}
		if live := liveMembers(t, p.Info().PID); len(live) != 0 {
			t.Fatalf("round %d: right after Close returned, %d members of the group are alive: %v; want none (I4)", round, len(live), live)
		}
	}
}
