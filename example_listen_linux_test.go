//go:build linux && !proc_otherunix

package proc_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/procvisor/proc"
)

// A dev server is ready when it listens, not when it prints something:
// WaitListening returns its listener as soon as the tree opens it (a
// server that a script or a package manager starts as a grandchild
// counts), or ErrNotRunning if the server exits first, say on a port
// already taken. Port 0 waits for any port, for a server that picks its
// own. (Not run as a test: it needs python3.)
func ExampleProcess_WaitListening() {
	m := proc.NewManager(proc.Options{})
	defer m.Close()

	p, err := m.Start(proc.StartRequest{
		ID:         "dev-server",
		Args:       []string{"python3", "-m", "http.server", "0", "--bind", "127.0.0.1"},
		Background: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := p.WaitListening(ctx, 0)
	if err != nil {
		// ErrNotRunning: it exited; its output says why.
		fmt.Println("not ready:", err, p.Output().Plain())
		return
	}
	resp, err := http.Get("http://" + l.Address + "/")
	if err != nil {
		log.Fatal(err)
	}
	_ = resp.Body.Close()
	fmt.Println("ready on", l.Network, "port", l.Port, "pid", l.PID, "status", resp.StatusCode)
}
