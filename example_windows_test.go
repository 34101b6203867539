//go:build windows

package proc_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/procvisor/proc"
)

// The Windows forms of the examples in example_test.go. Commands run
// through cmd.exe /C, lines end in "\r\n", and each process runs in a Job
// Object: Kill ends the job, so everything the command started ends with
// it; Windows has no signals, so no signal name is reported.

// The common path: start a command, wait until its record is final, read
// its status and output.
func Example() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{Args: []string{"cmd.exe", "/C", "echo", "hello"}})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	if err := p.Wait(context.Background()); err != nil {
		fmt.Println("wait:", err)
		return
	}
	snap := p.Snapshot()
	fmt.Printf("exit %d: %q\n", *snap.Info.ExitCode, snap.Output.Text)
	// Output: exit 0: "hello\r\n"
}

// Commands run through Options.Shell (cmd.exe /C) as written; stdout and
// stderr share one buffer in the order written unless SeparateStderr is
// set.
func ExampleManager_Start() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{Command: "echo out& echo err>&2& exit 3"})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	_ = p.Wait(context.Background())
	fmt.Printf("exit %d: %q\n", *p.Info().ExitCode, p.Output().Text)
	// Output: exit 3: "out\r\nerr\r\n"
}

// A long output keeps its head and its tail, with exact accounting of what
// was left out.
func ExampleProcess_Snapshot() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{Command: "for /L %i in (1,1,1000) do @echo %i", HeadBytes: 8, TailBytes: 11})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	_ = p.Wait(context.Background())
	snap := p.Snapshot() // Info first, then Output: never stale output with a final status
	fmt.Println(strings.ReplaceAll(snap.Output.Text, "\r", ""))
	t := snap.Output.Truncation
	fmt.Printf("written %d, kept %d, omitted %d\n", t.OriginalBytes, t.RetainedBytes, t.OmittedBytes)
	// Output:
	// 1
	// 2
	// 3
	// ... [omitted 4874 bytes] ...
	// 999
	// 1000
	//
	// written 4893, kept 19, omitted 4874
}

// A timeout ends the job (CTRL_BREAK first where the child shares our
// console, then the job after KillGrace) and reports exit code 124.
func ExampleStartRequest_timeout() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{Command: "echo started& ping -n 30 127.0.0.1 >NUL", Timeout: 2 * time.Second})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	_ = p.Wait(context.Background())
	info := p.Info()
	fmt.Printf("exit %d, timed out %v: %q\n", *info.ExitCode, info.TimedOut, p.Output().Text)
	// Output: exit 124, timed out true: "started\r\n"
}

// Kill ends the whole Job Object: cmd.exe and the ping it started.
func ExampleProcess_Signal() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{Command: "echo started& ping -n 30 127.0.0.1 >NUL"})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := p.WaitFor(ctx, regexp.MustCompile(`^started$`), true); err != nil {
		fmt.Println("wait for:", err)
		return
	}
	if err := p.Signal(proc.Kill); err != nil {
		fmt.Println("kill:", err)
		return
	}
	_ = p.Wait(ctx)
	fmt.Printf("running %v, exit %d\n", p.Info().Running, *p.Info().ExitCode)
	// The job is empty: nothing is left to signal.
	fmt.Println(errors.Is(p.Signal(proc.Kill), proc.ErrNotRunning))
	// Output:
	// running false, exit 1
	// true
}

// A Scope is one owner's view: another owner's process does not exist for
// it.
func ExampleManager_Scope() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	alice, bob := m.Scope("alice"), m.Scope("bob")
	p, err := alice.Start(proc.StartRequest{Command: "rem"})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	_, err = bob.Get(p.ID())
	fmt.Println("bob sees alice's process:", !errors.Is(err, proc.ErrNotFound))
	_, err = alice.Get(p.ID())
	fmt.Println("alice sees it:", err == nil)
	// Output:
	// bob sees alice's process: false
	// alice sees it: true
}

// A follower streams the output with cursor reads while the command runs.
func ExampleProcess_ReadSince() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{Command: "for %i in (1 2 3) do @echo line %i"})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	ctx := context.Background()
	var got strings.Builder
	var cursor int64
	for {
		if err := p.WaitOutput(ctx, cursor); err != nil {
			fmt.Println("wait:", err)
			return
		}
		c := p.ReadSince(cursor, 0)
		got.Write(c.Data)
		if c.Lost > 0 {
			fmt.Printf("[lost %d bytes]\n", c.Lost)
		}
		cursor = c.Next
		if c.EOF {
			break
		}
	}
	fmt.Print(got.String())
	// Output:
	// line 1
	// line 2
	// line 3
}

// Run is the one-line way to run a command to its end, as a unit test
// does.
func ExampleManager_Run() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	snap, err := m.Run(ctx, proc.StartRequest{Command: "echo built& exit 2"})
	if err != nil {
		fmt.Println("run:", err)
		return
	}
	fmt.Printf("exit %d: %q\n", *snap.Info.ExitCode, snap.Output.Text)
	// Output: exit 2: "built\r\n"
}

// Start a server, wait until it says it is ready, and let Close stop it.
// WaitFor drops the "\r" that ends a cmd.exe line.
func ExampleProcess_WaitFor() {
	m := proc.NewManager(proc.Options{})
	defer m.Close() // a no-op after the Close below; covers the early returns

	p, err := m.Start(proc.StartRequest{Command: "ping -n 2 127.0.0.1 >NUL& echo listening on :8080& ping -n 30 127.0.0.1 >NUL"})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	line, err := p.WaitFor(ctx, regexp.MustCompile(`^listening on :\d+$`), true)
	if err != nil {
		fmt.Println("wait for:", err)
		return
	}
	fmt.Println(line)

	_ = m.Close() // ends the server's job and waits for it
	fmt.Printf("running %v\n", p.Info().Running)
	// Output:
	// listening on :8080
	// running false
}
