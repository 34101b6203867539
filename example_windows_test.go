//go:build windows

package proc_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"regexp"
	"strings"
	"time"

	"github.com/procvisor/proc"
)

// The Windows forms of the examples in example_unix_test.go, and one of
// Kill. Commands run through cmd.exe /C, lines end in "\r\n", and each
// process runs in a Job Object: Kill ends the job, so everything the
// command started ends with it; Windows has no signals, so no signal name
// is reported.

// A long output keeps its head and its tail, with exact accounting of what
// was left out.
func ExampleProcess_Snapshot() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{Command: "for /L %i in (1,1,1000) do @echo %i", HeadBytes: 8, TailBytes: 11})
	if err != nil {
		log.Fatal(err)
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
		log.Fatal(err)
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
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := p.WaitFor(ctx, regexp.MustCompile(`^started$`), true); err != nil {
		log.Fatal(err)
	}
	if err := p.Signal(proc.Kill); err != nil {
		log.Fatal(err)
	}
	_ = p.Wait(ctx)
	fmt.Printf("running %v, exit %d\n", p.Info().Running, *p.Info().ExitCode)
	// The job is empty: nothing is left to signal.
	fmt.Println(errors.Is(p.Signal(proc.Kill), proc.ErrNotRunning))
	// Output:
	// running false, exit 1
	// true
}

// Start a server, wait until it says it is ready, and let Close stop it.
// WaitFor drops the "\r" that ends a cmd.exe line.
func ExampleProcess_WaitFor() {
	m := proc.NewManager(proc.Options{})
	defer m.Close() // a no-op after the Close below; covers the early returns

	p, err := m.Start(proc.StartRequest{Command: "ping -n 2 127.0.0.1 >NUL& echo listening on :8080& ping -n 30 127.0.0.1 >NUL"})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	line, err := p.WaitFor(ctx, regexp.MustCompile(`^listening on :\d+$`), true)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(line)

	_ = m.Close() // ends the server's job and waits for it
	fmt.Printf("running %v\n", p.Info().Running)
	// Output:
	// listening on :8080
	// running false
}
