package proc_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/procvisor/proc"
)

// helperEnv names the helper mode when the test binary runs as a child.
const helperEnv = "PROC_TEST_HELPER"

// helpers are the modes the test binary can run as a child process, by
// name. Test files add theirs in init. A helper gets its arguments and its
// return value is the exit code.
var helpers = map[string]func(args []string) int{}

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode, os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
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

// newManager returns a Manager that is closed when the test ends.
func newManager(t testing.TB, opts proc.Options) *proc.Manager {
	t.Helper()
	m := proc.NewManager(opts)
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	return m
}

// mustStart starts req or fails the test.
func mustStart(t testing.TB, m interface {
	Start(proc.StartRequest) (*proc.Process, error)
}, req proc.StartRequest) *proc.Process {
	t.Helper()
	p, err := m.Start(req)
	if err != nil {
		t.Fatalf("Start(%+v) = %v", req, err)
	}
	return p
}

// waitFinal waits until p is final and returns its snapshot.
func waitFinal(ctx context.Context, t testing.TB, p *proc.Process) proc.Snapshot {
	t.Helper()
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait(%s) = %v; output so far %q", p.ID(), err, p.Output().Text)
	}
	return p.Snapshot()
}

// exitCode returns the exit code of a final info, failing if there is none.
func exitCode(t testing.TB, info proc.Info) int {
	t.Helper()
	if info.ExitCode == nil {
		t.Fatalf("info %s has no exit code (running=%v)", info.ID, info.Running)
	}
	return *info.ExitCode
}
