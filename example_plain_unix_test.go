//go:build unix

package proc_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/procvisor/proc"
)

// An agent's tool that runs a command for a language model: in a quiet
// environment (no pager, no colours, no credential prompts), without the
// host's secrets (SecretEnv drops OPENAI_API_KEY, GH_TOKEN, DB_PASSWORD
// and the like; Info.DroppedEnv names them, never their values), ended
// by Timeout however long the command would run, and returning the exit
// code and the output as plain text, so that the model reads neither
// escape sequences nor every redraw of a progress bar.
func Example_agentTool() {
	m := proc.NewManager(proc.Options{DropEnv: proc.SecretEnv})
	defer m.Close()

	runTool := func(ctx context.Context, command string, timeout time.Duration) string {
		// Timeout ends the command (its whole tree) on its own; a ctx that
		// ends first makes Run return while the command still runs.
		snap, err := m.Run(ctx, proc.StartRequest{Command: command, NonInteractive: true, Timeout: timeout})
		if err != nil {
			return "error: " + err.Error()
		}
		var b strings.Builder
		if snap.Info.TimedOut {
			fmt.Fprintf(&b, "timed out after %v\n", timeout)
		}
		fmt.Fprintf(&b, "exit code %d\n%s", *snap.Info.ExitCode, snap.Output.Plain())
		return b.String()
	}

	ctx := context.Background()
	fmt.Print(runTool(ctx,
		`for i in 25 50 75 100; do printf '\r\033[32mdownloading\033[0m %s%%' $i; done; echo; echo "NO_COLOR=$NO_COLOR PAGER=$PAGER"`,
		time.Minute))
	fmt.Print(runTool(ctx, `sleep 60`, 100*time.Millisecond))
	// Output:
	// exit code 0
	// downloading 100%
	// NO_COLOR=1 PAGER=cat
	// timed out after 100ms
	// exit code 124
}

// NewPlainWriter makes a stream plain as it comes. Here a loop follows a
// command's output chunk by chunk; the redraws of its progress bar may be
// split anywhere between two reads, and the writer keeps the unfinished
// line until its newline, so the reader sees "100%", never "25%50%".
func ExampleNewPlainWriter() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{
		Command: `for i in 25 50 75 100; do printf '\r\033[1m%s%%\033[0m' $i; sleep 0.01; done; echo; echo done`,
	})
	if err != nil {
		log.Fatal(err)
	}
	plain := proc.NewPlainWriter(os.Stdout)
	ctx := context.Background()
	var cursor int64
	for {
		if err := p.WaitOutput(ctx, cursor); err != nil {
			log.Fatal(err)
		}
		c := p.ReadSince(cursor, 0)
		if _, err := plain.Write(c.Data); err != nil {
			log.Fatal(err)
		}
		cursor = c.Next
		if c.EOF {
			break
		}
	}
	// Close writes a last line that has no newline; there is none here.
	if err := plain.Close(); err != nil {
		fmt.Println("close:", err)
	}
	// Output:
	// 100%
	// done
}

// A PlainWriter as a request's OutputTee gets every byte as the pump
// reads it, and hands on plain lines: a live view of a command for a
// model or a log. Close it once the record is final, for the last line.
func ExampleNewPlainWriter_outputTee() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	var live strings.Builder
	tee := proc.NewPlainWriter(&live)
	p, err := m.Start(proc.StartRequest{
		Command:   `printf 'compiling\r\033[Kcompiled\nlinking 50%%\rlinking 100%%'`,
		OutputTee: tee,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Wait(context.Background()); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("before Close: %q\n", live.String())
	_ = tee.Close()
	fmt.Printf("after Close:  %q\n", live.String())
	// Output:
	// before Close: "compiled\n"
	// after Close:  "compiled\nlinking 100%"
}
