package proc_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/quartz"
	"go.uber.org/goleak"

	"github.com/procvisor/proc"
	"github.com/procvisor/proc/internal/testkit"
	"github.com/procvisor/proc/proctest"
)

// TestMain and the helpers every test file uses: helper processes,
// waiting, mock-clock driving, and (at the end) the scripted child and
// log-file checks of the conveniences. Per-OS parts (descriptor and
// goroutine counts, /proc, pidfds, cgroups) are in helpers_unix_test.go
// and helpers_linux_test.go. A file's tests are in <file>_test.go.

// helperEnv names the helper mode when the test binary runs as a child.
const helperEnv = "PROC_TEST_HELPER"

// helpers are the modes the test binary can run as a child process, by
// name. A helper gets its arguments and its return value is the exit code.
var helpers = map[string]func(args []string) int{}

// helpersUsed records the modes tests asked for, for the unused-helper
// check in TestMain.
var helpersUsed sync.Map

// helpersStarted lists, for a helper that starts others itself (in the
// child, where helpersUsed is not the test's), the modes it starts.
var helpersStarted = map[string][]string{}

// helper registers fn as helper mode name; starts names the modes fn
// itself runs. Test files register a mode beside its function:
//
//	var _ = helper("lc-cat", lcHelperCat)
func helper(name string, fn func(args []string) int, starts ...string) struct{} {
	if _, dup := helpers[name]; dup {
		panic("helper mode " + name + " registered twice")
	}
	helpers[name] = fn
	helpersStarted[name] = starts
	return struct{}{}
}

// useHelper records that a test runs helper mode with args. A helper that
// runs another one (lc-spawn) takes its mode as an argument, which counts
// as requested too.
func useHelper(mode string, args ...string) {
	for _, name := range append([]string{mode}, args...) {
		if _, ok := helpers[name]; ok {
			helpersUsed.Store(name, true)
			for _, started := range helpersStarted[name] {
				useHelper(started)
			}
		}
	}
}

// helperCmd returns a command that runs the test binary as helper mode
// with args, for tests that start it themselves rather than through a
// Manager.
func helperCmd(mode string, args ...string) *exec.Cmd {
	useHelper(mode, args...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "GORACE="+helperGorace)
	return cmd
}

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode, os.Args[1:]))
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(checkHelpersUsed))
}

// checkHelpersUsed fails a run of the whole suite (no -run, not -short)
// if a registered helper mode was never requested: a dead helper, as
// os/exec's tests check. Filtered runs skip the check.
func checkHelpersUsed(code int) {
	if code != 0 || testing.Short() || flag.Lookup("test.run").Value.String() != "" {
		os.Exit(code)
	}
	var unused []string
	for name := range helpers {
		if _, ok := helpersUsed.Load(name); !ok {
			unused = append(unused, name)
		}
	}
	if len(unused) > 0 {
		sort.Strings(unused)
		fmt.Fprintf(os.Stderr, "helper modes no test requested: %s\n", strings.Join(unused, ", "))
		code = 1
	}
	os.Exit(code)
}

func runHelper(mode string, args []string) int {
	return testkit.RunHelper(helpers, mode, args)
}

// readyForSignal, in a helper process, prints "ready" once sig is caught
// and waits for it; it reports whether sig came within a minute.
func readyForSignal(sig os.Signal) bool {
	c := make(chan os.Signal, 1)
	signal.Notify(c, sig)
	fmt.Println("ready")
	select {
	case <-c:
		return true
	case <-time.After(time.Minute):
		return false
	}
}

// helperArgv returns an argv that runs the test binary as helper mode.
// The mode travels in the environment (see helperReq), so argv stays exact.
func helperArgv(args ...string) []string {
	return append([]string{os.Args[0]}, args...)
}

// helperGorace keeps the run's GORACE options for helper children and turns
// off the second a -race binary otherwise sleeps before it exits.
// Grandchildren inherit it.
var helperGorace = strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")

// helperReq is a StartRequest that runs helper mode with args.
func helperReq(mode string, args ...string) proc.StartRequest {
	useHelper(mode, args...)
	return proc.StartRequest{
		Args: helperArgv(args...),
		Env:  map[string]string{helperEnv: mode, "GORACE": helperGorace},
	}
}

// recv receives from ch, or fails the test when ctx ends first.
func recv[T any](ctx context.Context, t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("waiting for %s: %v", what, ctx.Err())
		panic("unreachable")
	}
}

// atOnce runs f(0) to f(n-1) on goroutines released together and returns
// their results in the order they came, failing the test if ctx ends first.
func atOnce[T any](ctx context.Context, t testing.TB, n int, f func(i int) T) []T {
	t.Helper()
	gate, results := make(chan struct{}), make(chan T, n)
	for i := range n {
		go func() {
			<-gate
			results <- f(i)
		}()
	}
	close(gate)
	all := make([]T, n)
	for i := range all {
		all[i] = recv(ctx, t, results, "the concurrent calls")
	}
	return all
}

// testCtx returns a context that ends with the test, at the latest after
// d (default 30s), so that a hang fails instead of stalling the run.
func testCtx(t testing.TB, d ...time.Duration) context.Context {
	t.Helper()
	return testkit.Ctx(t, 30*time.Second, d...)
}

// newManager returns a Manager that is closed when the test ends: the
// toolkit's name for proctest.NewManager, which users get too.
func newManager(t testing.TB, opts proc.Options) *proc.Manager {
	t.Helper()
	return proctest.NewManager(t, opts)
}

// testManager is testCtx and newManager, the start of most tests.
func testManager(t testing.TB, opts proc.Options) (context.Context, *proc.Manager) {
	t.Helper()
	return testCtx(t), newManager(t, opts)
}

// withManager runs f as a parallel subtest named name, with testManager's
// context and Manager of opts.
func withManager(t *testing.T, name string, opts proc.Options, f func(t *testing.T, ctx context.Context, m *proc.Manager)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, opts)
		f(t, ctx, m)
	})
}

// starter is what starts processes: a Manager or a Scope.
type starter interface {
	Start(proc.StartRequest) (*proc.Process, error)
}

// mustStart starts req or fails the test. A start Wine's CreateProcess
// refused by itself (wineRefusedStart) is tried once more.
func mustStart(t testing.TB, m starter, req proc.StartRequest) *proc.Process {
	t.Helper()
	p, err := m.Start(req)
	if wineRefusedStart(err) {
		t.Logf("Start: Wine refused the process itself (%v); once more", err)
		p, err = m.Start(req)
	}
	if err != nil {
		t.Fatalf("Start(%+v) = %v", req, err)
	}
	return p
}

// startStdin starts req with its stdin open for the test to write, or
// fails the test.
func startStdin(t testing.TB, m starter, req proc.StartRequest) *proc.Process {
	t.Helper()
	req.Stdin = true
	return mustStart(t, m, req)
}

// isDone reports whether p is final.
func isDone(p *proc.Process) bool {
	select {
	case <-p.Done():
		return true
	default:
		return false
	}
}

// goClose runs m.Close on a goroutine of its own and returns its result's
// channel.
func goClose(m interface{ Close() error }) <-chan error {
	closed := make(chan error, 1)
	go func() { closed <- m.Close() }()
	return closed
}

// testMockManager is testCtx and mockManager on a new mock clock, the
// start of most mock-clock tests.
func testMockManager(t *testing.T, opts proc.Options) (context.Context, *quartz.Mock, *proc.Manager) {
	t.Helper()
	mClock := quartz.NewMock(t)
	return testCtx(t), mClock, mockManager(t, mClock, opts)
}

// quietMockManager is testMockManager with a clock that logs nothing: for
// tests that move it through many calls.
func quietMockManager(t *testing.T, opts proc.Options) (context.Context, *quartz.Mock, *proc.Manager) {
	t.Helper()
	ctx, mClock, m := testMockManager(t, opts)
	mClock.WithLogger(quartz.NoOpLogger)
	return ctx, mClock, m
}

// withReq returns req changed by edit (its maps and slices are shared).
func withReq(req proc.StartRequest, edit func(*proc.StartRequest)) proc.StartRequest {
	edit(&req)
	return req
}

// waitFinal waits until p is final and returns its snapshot.
func waitFinal(ctx context.Context, t testing.TB, p *proc.Process) proc.Snapshot {
	t.Helper()
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait(%s) = %v; output so far %q", p.ID(), err, p.Output().Text)
	}
	return p.Snapshot()
}

// wantExit checks that the final snap exited with code want, saying what
// it wrote if not.
func wantExit(t testing.TB, snap proc.Snapshot, want int) {
	t.Helper()
	if code := exitCode(t, snap.Info); code != want {
		t.Errorf("%s: exit code %d; want %d (output %q, stderr %q)", snap.Info.ID, code, want, snap.Output.Text, snap.Stderr.Text)
	}
}

// exitCode returns the exit code of a final info, failing if there is none.
func exitCode(t testing.TB, info proc.Info) int {
	t.Helper()
	if info.ExitCode == nil {
		t.Fatalf("info %s has no exit code (running=%v)", info.ID, info.Running)
	}
	return *info.ExitCode
}

// waitText waits until p's Output stream holds want and returns the
// stream so far. It fails the test if p becomes final without it.
func waitText(ctx context.Context, t testing.TB, p *proc.Process, want string) string {
	t.Helper()
	return waitOutput(ctx, t, p, fmt.Sprintf("%q", want), func(s string) bool { return strings.Contains(s, want) })
}

// waitLen waits until p's Output stream is at least n bytes long (what it
// holds may be less: the buffer keeps a head and a tail).
func waitLen(ctx context.Context, t testing.TB, p *proc.Process, n int64) {
	t.Helper()
	for {
		c := p.ReadSince(1<<62, 1) // past the end: only End
		if c.End >= n {
			return
		}
		if c.EOF {
			t.Fatalf("%s became final with %d bytes of output; want at least %d", p.ID(), c.End, n)
		}
		if err := p.WaitOutput(ctx, c.End); err != nil {
			t.Fatalf("WaitOutput(%d) = %v waiting for %d bytes", c.End, err, n)
		}
	}
}

// waitOutput waits until ok(stream so far) for p's Output stream and
// returns the stream. It fails the test if p becomes final first.
func waitOutput(ctx context.Context, t testing.TB, p *proc.Process, what string, ok func(string) bool) string {
	t.Helper()
	for {
		// Everything retained, head and tail (a read stops at a gap).
		var data []byte
		c := p.ReadSince(0, 0)
		for data = c.Data; c.Next < c.End; data = append(data, c.Data...) {
			c = p.ReadSince(c.Next, 0)
		}
		if ok(string(data)) {
			return string(data)
		}
		if c.EOF {
			t.Fatalf("%s became final without %s in its output %q (stderr %q)", p.ID(), what, data, p.Stderr().Text)
		}
		if err := p.WaitOutput(ctx, c.End); err != nil {
			t.Fatalf("WaitOutput(%d) = %v waiting for %s; output %q", c.End, err, what, data)
		}
	}
}

// waitLine waits until a line of p's output matches re and returns it.
func waitLine(ctx context.Context, t testing.TB, p *proc.Process, re *regexp.Regexp) string {
	t.Helper()
	line, err := p.WaitFor(ctx, re, true)
	if err != nil {
		t.Fatalf("%s: WaitFor(%v) = %v; output %q", p.ID(), re, err, p.Output().Text)
	}
	return line
}

// mockManager returns a Manager on mClock that is closed when the test
// ends, with proctest.CloseOnMock: Close can wait on the mock clock.
func mockManager(t *testing.T, mClock *quartz.Mock, opts proc.Options) *proc.Manager {
	t.Helper()
	opts.Clock = mClock
	return proctest.NewManager(t, opts)
}

// releaseTrapped waits for trap's next call, checks that its duration is
// want (what names the timer), and releases it.
func releaseTrapped(ctx context.Context, t testing.TB, trap *quartz.Trap, want time.Duration, what string) {
	t.Helper()
	call := trap.MustWait(ctx)
	if call.Duration != want {
		t.Errorf("%s of %v; want %v", what, call.Duration, want)
	}
	call.MustRelease(ctx)
}

// startTrapped runs m.Start(req) on another goroutine, because the start
// makes a clock call that trap catches; it checks the call's duration,
// releases it and returns the process.
func startTrapped(ctx context.Context, t *testing.T, m *proc.Manager, req proc.StartRequest, trap *quartz.Trap, want time.Duration) *proc.Process {
	t.Helper()
	type result struct {
		p   *proc.Process
		err error
	}
	ch := make(chan result, 1)
	go func() {
		p, err := m.Start(req)
		ch <- result{p, err}
	}()
	call := trap.MustWait(ctx)
	if call.Duration != want {
		t.Errorf("%v timer of %v; want %v", call.Tags, call.Duration, want)
	}
	call.MustRelease(ctx)
	r := recv(ctx, t, ch, "Start")
	if r.err != nil {
		t.Fatalf("Start(%+v) = %v", req, r.err)
	}
	return r.p
}

// --- scripted children and log files --------------------------------------
//
// The cv helpers: a child scripted by its arguments (cv-script, cvReq), and
// checks of log files and failing starts, shared by the tests of Run,
// StartOrGet (manager_test.go), WaitFor (waitfor_test.go) and LogPath
// (drain_test.go).

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

// waitEventBlocked calls w.WaitEvent(ctx, cursor) on a goroutine and
// returns once the call blocks; the channel gets its error. The goroutine
// ends when the call returns: the caller makes it (an event, a Close, the
// end of ctx).
func waitEventBlocked(ctx context.Context, w interface {
	WaitEvent(context.Context, int64) error
}, cursor int64) <-chan error {
	errc := make(chan error, 1)
	bctx := newCVBlockedCtx(ctx)
	go func() { errc <- w.WaitEvent(bctx, cursor) }()
	<-bctx.waiting.Done()
	return errc
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
