package proc_test

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/procvisor/proc"
)

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
