//go:build unix

package proctest_test

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/coder/quartz"

	"github.com/procvisor/proc"
	"github.com/procvisor/proc/proctest"
)

// A test closes a Manager that runs on a mock clock. The command ignores
// SIGTERM, so Close waits the kill grace (a minute of mock time) before
// it kills the group; CloseOnMock advances the clock through that wait.
func ExampleCloseOnMock() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tb := &exampleT{}
	defer tb.cleanup()
	mClock := quartz.NewMock(tb) // in a test: quartz.NewMock(t)
	start := mClock.Now()
	m := proc.NewManager(proc.Options{Clock: mClock, KillGrace: time.Minute})
	p, err := m.Start(proc.StartRequest{Command: `trap "" TERM; echo ready; sleep 60`})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	if _, err := p.WaitFor(ctx, regexp.MustCompile("ready"), true); err != nil {
		fmt.Println("wait for ready:", err)
		return
	}

	err = proctest.CloseOnMock(ctx, mClock, m)
	info := p.Info()
	fmt.Printf("Close: %v; exit %d, %s; the grace passed: %v\n", err, *info.ExitCode, info.Signal, mClock.Since(start) >= time.Minute)
	// Output: Close: <nil>; exit 137, SIGKILL; the grace passed: true
}

// exampleT stands in for the *testing.T a test gives quartz.NewMock. It
// runs the mock's cleanups, as a test does when it ends: a fired mock
// timer whose channel nobody read holds a goroutine until then.
type exampleT struct {
	cleanups []func()
	failed   bool // Error or Errorf was called
}

func (*exampleT) Helper()                        {}
func (*exampleT) Log(...any)                     {}
func (*exampleT) Logf(string, ...any)            {}
func (e *exampleT) Error(args ...any)            { e.failed = true; fmt.Println(args...) }
func (e *exampleT) Errorf(f string, args ...any) { e.failed = true; fmt.Printf(f+"\n", args...) }
func (*exampleT) Fatal(args ...any)              { panic(fmt.Sprint(args...)) }
func (*exampleT) Fatalf(f string, args ...any)   { panic(fmt.Sprintf(f, args...)) }
func (e *exampleT) Cleanup(f func())             { e.cleanups = append(e.cleanups, f) }

func (e *exampleT) cleanup() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
}
