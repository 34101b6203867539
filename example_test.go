// The examples every system runs: their commands read alike to sh -c and
// to cmd.exe /C (Options.Shell), and the "\r\n" that ends a Windows line
// is "\n" to an example's output check. example_unix_test.go and
// example_windows_test.go hold the examples whose commands differ.

package proc_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/procvisor/proc"
)

// The common path: start a command, wait until its record is final, read
// its status and output.
func Example() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{Command: "echo hello"})
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Wait(context.Background()); err != nil {
		log.Fatal(err)
	}
	snap := p.Snapshot()
	fmt.Printf("exit %d: %s", *snap.Info.ExitCode, snap.Output.Text)
	// Output: exit 0: hello
}

// Commands run through Options.Shell (sh -c, or cmd.exe /C on Windows);
// stdout and stderr share one buffer in the order written unless
// SeparateStderr is set.
func ExampleManager_Start() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{Command: "echo out&& echo err>&2&& exit 3"})
	if err != nil {
		log.Fatal(err)
	}
	_ = p.Wait(context.Background())
	fmt.Printf("exit %d:\n%s", *p.Info().ExitCode, p.Output().Text)
	// Output:
	// exit 3:
	// out
	// err
}

// A Scope is one owner's view: another owner's process does not exist for
// it.
func ExampleManager_Scope() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	alice, bob := m.Scope("alice"), m.Scope("bob")
	p, err := alice.Start(proc.StartRequest{Command: "exit 0"})
	if err != nil {
		log.Fatal(err)
	}
	_, err = bob.Get(p.ID())
	fmt.Println("bob sees alice's process:", !errors.Is(err, proc.ErrNotFound))
	_, err = alice.Get(p.ID())
	fmt.Println("alice sees it:", err == nil)
	// Output:
	// bob sees alice's process: false
	// alice sees it: true
}

// A poller reads the output with cursor reads while the command runs, and
// learns how many bytes it lost when it falls behind a long output. A
// reader that wants every byte uses Process.Follow instead.
func ExampleProcess_ReadSince() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{Command: "echo line 1&& echo line 2&& echo line 3"})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	var got strings.Builder
	var cursor int64
	for {
		if err := p.WaitOutput(ctx, cursor); err != nil {
			log.Fatal(err)
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
// does. If ctx ended first, the error wraps ErrRunning and the process is
// still running: re-attach by snap.Info.ID.
func ExampleManager_Run() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	snap, err := m.Run(ctx, proc.StartRequest{Command: "echo built&& exit 2"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("exit %d: %s", *snap.Info.ExitCode, snap.Output.Text)
	// Output: exit 2: built
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
			log.Fatal(err)
		}
		if err := p.Wait(context.Background()); err != nil {
			log.Fatal(err)
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
	// A text handler of warnings without the time, so that the output is
	// stable (where cgroups cannot be used, an INFO record says so).
	h := slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelWarn,
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

	snap, err := m.Run(context.Background(), proc.StartRequest{ID: "build", Command: "exit 0"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exit", *snap.Info.ExitCode)
	// Output:
	// level=WARN msg="update environment failed; keeping the current one" logger=proc id=build error="secret store unreachable"
	// exit 0
}

// OutputTee streams every byte to a transport as the pump reads it, in
// order and without loss; a slow writer holds the child back, as a pipe
// would. Here the "transport" upper-cases what it gets.
func ExampleStartRequest_outputTee() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	var streamed strings.Builder
	p, err := m.Start(proc.StartRequest{
		Command:   "echo one&& echo two",
		OutputTee: teeFunc(func(b []byte) { streamed.WriteString(strings.ToUpper(string(b))) }),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Wait(context.Background()); err != nil {
		log.Fatal(err)
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
