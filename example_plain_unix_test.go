//go:build unix

package proc_test

import (
	"context"
	"fmt"
	"time"

	"github.com/procvisor/proc"
)

// An agent's tool that runs a command for a language model: in a quiet
// environment (no pager, no colours, no credential prompts), without the
// host's secrets, and returning the output as plain text, so that the
// model reads neither escape sequences nor every redraw of a progress bar.
func Example_agentTool() {
	m := proc.NewManager(proc.Options{
		DropEnv: []string{"*_TOKEN", "*SECRET*", "AWS_*"},
	})
	defer m.Close()

	runTool := func(ctx context.Context, command string) string {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		snap, err := m.Run(ctx, proc.StartRequest{Command: command, NonInteractive: true})
		if err != nil {
			return "error: " + err.Error()
		}
		return fmt.Sprintf("exit code %d\n%s", *snap.Info.ExitCode, snap.Output.Plain())
	}

	fmt.Print(runTool(context.Background(),
		`for i in 25 50 75 100; do printf '\r\033[32mdownloading\033[0m %s%%' $i; done; echo; echo "NO_COLOR=$NO_COLOR PAGER=$PAGER"`))
	// Output:
	// exit code 0
	// downloading 100%
	// NO_COLOR=1 PAGER=cat
}
