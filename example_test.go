//go:build unix

// The examples use Unix commands (sh, echo, seq, sleep);
// example_windows_test.go has their Windows forms.

package proc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/procvisor/proc"
)

// The common path: start a command, wait until its record is final, read
// its status and output.
func Example() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{Args: []string{"echo", "hello"}})
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
	// Output: exit 0: "hello\n"
}

// Commands run through Options.Shell (sh -c); stdout and stderr share one
// buffer in the order written unless SeparateStderr is set.
func ExampleManager_Start() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{Command: "echo out; echo err >&2; exit 3"})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	_ = p.Wait(context.Background())
	fmt.Printf("exit %d: %q\n", *p.Info().ExitCode, p.Output().Text)
	// Output: exit 3: "out\nerr\n"
}

// A long output keeps its head and its tail, with exact accounting of what
// was left out.
func ExampleProcess_Snapshot() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{Command: "seq 1 1000", HeadBytes: 8, TailBytes: 9})
	if err != nil {
		fmt.Println("start:", err)
		return
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
		fmt.Println("start:", err)
		return
	}
	_ = p.Wait(context.Background())
	info := p.Info()
	fmt.Printf("exit %d, timed out %v, signal %s: %q\n", *info.ExitCode, info.TimedOut, info.Signal, p.Output().Text)
	// Output: exit 124, timed out true, signal SIGTERM: "started\n"
}

// A Scope is one owner's view: another owner's process does not exist for
// it.
func ExampleManager_Scope() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	alice, bob := m.Scope("alice"), m.Scope("bob")
	p, err := alice.Start(proc.StartRequest{Args: []string{"true"}})
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
// A reader that falls behind a long output learns how many bytes it lost.
func ExampleProcess_ReadSince() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{Command: "for i in 1 2 3; do echo line $i; done"})
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

// An interactive session: write to the child's stdin, close it, and read
// what it answered.
func ExampleProcess_Write() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{Command: "while read name; do echo hello $name; done", Stdin: true})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	for _, name := range []string{"ada", "grace"} {
		if _, err := p.Write([]byte(name + "\n")); err != nil {
			fmt.Println("write:", err)
			return
		}
	}
	_ = p.CloseStdin() // the loop sees end-of-file and the shell exits
	_ = p.Wait(context.Background())
	fmt.Print(p.Output().Text)
	// Output:
	// hello ada
	// hello grace
}

// Run is the one-line way to run a command to its end, as a unit test
// does. If ctx ended first, the error wraps ErrRunning and the process is
// still running: re-attach by snap.Info.ID.
func ExampleManager_Run() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	snap, err := m.Run(ctx, proc.StartRequest{Command: "echo built; exit 2"})
	if err != nil {
		fmt.Println("run:", err)
		return
	}
	fmt.Printf("exit %d: %q\n", *snap.Info.ExitCode, snap.Output.Text)
	// Output: exit 2: "built\n"
}

// Start a server, wait until it says it is ready, and let Close stop it.
// fromStart is true so that a line printed before WaitFor is called still
// counts.
func ExampleProcess_WaitFor() {
	m := proc.NewManager(proc.Options{})
	defer m.Close() // a no-op after the Close below; covers the early returns

	p, err := m.Start(proc.StartRequest{Command: "sleep 0.1; echo 'listening on :8080'; sleep 30"})
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

	_ = m.Close() // terminates the server's process group and waits for it
	info := p.Info()
	fmt.Printf("running %v, signal %s\n", info.Running, info.Signal)
	// Output:
	// listening on :8080
	// running false, signal SIGTERM
}

// StartOrGet makes a retried request idempotent: the second call with the
// same ID and command finds the first record instead of starting again.
func ExampleManager_StartOrGet() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	req := proc.StartRequest{ID: "build-42", Command: "echo built"}
	for range 2 {
		p, started, err := m.StartOrGet(req)
		if err != nil {
			fmt.Println("start:", err)
			return
		}
		if err := p.Wait(context.Background()); err != nil {
			fmt.Println("wait:", err)
			return
		}
		fmt.Printf("started %v: %s", started, p.Output().Text)
	}
	// The same ID with another command is a different request.
	_, _, err := m.StartOrGet(proc.StartRequest{ID: "build-42", Command: "echo other"})
	fmt.Println(errors.Is(err, proc.ErrDuplicateID))
	// Output:
	// started true: built
	// started false: built
	// true
}

// A HeadTailBuffer is the output buffer of every process, usable on its
// own: it keeps the first and last bytes, counts what it dropped, and
// renders the gap as a marker.
func ExampleHeadTailBuffer() {
	b := proc.NewHeadTailBuffer(7, 7, 0) // 7 bytes of head, 7 of tail
	for i := 1; i <= 6; i++ {
		fmt.Fprintf(b, "line %d\n", i)
	}
	b.Finish()
	out := b.Output()
	fmt.Print(out.Text)
	fmt.Printf("\nwritten %d, kept %d, omitted %d\n",
		out.Truncation.OriginalBytes, out.Truncation.RetainedBytes, out.Truncation.OmittedBytes)
	// Output:
	// line 1
	//
	// ... [omitted 28 bytes] ...
	// line 6
	//
	// written 42, kept 14, omitted 28
}

// ParseSignal reads a signal name as a user or a model types it.
func ExampleParseSignal() {
	for _, name := range []string{"SIGTERM", "int", "Kill", "HUP"} {
		sig, err := proc.ParseSignal(name)
		if err != nil {
			fmt.Printf("%s: invalid: %v\n", name, errors.Is(err, proc.ErrInvalid))
			continue
		}
		fmt.Printf("%s: %s\n", name, sig)
	}
	// Output:
	// SIGTERM: terminate
	// int: interrupt
	// Kill: kill
	// HUP: invalid: true
}

// A service that logs through log/slog hands the manager its handler; the
// manager's diagnostics then arrive as ordinary records, with the logger's
// name and the fields as attributes.
func ExampleStdlibLogger() {
	// A text handler without the time, so that the output is stable.
	h := slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	})
	m := proc.NewManager(proc.Options{
		Logger: proc.StdlibLogger(h), // in a service: slog.Default().Handler()
		UpdateEnv: func([]string) ([]string, error) {
			return nil, errors.New("secret store unreachable")
		},
	})
	defer m.Close()

	snap, err := m.Run(context.Background(), proc.StartRequest{ID: "build", Args: []string{"true"}})
	if err != nil {
		fmt.Println("run:", err)
		return
	}
	fmt.Println("exit", *snap.Info.ExitCode)
	// Output:
	// level=WARN msg="update environment failed; keeping the current one" logger=proc id=build error="secret store unreachable"
	// exit 0
}

// A transport decodes a request body straight into a StartRequest: the JSON
// names are snake_case, and durations are integers of nanoseconds.
func ExampleStartRequest_json() {
	body := `{"args":["sh","-c","echo out; echo err >&2"],"separate_stderr":true,"timeout":5000000000}`
	var req proc.StartRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		fmt.Println("decode:", err)
		return
	}
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	snap, err := m.Run(context.Background(), req)
	if err != nil {
		fmt.Println("run:", err)
		return
	}
	fmt.Printf("timeout %v, exit %d, stdout %q, stderr %q\n",
		req.Timeout, *snap.Info.ExitCode, snap.Output.Text, snap.Stderr.Text)
	// Output: timeout 5s, exit 0, stdout "out\n", stderr "err\n"
}

// OutputTee streams every byte to a transport as the pump reads it, in
// order and without loss; a slow writer holds the child back, as a pipe
// would. Here the "transport" upper-cases what it gets.
func ExampleStartRequest_outputTee() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	var streamed strings.Builder
	p, err := m.Start(proc.StartRequest{
		Command:   "echo one; echo two",
		OutputTee: teeFunc(func(b []byte) { streamed.WriteString(strings.ToUpper(string(b))) }),
	})
	if err != nil {
		fmt.Println("start:", err)
		return
	}
	if err := p.Wait(context.Background()); err != nil {
		fmt.Println("wait:", err)
		return
	}
	// The tee's Writes all happened before the record became final.
	fmt.Print(streamed.String())
	fmt.Printf("tee error: %q\n", p.Info().TeeError)
	// Output:
	// ONE
	// TWO
	// tee error: ""
}

// teeFunc adapts a function to io.Writer for ExampleStartRequest_outputTee.
type teeFunc func([]byte)

func (f teeFunc) Write(b []byte) (int, error) {
	f(b)
	return len(b), nil
}
