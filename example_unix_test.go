//go:build unix

// The Unix forms of the examples whose commands sh and cmd.exe do not read
// alike, and of those that show signals; example_windows_test.go has the
// Windows forms, example_test.go the examples every system runs.

package proc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"regexp"
	"slices"
	"time"

	"github.com/procvisor/proc"
)

// A long output keeps its head and its tail, with exact accounting of what
// was left out.
func ExampleProcess_Snapshot() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{Command: "seq 1 1000", HeadBytes: 8, TailBytes: 9})
	if err != nil {
		log.Fatal(err)
	}
	_ = p.Wait(context.Background())
	snap := p.Snapshot() // Info first, then Output: never stale output with a final status
	fmt.Println(snap.Output.Text)
	t := snap.Output.Truncation
	fmt.Printf("written %d, kept %d, omitted %d\n", t.OriginalBytes, t.RetainedBytes, t.OmittedBytes)
	// Output:
	// 1
	// 2
	// 3
	// 4
	//
	// ... [omitted 3876 bytes] ...
	// 999
	// 1000
	//
	// written 3893, kept 17, omitted 3876
}

// A timeout terminates the process group, kills it after KillGrace if it
// is still there, and reports exit code 124.
func ExampleStartRequest_timeout() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{Command: "echo started; sleep 30", Timeout: 100 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	_ = p.Wait(context.Background())
	info := p.Info()
	fmt.Printf("exit %d, timed out %v, signal %s: %q\n", *info.ExitCode, info.TimedOut, info.Signal, p.Output().Text)
	// Output: exit 124, timed out true, signal SIGTERM: "started\n"
}

// An interactive session: write to the child's stdin, close it, and read
// what it answered.
func ExampleProcess_Write() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{Command: "while read name; do echo hello $name; done", Stdin: true})
	if err != nil {
		log.Fatal(err)
	}
	for _, name := range []string{"ada", "grace"} {
		if _, err := p.Write([]byte(name + "\n")); err != nil {
			log.Fatal(err)
		}
	}
	_ = p.CloseStdin() // the loop sees end-of-file and the shell exits
	_ = p.Wait(context.Background())
	fmt.Print(p.Output().Text)
	// Output:
	// hello ada
	// hello grace
}

// Start a server, wait until it says it is ready, and let Close stop it.
// fromStart is true so that a line printed before WaitFor is called still
// counts.
func ExampleProcess_WaitFor() {
	m := proc.NewManager(proc.Options{})
	defer m.Close() // a no-op after the Close below; covers the early returns

	p, err := m.Start(proc.StartRequest{Command: "sleep 0.1; echo 'listening on :8080'; sleep 30"})
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

	_ = m.Close() // terminates the server's process group and waits for it
	info := p.Info()
	fmt.Printf("running %v, signal %s\n", info.Running, info.Signal)
	// Output:
	// listening on :8080
	// running false, signal SIGTERM
}

// A transport decodes a request body straight into a StartRequest: the JSON
// names are snake_case, and durations are integers of nanoseconds.
func ExampleStartRequest_json() {
	body := `{"args":["sh","-c","echo out; echo err >&2"],"separate_stderr":true,"timeout":5000000000}`
	var req proc.StartRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		log.Fatal(err)
	}
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	snap, err := m.Run(context.Background(), req)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("timeout %v, exit %d, stdout %q, stderr %q\n",
		req.Timeout, *snap.Info.ExitCode, snap.Output.Text, snap.Stderr.Text)
	// Output: timeout 5s, exit 0, stdout "out\n", stderr "err\n"
}

// An agent loop: start three background commands, end the turn, and sleep
// in WaitEvent until one of them needs attention: the build finished, the
// server printed that it is ready, the tests failed. One cursor, no
// goroutine per command.
func ExampleManager_WaitEvent() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	for _, req := range []proc.StartRequest{
		{ID: "build", Command: "echo compiling; echo built"},
		{ID: "server", Command: "echo starting; echo listening on :8080; exec sleep 60",
			Watch: []proc.Watch{{Name: "ready", Pattern: `^listening on (\S+)$`, Once: true}}},
		{ID: "tests", Command: "echo ok TestA; echo FAIL TestB; exit 1",
			Watch: []proc.Watch{{Name: "failure", Pattern: `^FAIL `}}},
	} {
		if _, err := m.Start(req); err != nil {
			log.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var cursor int64
	var attention []string
	for len(attention) < 4 {
		if err := m.WaitEvent(ctx, cursor); err != nil {
			log.Fatal(err)
		}
		evs, next, lost := m.Events(cursor, 0)
		if lost > 0 {
			fmt.Println("lost", lost, "events: look at m.List()")
		}
		cursor = next
		for _, ev := range evs {
			switch ev.Kind {
			case proc.EventMatched:
				attention = append(attention, fmt.Sprintf("%s: %s: %s", ev.ID, ev.Watch, ev.Line))
			case proc.EventFinal:
				attention = append(attention, fmt.Sprintf("%s: exited %d", ev.ID, *ev.Info.ExitCode))
			}
		}
	}
	// The commands run side by side: the order of their events varies.
	slices.Sort(attention)
	for _, a := range attention {
		fmt.Println(a)
	}
	// Output:
	// build: exited 0
	// server: ready: listening on :8080
	// tests: exited 1
	// tests: failure: FAIL TestB
}
