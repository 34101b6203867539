package proc_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/procvisor/proc"
)

// Tests of the conveniences of design section 11: Run, StartOrGet, WaitFor
// and LogPath. Unix-only cases (file modes, FIFOs, /dev/full, TTY) are in
// convenience_unix_test.go.

// cvUnescape turns the escapes \n and \r of a script argument into bytes.
var cvUnescape = strings.NewReplacer(`\n`, "\n", `\r`, "\r")

var _ = helper("cv-script", cvScript)

// cvScript runs its arguments as steps, in order:
//
//	out:TEXT   write TEXT to stdout (\n and \r escaped) in one write
//	err:TEXT   write TEXT to stderr in one write
//	bytes:TEXT write TEXT to stdout one byte per write, 2ms apart
//	fill:N     write N bytes 'x' (no newline) to stdout
//	lines:N    write N lines "filler %05d\n" (13 bytes each) to stdout
//	wait       read one line from stdin (or end-of-file)
//	sleep      read stdin until end-of-file
//	exit:N     exit with code N
//
// and exits 0 after the last step.
func cvScript(args []string) int {
	in := bufio.NewReader(os.Stdin)
	for _, step := range args {
		op, arg, _ := strings.Cut(step, ":")
		var err error
		switch op {
		case "out":
			_, err = os.Stdout.WriteString(cvUnescape.Replace(arg))
		case "err":
			_, err = os.Stderr.WriteString(cvUnescape.Replace(arg))
		case "bytes":
			for _, b := range []byte(cvUnescape.Replace(arg)) {
				if _, err = os.Stdout.Write([]byte{b}); err != nil {
					break
				}
				// The child's behaviour: let every byte arrive on its own.
				time.Sleep(2 * time.Millisecond)
			}
		case "fill":
			n, _ := strconv.Atoi(arg)
			chunk := bytes.Repeat([]byte{'x'}, 32<<10)
			for n > 0 && err == nil {
				k := min(n, len(chunk))
				_, err = os.Stdout.Write(chunk[:k])
				n -= k
			}
		case "lines":
			n, _ := strconv.Atoi(arg)
			_, err = os.Stdout.WriteString(cvFiller(n))
		case "wait":
			_, err = in.ReadString('\n')
			if errors.Is(err, io.EOF) {
				err = nil
			}
		case "sleep":
			_, err = io.Copy(io.Discard, in)
		case "exit":
			code, _ := strconv.Atoi(arg)
			return code
		default:
			err = fmt.Errorf("unknown step %q", step)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "cv-script: %s: %v\n", step, err)
			return 100
		}
	}
	return 0
}

// cvFiller is what the step lines:n writes.
func cvFiller(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "filler %05d\n", i)
	}
	return b.String()
}

// cvReq is a request that runs cvScript with steps.
func cvReq(steps ...string) proc.StartRequest {
	return helperReq("cv-script", steps...)
}

var _ = helper("cv-logorder", cvLogOrder)

// cvLogOrder takes a log path and steps "out:TEXT" / "err:TEXT". It writes
// each step to its stream and then waits until the log file holds
// everything written so far, before the next step. So the pumps see the
// steps in this order, and the log must hold them in this order.
func cvLogOrder(args []string) int {
	path, steps := args[0], args[1:]
	var want []byte
	deadline := time.Now().Add(20 * time.Second)
	for _, step := range steps {
		op, arg, _ := strings.Cut(step, ":")
		text := cvUnescape.Replace(arg)
		w := os.Stdout
		if op == "err" {
			w = os.Stderr
		}
		if _, err := w.WriteString(text); err != nil {
			return 100
		}
		want = append(want, text...)
		for {
			got, err := os.ReadFile(path)
			if err == nil && bytes.Equal(got, want) {
				break
			}
			if err == nil && !bytes.HasPrefix(want, got) {
				fmt.Fprintf(os.Stderr, "cv-logorder: log holds %q; want %q\n", got, want)
				return 3
			}
			if time.Now().After(deadline) {
				fmt.Fprintf(os.Stderr, "cv-logorder: log holds %q (%v); want %q\n", got, err, want)
				return 4
			}
			// The child's behaviour: poll the file the parent writes.
			time.Sleep(time.Millisecond)
		}
	}
	return 0
}

// cvPattern is a deterministic pseudo-random byte stream that a child and
// the test both produce without storing it: chunk k (of cvPatternChunk
// bytes) is one fixed pseudo-random block (splitmix64 of the seed), rotated
// by an offset derived from k, with k in its first 8 bytes. Every chunk is
// distinct, so a lost, repeated or reordered piece shows; and it costs a
// copy per chunk, which keeps the test fast under -race.
type cvPattern struct {
	base []byte
	k    uint64
}

// cvPatternChunk is the write size of cv-pattern and the compare size of
// the test.
const cvPatternChunk = 1 << 20

func newCVPattern(seed uint64) *cvPattern {
	g := &cvPattern{base: make([]byte, cvPatternChunk)}
	for i := 0; i < len(g.base); i += 8 {
		seed += 0x9e3779b97f4a7c15
		z := seed
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		binary.LittleEndian.PutUint64(g.base[i:], z^(z>>31))
	}
	return g
}

// next fills dst (cvPatternChunk bytes) with the next chunk.
func (g *cvPattern) next(dst []byte) {
	r := int((g.k * 0x9e3779b97f4a7c15 >> 32) % uint64(len(g.base)))
	n := copy(dst, g.base[r:])
	copy(dst[n:], g.base[:r])
	binary.LittleEndian.PutUint64(dst, g.k)
	g.k++
}

var _ = helper("cv-pattern", cvPatternHelper)

// cvPatternHelper writes args[0] bytes (a multiple of cvPatternChunk) of
// the pattern seeded with args[1] to stdout.
func cvPatternHelper(args []string) int {
	size, _ := strconv.ParseInt(args[0], 10, 64)
	seed, _ := strconv.ParseUint(args[1], 10, 64)
	g := newCVPattern(seed)
	buf := make([]byte, cvPatternChunk)
	for written := int64(0); written < size; written += int64(len(buf)) {
		g.next(buf)
		if _, err := os.Stdout.Write(buf); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

// cvBlockedCtx reports, once, when a blocking call first waits on it (calls
// Done). WaitFor and Run only wait on their context after they have taken
// their position (WaitFor: where in the stream it starts matching), so what
// the test lets the child do after this report happens after the call began.
type cvBlockedCtx struct {
	context.Context
	waiting context.Context    // done once a call waited
	report  context.CancelFunc // ends waiting; idempotent
}

func newCVBlockedCtx(ctx context.Context) *cvBlockedCtx {
	waiting, report := context.WithCancel(context.Background())
	return &cvBlockedCtx{Context: ctx, waiting: waiting, report: report}
}

func (c *cvBlockedCtx) Done() <-chan struct{} {
	c.report()
	return c.Context.Done()
}

// cvWhileBlocked runs call with a context that runs then once call blocks
// on it; then does not run if call returns without blocking. It returns
// then's error (nil if then did not run).
func cvWhileBlocked(ctx context.Context, call func(ctx context.Context), then func() error) error {
	bctx := newCVBlockedCtx(ctx)
	returned := make(chan struct{})
	thenErr := make(chan error, 1)
	go func() {
		select {
		case <-bctx.waiting.Done():
			thenErr <- then()
		case <-returned:
			thenErr <- nil
		}
	}()
	call(bctx)
	close(returned)
	return <-thenErr
}

// cvWaitForThen calls p.WaitFor and, once it blocks, then.
func cvWaitForThen(ctx context.Context, t *testing.T, p *proc.Process, re *regexp.Regexp, fromStart bool, then func() error) (string, error) {
	t.Helper()
	var (
		line string
		err  error
	)
	thenErr := cvWhileBlocked(ctx, func(ctx context.Context) {
		line, err = p.WaitFor(ctx, re, fromStart)
	}, then)
	if thenErr != nil {
		t.Errorf("while WaitFor(%q, %v) was blocked: %v", re, fromStart, thenErr)
	}
	return line, err
}

// cvGo returns a then for cvWaitForThen that writes a line to p's stdin.
func cvGo(p *proc.Process) func() error {
	return func() error {
		_, err := p.Write([]byte("go\n"))
		return err
	}
}

// cvHold holds the first call of Options.UpdateEnv until release: a start
// is then past opening its log and before reserving its ID.
type cvHold struct {
	calls   atomic.Int32
	held    chan struct{}
	gate    context.Context    // done once released
	release context.CancelFunc // idempotent
}

func cvHoldFirstUpdateEnv(t *testing.T) *cvHold {
	h := &cvHold{held: make(chan struct{})}
	h.gate, h.release = context.WithCancel(context.Background())
	t.Cleanup(h.release) // never leave a start held
	return h
}

func (h *cvHold) updateEnv(env []string) ([]string, error) {
	if h.calls.Add(1) == 1 {
		close(h.held)
		<-h.gate.Done()
	}
	return env, nil
}

// cvStop ends a process started with Stdin running "sleep", and waits for it.
func cvStop(ctx context.Context, t *testing.T, p *proc.Process) proc.Snapshot {
	t.Helper()
	if err := p.CloseStdin(); err != nil && !errors.Is(err, proc.ErrNotRunning) {
		t.Errorf("CloseStdin() = %v", err)
	}
	return waitFinal(ctx, t, p)
}

// cvFailingStarts are requests whose start fails, on a Manager that runs a
// process with ID "held".
var cvFailingStarts = []struct {
	name string
	req  proc.StartRequest
	want error
}{
	{"not-found", proc.StartRequest{Args: []string{"cv-no-such-program-7f3a"}}, exec.ErrNotFound},
	{"invalid", proc.StartRequest{Command: "true", Args: []string{"true"}}, proc.ErrInvalid},
	{"duplicate-id", proc.StartRequest{ID: "held", Command: "true"}, proc.ErrDuplicateID},
}

// cvWantFile fails unless the file at path holds want.
func cvWantFile(t *testing.T, path, want string) {
	t.Helper()
	if got, err := os.ReadFile(path); err != nil || string(got) != want {
		t.Errorf("log file %s = %q, %v; want %q", filepath.Base(path), got, err, want)
	}
}

func TestRun(t *testing.T) {
	t.Parallel()

	t.Run("final", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
		snap, err := m.Run(ctx, cvReq("out:hello\n", "err:oops\n", "exit:3"))
		if err != nil {
			t.Fatalf("Run() = %v; want nil", err)
		}
		if snap.Info.Running {
			t.Errorf("Run() snapshot Running = true; want a final snapshot")
		}
		wantExit(t, snap, 3)
		if snap.Output.Text != "hello\noops\n" {
			t.Errorf("Run() output = %q; want %q", snap.Output.Text, "hello\noops\n")
		}
		p, err := m.Get(snap.Info.ID)
		if err != nil {
			t.Fatalf("Get(%q) after Run = %v; want the record", snap.Info.ID, err)
		}
		if got := p.Snapshot(); got.Output.Text != snap.Output.Text || got.Info.Running {
			t.Errorf("Get(%q).Snapshot() = running %v, output %q; want the final record Run returned", snap.Info.ID, got.Info.Running, got.Output.Text)
		}
	})

	// The caller's context ends while Run waits: the process keeps running
	// and can be re-attached by ID.
	for _, tc := range []struct {
		name  string
		ctx   func(ctx context.Context) (context.Context, context.CancelFunc)
		block bool // cancel once Run blocks; else the ctx is over before Run
		want  error
	}{
		{"ctx-ends-while-waiting", context.WithCancel, true, context.Canceled},
		{"ctx-already-canceled", context.WithCancel, false, context.Canceled},
		{"ctx-deadline-passed", func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithDeadline(ctx, time.Unix(1, 0))
		}, false, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, m := testManager(t, proc.Options{})
			req := cvReq("out:up\n", "sleep")
			req.Stdin = true
			runCtx, cancel := tc.ctx(ctx)
			defer cancel()
			if !tc.block {
				cancel()
			}
			var (
				snap proc.Snapshot
				err  error
			)
			if tc.block {
				_ = cvWhileBlocked(runCtx, func(ctx context.Context) { snap, err = m.Run(ctx, req) },
					func() error { cancel(); return nil })
			} else {
				snap, err = m.Run(runCtx, req)
			}
			if !errors.Is(err, proc.ErrRunning) || !errors.Is(err, tc.want) {
				t.Fatalf("Run() = %v; want an error wrapping ErrRunning and %v", err, tc.want)
			}
			if !snap.Info.Running || snap.Info.ExitCode != nil {
				t.Errorf("Run() snapshot = running %v, exit code %v; want the running snapshot", snap.Info.Running, snap.Info.ExitCode)
			}
			if snap.Info.ID == "" || snap.Info.PID == 0 {
				t.Fatalf("Run() snapshot has ID %q, PID %d; want the started process", snap.Info.ID, snap.Info.PID)
			}
			p, err := m.Get(snap.Info.ID)
			if err != nil {
				t.Fatalf("Get(%q) after Run = %v; want to re-attach", snap.Info.ID, err)
			}
			if !p.Info().Running {
				t.Errorf("re-attached record is not running; Run must leave the process running")
			}
			final := cvStop(ctx, t, p)
			if code := exitCode(t, final.Info); code != 0 || final.Output.Text != "up\n" {
				t.Errorf("re-attached record ended with exit %d, output %q; want 0, %q", code, final.Output.Text, "up\n")
			}
		})
	}

	t.Run("start-errors", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
		defer cvStop(ctx, t, startStdin(t, m, withReq(cvReq("sleep"), func(r *proc.StartRequest) { r.ID = "held" })))

		for _, tc := range cvFailingStarts {
			snap, err := m.Run(ctx, tc.req)
			if !errors.Is(err, tc.want) || errors.Is(err, proc.ErrRunning) {
				t.Errorf("%s: Run() = %v; want the Start error wrapping %v (and not ErrRunning)", tc.name, err, tc.want)
			}
			if snap.Info.ID != "" || snap.Output.Text != "" {
				t.Errorf("%s: Run() snapshot = %+v; want the zero Snapshot", tc.name, snap.Info)
			}
		}
		if infos := m.List(); len(infos) != 1 {
			t.Errorf("List() after failed Runs has %d records; want only %q", len(infos), "held")
		}

		closed := proc.NewManager(proc.Options{})
		if err := closed.Close(); err != nil {
			t.Fatalf("Close() = %v", err)
		}
		if _, err := closed.Run(ctx, proc.StartRequest{Command: "true"}); !errors.Is(err, proc.ErrClosed) {
			t.Errorf("Run() after Close = %v; want ErrClosed", err)
		}
	})

	t.Run("scope", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
		alice, bob := m.Scope("alice"), m.Scope("bob")

		snap, err := alice.Run(ctx, cvReq("out:from alice\n"))
		if err != nil {
			t.Fatalf("alice.Run() = %v", err)
		}
		if snap.Info.Owner != "alice" || snap.Output.Text != "from alice\n" || snap.Info.Running {
			t.Errorf("alice.Run() = owner %q, output %q, running %v; want alice, %q, final", snap.Info.Owner, snap.Output.Text, snap.Info.Running, "from alice\n")
		}
		if _, err := bob.Get(snap.Info.ID); !errors.Is(err, proc.ErrNotFound) {
			t.Errorf("bob.Get(alice's run) = %v; want ErrNotFound", err)
		}

		req := cvReq("sleep")
		req.Owner, req.Stdin = "bob", true
		if _, err := alice.Run(ctx, req); !errors.Is(err, proc.ErrInvalid) {
			t.Errorf("alice.Run(Owner bob) = %v; want ErrInvalid", err)
		}

		req.Owner = ""
		runCtx, cancel := context.WithCancel(ctx)
		cancel()
		snap, err = alice.Run(runCtx, req)
		if !errors.Is(err, proc.ErrRunning) || !errors.Is(err, context.Canceled) {
			t.Fatalf("alice.Run(ended ctx) = %v; want ErrRunning and context.Canceled", err)
		}
		p, err := alice.Get(snap.Info.ID)
		if err != nil {
			t.Fatalf("alice.Get(%q) = %v; want to re-attach", snap.Info.ID, err)
		}
		if _, err := bob.Get(snap.Info.ID); !errors.Is(err, proc.ErrNotFound) {
			t.Errorf("bob.Get(alice's running process) = %v; want ErrNotFound", err)
		}
		cvStop(ctx, t, p)
	})
}

func TestStartOrGet(t *testing.T) {
	t.Parallel()

	t.Run("retry-while-running", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
		req := cvReq("out:up\n", "sleep")
		req.ID, req.Stdin = "svc", true
		p, started, err := m.StartOrGet(req)
		if err != nil || !started || p == nil {
			t.Fatalf("first StartOrGet() = %v, %v, %v; want a process, true, nil", p, started, err)
		}
		defer cvStop(ctx, t, p)

		// Only Command, Args, WorkDir, Owner, the environment and
		// Background are compared (TestStartOrGetEnvironment).
		retry := req
		retry.Timeout = time.Hour // not compared
		for _, r := range []proc.StartRequest{req, retry} {
			got, started, err := m.StartOrGet(r)
			if err != nil || started || got != p {
				t.Errorf("retried StartOrGet() = %p, %v, %v; want %p, false, nil", got, started, err, p)
			}
		}
		if n := len(m.List()); n != 1 {
			t.Errorf("List() after retries has %d records; want 1", n)
		}
	})

	t.Run("retry-after-final", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
		req := cvReq("out:done\n", "exit:4")
		req.ID = "job"
		p, started, err := m.StartOrGet(req)
		if err != nil || !started {
			t.Fatalf("first StartOrGet() = %v, %v; want true, nil", started, err)
		}
		snap := waitFinal(ctx, t, p)
		got, started, err := m.StartOrGet(req)
		if err != nil || started || got != p {
			t.Fatalf("StartOrGet() of a final record = %p, %v, %v; want %p, false, nil", got, started, err, p)
		}
		if again := got.Snapshot(); again.Info.Running || exitCode(t, again.Info) != 4 || again.Output.Text != snap.Output.Text {
			t.Errorf("StartOrGet() returned record = running %v, output %q; want the final record with exit 4", again.Info.Running, again.Output.Text)
		}
	})

	t.Run("different-parameters", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
		dir := t.TempDir()
		byCommand := proc.StartRequest{ID: "by-command", Command: "echo original"}
		byArgs := cvReq("out:original\n")
		byArgs.ID = "by-args"
		for _, req := range []proc.StartRequest{byCommand, byArgs} {
			p, started, err := m.StartOrGet(req)
			if err != nil || !started {
				t.Fatalf("StartOrGet(%q) = %v, %v; want true, nil", req.ID, started, err)
			}
			waitFinal(ctx, t, p)
		}
		resolved := func() string {
			p, err := m.Get("by-command")
			if err != nil {
				t.Fatalf("Get(by-command) = %v", err)
			}
			return p.Info().WorkDir
		}()

		for _, tc := range []struct {
			name string
			req  proc.StartRequest
		}{
			{"other-command", withReq(byCommand, func(r *proc.StartRequest) { r.Command = "echo other" })},
			{"args-instead-of-command", withReq(byCommand, func(r *proc.StartRequest) { r.Command, r.Args = "", []string{"echo", "original"} })},
			{"other-args", withReq(byArgs, func(r *proc.StartRequest) { r.Args = append(append([]string(nil), r.Args...), "out:more\n") })},
			{"other-workdir", withReq(byCommand, func(r *proc.StartRequest) { r.WorkDir = dir })},
			// Compared as requested, not as resolved.
			{"resolved-workdir", withReq(byCommand, func(r *proc.StartRequest) { r.WorkDir = resolved })},
			{"other-owner", withReq(byCommand, func(r *proc.StartRequest) { r.Owner = "someone" })},
		} {
			p, started, err := m.StartOrGet(tc.req)
			if !errors.Is(err, proc.ErrDuplicateID) || started || p != nil {
				t.Errorf("%s: StartOrGet() = %v, %v, %v; want nil, false, ErrDuplicateID", tc.name, p, started, err)
			}
		}
		if n := len(m.List()); n != 2 {
			t.Errorf("List() has %d records; want the 2 originals", n)
		}
	})

	t.Run("no-id", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
		req := cvReq("out:x\n")
		first, started1, err1 := m.StartOrGet(req)
		second, started2, err2 := m.StartOrGet(req)
		if err1 != nil || err2 != nil || !started1 || !started2 || first == second || first.ID() == second.ID() {
			t.Fatalf("StartOrGet() without ID twice = (%v, %v), (%v, %v); want two new processes", started1, err1, started2, err2)
		}
		waitFinal(ctx, t, first)
		waitFinal(ctx, t, second)
	})

	t.Run("start-errors", func(t *testing.T) {
		t.Parallel()
		m := newManager(t, proc.Options{})
		for _, tc := range []struct {
			req  proc.StartRequest
			want error
		}{
			{proc.StartRequest{ID: "nf", Args: []string{"cv-no-such-program-7f3a"}}, exec.ErrNotFound},
			{proc.StartRequest{ID: "bad"}, proc.ErrInvalid},
		} {
			p, started, err := m.StartOrGet(tc.req)
			if !errors.Is(err, tc.want) || started || p != nil {
				t.Errorf("StartOrGet(%q) = %v, %v, %v; want nil, false, %v", tc.req.ID, p, started, err, tc.want)
			}
		}
		if n := len(m.List()); n != 0 {
			t.Errorf("List() after failed starts has %d records; want 0", n)
		}
	})

	// Many callers retry one start at once: exactly one process starts and
	// every caller gets it.
	t.Run("concurrent", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
		req := cvReq("out:once\n", "sleep")
		req.ID, req.Stdin = "one", true
		const callers = 32
		type result struct {
			p       *proc.Process
			started bool
			err     error
		}
		all := atOnce(ctx, t, callers, func(int) result {
			p, started, err := m.StartOrGet(req)
			return result{p, started, err}
		})
		var winner *proc.Process
		starts := 0
		for _, r := range all {
			if r.err != nil {
				t.Errorf("StartOrGet() = %v; want nil", r.err)
				continue
			}
			if r.started {
				starts++
				winner = r.p
			}
		}
		if starts != 1 {
			t.Fatalf("%d of %d concurrent StartOrGet() calls started a process; want exactly 1", starts, callers)
		}
		for _, r := range all {
			if r.err == nil && r.p != winner {
				t.Errorf("StartOrGet() = %p; want the one started process %p", r.p, winner)
			}
		}
		if infos := m.List(); len(infos) != 1 || infos[0].ID != "one" {
			t.Errorf("List() = %d records; want exactly the one process", len(infos))
		}
		if snap := cvStop(ctx, t, winner); snap.Output.Text != "once\n" {
			t.Errorf("output = %q; want %q", snap.Output.Text, "once\n")
		}
	})

	// The same race with a LogPath, in the order that loses the log: the
	// losing call opens (creates) the log first, then the winner starts
	// and writes to it, then the loser finds the ID taken and discards its
	// start. The loser must not remove the file the winner writes to.
	// Options.UpdateEnv, which runs after the log was opened and before the
	// ID is reserved, holds the losing call at that point.
	t.Run("losing-retry-keeps-the-log", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		hold := cvHoldFirstUpdateEnv(t)
		m := newManager(t, proc.Options{UpdateEnv: hold.updateEnv})
		req := cvReq("out:once\n", "sleep")
		req.ID, req.Stdin = "one", true
		req.LogPath = filepath.Join(t.TempDir(), "one.log")

		type result struct {
			p       *proc.Process
			started bool
			err     error
		}
		loser := make(chan result, 1)
		go func() {
			p, started, err := m.StartOrGet(req)
			loser <- result{p, started, err}
		}()
		recv(ctx, t, hold.held, "the first StartOrGet to reach UpdateEnv")
		winner, started, err := m.StartOrGet(req)
		if err != nil || !started {
			t.Fatalf("second StartOrGet() = %v, %v; want it to start the process", started, err)
		}
		hold.release()
		r := recv(ctx, t, loser, "the first StartOrGet")
		if r.err != nil || r.started || r.p != winner {
			t.Errorf("first StartOrGet() = %p, %v, %v; want the winner %p, false, nil", r.p, r.started, r.err, winner)
		}
		cvStop(ctx, t, winner)
		cvWantFile(t, req.LogPath, "once\n")
	})

	t.Run("scope", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
		alice, bob := m.Scope("alice"), m.Scope("bob")
		req := cvReq("out:alice\n", "sleep")
		req.ID, req.Stdin = "shared", true
		p, started, err := alice.StartOrGet(req)
		if err != nil || !started {
			t.Fatalf("alice.StartOrGet() = %v, %v; want true, nil", started, err)
		}
		defer cvStop(ctx, t, p)
		if p.Info().Owner != "alice" {
			t.Errorf("alice.StartOrGet() owner = %q; want alice", p.Info().Owner)
		}

		got, started, err := bob.StartOrGet(req)
		if !errors.Is(err, proc.ErrDuplicateID) || started || got != nil {
			t.Errorf("bob.StartOrGet(alice's ID) = %v, %v, %v; want nil, false, ErrDuplicateID", got, started, err)
		}
		got, started, err = alice.StartOrGet(req)
		if err != nil || started || got != p {
			t.Errorf("alice.StartOrGet() again = %p, %v, %v; want %p, false, nil", got, started, err, p)
		}
		got, started, err = m.Scope("alice").StartOrGet(req)
		if err != nil || started || got != p {
			t.Errorf("another alice Scope StartOrGet() = %p, %v, %v; want %p, false, nil", got, started, err, p)
		}
		owned := req
		owned.Owner = "alice"
		got, started, err = m.StartOrGet(owned)
		if err != nil || started || got != p {
			t.Errorf("Manager.StartOrGet(Owner alice) = %p, %v, %v; want %p, false, nil", got, started, err, p)
		}
		if _, _, err := m.StartOrGet(req); !errors.Is(err, proc.ErrDuplicateID) {
			t.Errorf("Manager.StartOrGet(no owner) of alice's ID = %v; want ErrDuplicateID", err)
		}
		owned.Owner = "bob"
		if _, _, err := alice.StartOrGet(owned); !errors.Is(err, proc.ErrInvalid) {
			t.Errorf("alice.StartOrGet(Owner bob) = %v; want ErrInvalid", err)
		}
		if !p.Info().Running {
			t.Errorf("alice's process is not running after the others' calls")
		}
	})
}

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

	t.Run("fromStart-finds-retained", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
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
	t.Run("not-fromStart-skips-completed", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
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
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, m := testManager(t, proc.Options{})
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
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, m := testManager(t, proc.Options{})
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
	t.Run("long-lines", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{HeadBytes: 1 << 10, TailBytes: 1 << 10})

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
	t.Run("line-starting-right-after-omitted-bytes", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{HeadBytes: 1 << 10, TailBytes: 1 << 10})
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

	t.Run("first-64KiB-of-a-line", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{HeadBytes: 256 << 10, TailBytes: 256 << 10})
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

	t.Run("no-match", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
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

	t.Run("unterminated-last-line", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
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

	t.Run("carriage-return", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
		p := mustStart(t, m, cvReq(`out:crlf line\r\nnext\r\n`))
		line, err := p.WaitFor(ctx, regexp.MustCompile(`^crlf line$`), true)
		if err != nil || line != "crlf line" {
			t.Errorf("WaitFor(^crlf line$) = %q, %v; want %q without \\r", line, err, "crlf line")
		}
	})

	t.Run("ctx-canceled", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
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

	t.Run("nil-regexp", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
		p := mustStart(t, m, cvReq("out:x\n"))
		if _, err := p.WaitFor(ctx, nil, true); !errors.Is(err, proc.ErrInvalid) {
			t.Errorf("WaitFor(nil) = %v; want ErrInvalid", err)
		}
		waitFinal(ctx, t, p)
	})
}

func TestLogPath(t *testing.T) {
	t.Parallel()

	// The file holds everything, unbounded, while the buffer keeps 2 KiB;
	// it is complete as soon as Wait returns.
	t.Run("full-output", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{HeadBytes: 1 << 10, TailBytes: 1 << 10})
		path := filepath.Join(t.TempDir(), "out.log")
		req := cvReq("lines:20000", "out:last line")
		req.LogPath = path
		p := mustStart(t, m, req)
		snap := waitFinal(ctx, t, p)
		got, err := os.ReadFile(path)
		want := cvFiller(20000) + "last line"
		if err != nil || string(got) != want {
			t.Fatalf("log file right after Wait = %d bytes, %v; want the %d bytes the child wrote", len(got), err, len(want))
		}
		if snap.Info.LogPath != path || snap.Info.LogError != "" {
			t.Errorf("Info LogPath %q, LogError %q; want %q, \"\"", snap.Info.LogPath, snap.Info.LogError, path)
		}
		if snap.Info.OutputBytes != int64(len(want)) || snap.Output.Truncation == nil {
			t.Errorf("OutputBytes %d, Truncation %+v; want %d and a truncated buffer", snap.Info.OutputBytes, snap.Output.Truncation, len(want))
		}
	})

	t.Run("separate-stderr-in-arrival-order", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
		path := filepath.Join(t.TempDir(), "both.log")
		req := helperReq("cv-logorder", path, "out:out 1\n", "err:err 1\n", "err:err 2\n", "out:out 2\n", "err:err 3\n")
		req.LogPath, req.SeparateStderr = path, true
		p := mustStart(t, m, req)
		snap := waitFinal(ctx, t, p)
		if code := exitCode(t, snap.Info); code != 0 {
			t.Fatalf("cv-logorder exit %d, stderr %q; want 0", code, snap.Stderr.Text)
		}
		cvWantFile(t, path, "out 1\nerr 1\nerr 2\nout 2\nerr 3\n")
		if snap.Output.Text != "out 1\nout 2\n" || snap.Stderr.Text != "err 1\nerr 2\nerr 3\n" {
			t.Errorf("Output %q, Stderr %q; want the streams kept apart in memory", snap.Output.Text, snap.Stderr.Text)
		}
	})

	t.Run("appends", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
		path := filepath.Join(t.TempDir(), "app.log")
		if err := os.WriteFile(path, []byte("previous run\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, text := range []string{"run 1\n", "run 2\n"} {
			req := cvReq("out:" + text)
			req.LogPath = path
			waitFinal(ctx, t, mustStart(t, m, req))
		}
		cvWantFile(t, path, "previous run\nrun 1\nrun 2\n")
	})

	// A start that fails after the log was opened removes the file it
	// created, and leaves a file that was there before untouched.
	t.Run("failed-start", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
		defer cvStop(ctx, t, startStdin(t, m, withReq(cvReq("sleep"), func(r *proc.StartRequest) { r.ID = "held" })))

		dir := t.TempDir()
		for _, tc := range cvFailingStarts {
			created := filepath.Join(dir, tc.name+"-new.log")
			existing := filepath.Join(dir, tc.name+"-old.log")
			if err := os.WriteFile(existing, []byte("keep me\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, path := range []string{created, existing} {
				req := tc.req
				req.LogPath = path
				if _, err := m.Start(req); !errors.Is(err, tc.want) {
					t.Errorf("%s: Start(LogPath %s) = %v; want %v", tc.name, filepath.Base(path), err, tc.want)
				}
			}
			if _, err := os.Lstat(created); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s: log file created by the failed start: Lstat = %v; want it removed", tc.name, err)
			}
			cvWantFile(t, existing, "keep me\n")
		}
	})

	// Two starts share a new log path; the one that created the file fails
	// after the other opened it. The failure must not remove a file that a
	// running process writes to.
	t.Run("failed-start-beside-a-started-one", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		hold := cvHoldFirstUpdateEnv(t)
		m := newManager(t, proc.Options{UpdateEnv: hold.updateEnv})
		path := filepath.Join(t.TempDir(), "shared.log")
		failed := make(chan error, 1)
		go func() {
			_, err := m.Start(proc.StartRequest{Args: []string{"cv-no-such-program-7f3a"}, LogPath: path})
			failed <- err
		}()
		recv(ctx, t, hold.held, "the failing Start to reach UpdateEnv")
		req := cvReq("out:from the started one\n")
		req.LogPath = path
		waitFinal(ctx, t, mustStart(t, m, req))
		hold.release()
		if err := recv(ctx, t, failed, "the failing Start"); !errors.Is(err, exec.ErrNotFound) {
			t.Errorf("Start(missing program) = %v; want exec.ErrNotFound", err)
		}
		cvWantFile(t, path, "from the started one\n")
	})

	t.Run("bad-path", func(t *testing.T) {
		t.Parallel()
		m := newManager(t, proc.Options{})
		dir := t.TempDir()
		cvWantBadLogPaths(t, m, []cvLogPath{
			{"missing-folder", filepath.Join(dir, "no-such-dir", "x.log")},
			{"directory", dir},
		})
	})
}

// cvLogPath is a named LogPath.
type cvLogPath struct{ name, path string }

// cvWantBadLogPaths checks that m refuses a start with each of the log
// paths as ErrInvalid, and keeps no record of them.
func cvWantBadLogPaths(t *testing.T, m *proc.Manager, paths []cvLogPath) {
	t.Helper()
	for _, tc := range paths {
		req := cvReq("out:x\n")
		req.LogPath = tc.path
		if p, err := m.Start(req); !errors.Is(err, proc.ErrInvalid) || p != nil {
			t.Errorf("%s: Start(LogPath %q) = %v, %v; want ErrInvalid", tc.name, tc.path, p, err)
		}
	}
	if n := len(m.List()); n != 0 {
		t.Errorf("List() after refused starts has %d records; want 0", n)
	}
}

// TestLogPathLargeOutput streams 256 MiB through a process with a log
// file: the file is byte-identical to what the child wrote, and memory
// stays bounded while it runs and after.
func TestLogPathLargeOutput(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("writes 256 MiB")
	}
	const (
		size     = 256 << 20
		seed     = 20240917
		heapMax  = 64 << 20
		sampleAt = 64 << 20
	)
	ctx := testCtx(t, 60*time.Second)
	m := newManager(t, proc.Options{})
	path := filepath.Join(t.TempDir(), "big.log")
	req := helperReq("cv-pattern", strconv.Itoa(size), strconv.Itoa(seed))
	req.LogPath = path
	began := time.Now()
	p := mustStart(t, m, req)

	var peak uint64
	sample := func() {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
	}
	var cursor, next int64
	for {
		if err := p.WaitOutput(ctx, cursor); err != nil {
			t.Fatalf("WaitOutput(%d) = %v", cursor, err)
		}
		cursor = p.Info().OutputBytes
		// The log is written before the buffer: what a reader has seen
		// is already in the file.
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() < cursor {
			t.Fatalf("log file holds %d bytes while the buffer has seen %d; want the file ahead", fi.Size(), cursor)
		}
		if cursor >= next {
			sample()
			next += sampleAt
		}
		if !p.Info().Running {
			break
		}
	}
	snap := waitFinal(ctx, t, p)
	sample()
	if code := exitCode(t, snap.Info); code != 0 || snap.Info.OutputBytes != size || snap.Info.LogError != "" {
		t.Fatalf("final: exit %d, OutputBytes %d, LogError %q; want 0, %d, \"\"", code, snap.Info.OutputBytes, snap.Info.LogError, size)
	}
	if peak > heapMax {
		t.Errorf("HeapInuse peaked at %d MiB while streaming %d MiB; want below %d MiB", peak>>20, size>>20, heapMax>>20)
	}

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g := newCVPattern(seed)
	want := make([]byte, cvPatternChunk)
	got := make([]byte, cvPatternChunk)
	var off int64
	for ; off < size; off += cvPatternChunk {
		if _, err := io.ReadFull(f, got); err != nil {
			t.Fatalf("log file ends at %d bytes (%v); want %d", off, err, size)
		}
		g.next(want)
		if !bytes.Equal(got, want) {
			i := 0
			for got[i] == want[i] {
				i++
			}
			t.Fatalf("log file differs from the child's output at byte %d", off+int64(i))
		}
	}
	if n, err := f.Read(got[:1]); n != 0 || err != io.EOF {
		t.Errorf("log file is longer than the %d bytes the child wrote", size)
	}
	t.Logf("256 MiB streamed and verified in %v; peak HeapInuse %d KiB", time.Since(began).Round(time.Millisecond), peak>>10)
}
