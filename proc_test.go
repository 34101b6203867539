package proc_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/quartz"
	"go.uber.org/goleak"

	"github.com/procvisor/proc"
	"github.com/procvisor/proc/proctest"
)

// The helpers every test file uses: helper processes, waiting, mock-clock
// driving. Per-OS parts (descriptor and goroutine counts, /proc, pidfds,
// cgroups) are in helpers_unix_test.go and helpers_linux_test.go.

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
	fn, ok := helpers[mode]
	if !ok {
		names := make([]string, 0, len(helpers))
		for name := range helpers {
			names = append(names, name)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "unknown helper %q; have %s\n", mode, strings.Join(names, ", "))
		return 2
	}
	return fn(args)
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
	timeout := 30 * time.Second
	if len(d) > 0 {
		timeout = d[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
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
