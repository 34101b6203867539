//go:build linux && !proc_otherunix

// Activity is Linux-only, so its examples are here rather than in
// example_test.go (which every Unix runs).

package proc_test

import (
	"context"
	"fmt"
	"log"
	"regexp"
	"time"

	"github.com/procvisor/proc"
)

// The agent loop: start a command, then wait for whichever comes first of
// new output, the command waiting for input, or the final record. A model
// would see the output and decide the answer; here the answer is fixed.
func ExampleProcess_WaitInput() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{
		Command: `printf 'name? '; read name; echo "hello $name"`,
		Stdin:   true,
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var cursor int64
	for {
		// Both waits end when the record is final; the first to return
		// cancels the other, and both are joined before the next round.
		round, stop := context.WithCancel(ctx)
		events := make(chan string, 2) // one send per waiter
		go func() {
			if p.WaitOutput(round, cursor) == nil {
				events <- "output"
				return
			}
			events <- ""
		}()
		go func() {
			if p.WaitInput(round) == nil {
				events <- "input"
				return
			}
			events <- ""
		}()
		event := <-events
		stop()
		<-events

		cursor = p.ReadSince(cursor, 0).Next // what a model would read
		switch {
		case !p.Info().Running:
			snap := p.Snapshot()
			fmt.Printf("final: exit %d: %q\n", *snap.Info.ExitCode, snap.Output.Text)
			return
		case event == "input":
			fmt.Println("the command waits for input; answering Ada")
			if _, err := p.Write([]byte("Ada\n")); err != nil {
				log.Fatal(err)
			}
		case ctx.Err() != nil:
			fmt.Println("gave up:", ctx.Err())
			return
		}
	}
	// Output:
	// the command waits for input; answering Ada
	// final: exit 0: "name? hello Ada\n"
}

// Which ports did the dev server open? Activity lists the sockets the
// tree's members listen on, with the member that holds each. (Not run as a
// test: it needs python3.)
func ExampleProcess_Activity() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{Args: []string{"python3", "-u", "-m", "http.server", "0"}})
	if err != nil {
		log.Fatal(err)
	}
	// The server says it serves once it listens.
	if _, err := p.WaitFor(context.Background(), regexp.MustCompile("^Serving"), true); err != nil {
		log.Fatal(err)
	}
	a, err := p.Activity()
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range a.Listeners {
		fmt.Printf("%s %s (port %d, pid %d)\n", l.Network, l.Address, l.Port, l.PID)
	}
	// Prints, for example, "tcp6 [::]:38451 (port 38451, pid 12345)".
}
