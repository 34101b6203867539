//go:build linux && !proc_otherunix

package proc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/quartz"
	"golang.org/x/sys/unix"

	"github.com/procvisor/proc"
)

// activity-listen NETWORK ADDRESS listens (TCP) or binds (UDP), also
// opens a connected socket of the same kind (which is no listener),
// prints "listening PID ADDR" and waits to be killed.
var _ = helper("activity-listen", func(args []string) int {
	network, address := args[0], args[1]
	var addr net.Addr
	var client net.Conn
	var err error
	if strings.HasPrefix(network, "udp") {
		var c net.PacketConn
		if c, err = net.ListenPacket(network, address); err == nil {
			addr = c.LocalAddr()
			client, err = net.Dial(network, loopbackOf(c.LocalAddr().(*net.UDPAddr).AddrPort().Port(), network))
		}
	} else {
		var l net.Listener
		if l, err = net.Listen(network, address); err == nil {
			addr = l.Addr()
			client, err = net.Dial(network, loopbackOf(l.Addr().(*net.TCPAddr).AddrPort().Port(), network))
		}
	}
	if err != nil {
		fmt.Println("listen:", err)
		return 3
	}
	defer client.Close()
	fmt.Printf("listening %d %s\n", os.Getpid(), addr)
	time.Sleep(time.Hour) // until the test's Manager stops it
	return 0
})

// loopbackOf is the loopback address of network at port.
func loopbackOf(port uint16, network string) string {
	if strings.HasSuffix(network, "6") {
		return fmt.Sprintf("[::1]:%d", port)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// startIn starts req in a Manager of mode (treeOptions: cgroup mode skips
// where cgroup v2 cannot be written).
func startIn(t *testing.T, mode treeMode, req proc.StartRequest) *proc.Process {
	t.Helper()
	return mustStart(t, newManager(t, treeOptions(t, mode)), req)
}

// waitActivity polls p's Activity until ok(it) and returns it; it fails
// the test when ctx ends first.
func waitActivity(ctx context.Context, t testing.TB, p *proc.Process, what string, ok func(proc.Activity) bool) proc.Activity {
	t.Helper()
	for {
		a, err := p.Activity()
		if err != nil {
			t.Fatalf("Activity() = %v", err)
		}
		if ok(a) {
			return a
		}
		if ctx.Err() != nil {
			t.Fatalf("waiting for %s: Activity() = %+v: %v; output %q", what, a, ctx.Err(), p.Output().Text)
		}
	}
}

// mustNotWait checks, several times over a short period, that p is not
// waiting for input: WaitInput looks every 100 ms and must see nothing
// before its deadline.
func mustNotWait(ctx context.Context, t *testing.T, p *proc.Process, what string) {
	t.Helper()
	short, cancel := context.WithTimeout(ctx, 700*time.Millisecond)
	defer cancel()
	if err := p.WaitInput(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%s: WaitInput() = %v; want the deadline (not waiting for input); output %q", what, err, p.Output().Text)
	}
	a, err := p.Activity()
	if err != nil || a.WaitingForInput {
		t.Fatalf("%s: Activity() = %+v, %v; want not waiting", what, a, err)
	}
}

// TestActivityWaitingForInput: a member blocked reading the stdin pipe or
// the terminal proc gave the record is waiting for input, whichever way it
// reads: read, poll or select, epoll, from the terminal as /dev/tty. A
// member that sleeps, spins, waits for a child, serves sockets, or reads a
// pipe proc did not give it (or stdin, where proc gave none) is not
// waiting for input.
func TestActivityWaitingForInput(t *testing.T) {
	t.Parallel()
	long := filepath.Join(t.TempDir(), "long.txt")
	if err := os.WriteFile(long, []byte(strings.Repeat("a line for the pager\n", 500)), 0o644); err != nil {
		t.Fatal(err)
	}
	// ready waits until a member that is not waiting for input is set up.
	type ready func(ctx context.Context, t *testing.T, p *proc.Process)
	readyLine := func(ctx context.Context, t *testing.T, p *proc.Process) {
		waitLine(ctx, t, p, regexp.MustCompile("^ready"))
	}
	listening := func(ctx context.Context, t *testing.T, p *proc.Process) {
		waitActivity(ctx, t, p, "a listener", func(a proc.Activity) bool { return len(a.Listeners) > 0 })
	}
	cases := []struct {
		name  string
		tool  string
		req   proc.StartRequest
		ready ready // nil: it waits for input
	}{
		{"sh-read", "", proc.StartRequest{Command: "read x", Stdin: true}, nil},
		{"sh-read-tty", "", proc.StartRequest{Command: "read x", TTY: true}, nil},
		{"grandchild-cat", "", proc.StartRequest{Command: "cat; echo done", Stdin: true}, nil},
		{"rm-i", "", proc.StartRequest{Command: `: >file && rm -i file`, Stdin: true}, nil},
		{"cat", "", proc.StartRequest{Args: []string{"cat"}, Stdin: true}, nil},
		{"python-input", "python3", proc.StartRequest{Args: []string{"python3", "-c", "input()"}, Stdin: true}, nil},
		{"python-input-tty", "python3", proc.StartRequest{Args: []string{"python3", "-c", "input()"}, TTY: true}, nil},
		{"python-select", "python3", proc.StartRequest{Args: []string{"python3", "-c", "import select, sys; select.select([sys.stdin], [], [])"}, Stdin: true}, nil},
		{"python-poll", "python3", proc.StartRequest{Args: []string{"python3", "-c", "import select; p = select.poll(); p.register(0, select.POLLIN); p.poll()"}, Stdin: true}, nil},
		{"python-poll-tty", "python3", proc.StartRequest{Args: []string{"python3", "-c", "import select; p = select.poll(); p.register(0, select.POLLIN); p.poll()"}, TTY: true}, nil},
		{"node-stdin", "node", proc.StartRequest{Args: []string{"node", "-e", `process.stdin.on("data", () => {})`}, Stdin: true}, nil},
		{"node-stdin-tty", "node", proc.StartRequest{Args: []string{"node", "-e", `process.stdin.on("data", () => {})`}, TTY: true}, nil},
		{"getpass-tty", "python3", proc.StartRequest{Args: []string{"python3", "-c", "import getpass; getpass.getpass()"}, TTY: true}, nil},
		{"bash-read-s-tty", "bash", proc.StartRequest{Args: []string{"bash", "-c", `read -s -p "Password: " x`}, TTY: true}, nil},
		{"less-tty", "less", proc.StartRequest{Args: []string{"less", long}, TTY: true}, nil},

		{"sleep", "", proc.StartRequest{Command: "echo ready; exec sleep 30", Stdin: true}, readyLine},
		{"sleep-tty", "", proc.StartRequest{Command: "echo ready; exec sleep 30", TTY: true}, readyLine},
		{"busy-loop", "", proc.StartRequest{Command: "echo ready; while :; do :; done", Stdin: true}, readyLine},
		{"shell-waits-child", "", proc.StartRequest{Command: "echo ready; sleep 30; echo done", Stdin: true}, readyLine},
		{"reads-another-pipe", "", proc.StartRequest{Command: "echo ready; sleep 30 | cat", Stdin: true}, readyLine},
		{"without-stdin", "", proc.StartRequest{Command: "echo ready; sleep 30 | cat"}, readyLine},
		{"python-http-server", "python3", proc.StartRequest{Args: []string{"python3", "-m", "http.server", "0", "--bind", "127.0.0.1"}, Stdin: true}, listening},
		{"node-server", "node", proc.StartRequest{Args: []string{"node", "-e", `require("net").createServer().listen(0, "127.0.0.1")`}, Stdin: true}, listening},
		{"node-server-tty", "node", proc.StartRequest{Args: []string{"node", "-e", `require("net").createServer().listen(0, "127.0.0.1")`}, TTY: true}, listening},
	}
	for _, mode := range treeModes {
		for _, tc := range cases {
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				needTool(t, tc.tool)
				ctx := testCtx(t)
				req := tc.req
				req.WorkDir = t.TempDir()
				p := startIn(t, mode, req)
				if tc.ready != nil {
					tc.ready(ctx, t, p)
					mustNotWait(ctx, t, p, tc.name)
					return
				}
				if err := p.WaitInput(ctx); err != nil {
					t.Fatalf("WaitInput() = %v; output %q", err, p.Output().Text)
				}
				a, err := p.Activity()
				if err != nil || !a.WaitingForInput || a.Members < 1 {
					t.Errorf("Activity() = %+v, %v; want waiting for input, members >= 1", a, err)
				}
			})
		}
	}
}

// TestActivityBlockedWriting: a shell blocked writing to its terminal
// (output stopped with ^S) is not waiting for input, though the terminal
// it is blocked on is the record's; a moment before, reading it, it was.
func TestActivityBlockedWriting(t *testing.T) {
	t.Parallel()
	treeEachMode(t, func(t *testing.T, mode treeMode) {
		ctx := testCtx(t)
		p := startIn(t, mode, proc.StartRequest{Command: "read x; while :; do echo output; done", TTY: true, Stdin: true})
		if err := p.WaitInput(ctx); err != nil {
			t.Fatalf("WaitInput() = %v", err)
		}
		// ^S stops the terminal's output, then the line ends the read.
		if _, err := p.Write([]byte("\x13go\n")); err != nil {
			t.Fatalf("Write() = %v", err)
		}
		// The shell itself writes (echo is built in): wait until the
		// kernel shows it blocked in write(2) on its stdout.
		pid := p.Info().PID
		for blockedIn(pid) != unix.SYS_WRITE {
			if ctx.Err() != nil {
				t.Fatalf("the shell never blocked writing: %v", ctx.Err())
			}
		}
		mustNotWait(ctx, t, p, "blocked writing")
	})
}

// blockedIn returns the number of the system call pid is blocked in, or -1.
func blockedIn(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pid))
	if err != nil {
		return -1
	}
	nr, err := strconv.Atoi(strings.Fields(string(data))[0])
	if err != nil {
		return -1
	}
	return nr
}

// TestActivityMembers counts the tree's members as its owner lists them.
func TestActivityMembers(t *testing.T) {
	t.Parallel()
	treeEachMode(t, func(t *testing.T, mode treeMode) {
		ctx := testCtx(t)
		p := startIn(t, mode, proc.StartRequest{Command: "sleep 9 & sleep 9 & wait"})
		if a := waitActivity(ctx, t, p, "3 members", func(a proc.Activity) bool { return a.Members >= 3 }); a.Members != 3 {
			t.Fatalf("Activity().Members = %d; want 3", a.Members)
		}
		if err := p.Signal(proc.Kill); err != nil {
			t.Fatalf("Signal(Kill) = %v", err)
		}
		waitFinal(ctx, t, p)
		if a, err := p.Activity(); !errors.Is(err, proc.ErrNotRunning) {
			t.Errorf("Activity() of the final record = %+v, %v; want ErrNotRunning", a, err)
		}
		if err := p.WaitInput(ctx); !errors.Is(err, proc.ErrNotRunning) {
			t.Errorf("WaitInput() of the final record = %v; want ErrNotRunning", err)
		}
	})
}

// TestActivityListeners: a socket a member listens on is reported as soon
// as the listen returned, with its address, port and the member's PID, in
// the child and in a grandchild; connected sockets are not listeners.
func TestActivityListeners(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name             string
		network, address string // as the helper listens
		want             string // the Listener's Network
		wantHost         string // the host part of its Address
	}{
		{"tcp-loopback", "tcp4", "127.0.0.1:0", "tcp", "127.0.0.1"},
		{"tcp-wildcard", "tcp4", "0.0.0.0:0", "tcp", "0.0.0.0"},
		{"tcp6-wildcard", "tcp6", "[::]:0", "tcp6", "[::]"},
		{"tcp6-loopback", "tcp6", "[::1]:0", "tcp6", "[::1]"},
		{"udp-loopback", "udp4", "127.0.0.1:0", "udp", "127.0.0.1"},
		{"udp6-wildcard", "udp6", "[::]:0", "udp6", "[::]"},
	}
	for _, mode := range treeModes {
		for _, tc := range cases {
			for _, grandchild := range []bool{false, true} {
				name := mode.name + "/" + tc.name
				if grandchild {
					name += "/grandchild"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					ctx := testCtx(t)
					req := helperReq("activity-listen", tc.network, tc.address)
					if grandchild {
						req.Args = append([]string{"sh", "-c", `"$@" & wait`, "sh"}, req.Args...)
					}
					p := startIn(t, mode, req)
					line := waitLine(ctx, t, p, regexp.MustCompile(`^(listening|listen:) `))
					var pid int
					var addr string
					if _, err := fmt.Sscanf(line, "listening %d %s", &pid, &addr); err != nil {
						if strings.Contains(tc.network, "6") {
							t.Skipf("no IPv6 here: %s", line)
						}
						t.Fatalf("helper: %q", line)
					}
					// At once: the listen has returned.
					a, err := p.Activity()
					if err != nil {
						t.Fatalf("Activity() = %v", err)
					}
					_, port, _ := net.SplitHostPort(addr)
					want := proc.Listener{Network: tc.want, Address: tc.wantHost + ":" + port, PID: pid}
					want.Port, _ = strconv.Atoi(port)
					if len(a.Listeners) != 1 || a.Listeners[0] != want {
						t.Fatalf("Activity().Listeners = %+v; want [%+v]", a.Listeners, want)
					}
					if grandchild == (pid == p.Info().PID) {
						t.Errorf("listener PID %d, child PID %d: grandchild %v", pid, p.Info().PID, grandchild)
					}
					if want := 1 + btoi(grandchild); a.Members != want {
						t.Errorf("Activity().Members = %d; want %d", a.Members, want)
					}
				})
			}
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestActivityNoListeners: a tree without sockets lists none.
func TestActivityNoListeners(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	p := startIn(t, treeModes[0], proc.StartRequest{Command: "echo ready; exec sleep 30"})
	waitLine(ctx, t, p, regexp.MustCompile("^ready"))
	a, err := p.Activity()
	if err != nil || a.Listeners != nil || a.WaitingForInput || a.Members != 1 {
		t.Errorf("Activity() = %+v, %v; want 1 member, no listener, not waiting", a, err)
	}
}

// TestWaitInputMock drives WaitInput's polling with a mock clock: it looks
// at once, then at each tick of a ticker tagged "activity", "poll", and
// returns at the first look that finds the tree waiting; it returns
// ErrNotRunning when the record becomes final first, without a tick, and
// ctx.Err() when ctx ends. goleak (TestMain) checks that nothing is left.
func TestWaitInputMock(t *testing.T) {
	t.Parallel()
	// The shell first blocks opening a FIFO (no input wanted), and reads
	// its stdin only once the test wrote a line to the FIFO. start returns
	// the record, the FIFO, the mock clock and a trap on WaitInput's ticker.
	start := func(t *testing.T, command string) (*proc.Process, string, *quartz.Mock, *quartz.Trap) {
		fifo := filepath.Join(t.TempDir(), "fifo")
		if err := unix.Mkfifo(fifo, 0o600); err != nil {
			t.Fatalf("mkfifo: %v", err)
		}
		mClock := quartz.NewMock(t)
		m := mockManager(t, mClock, proc.Options{Containment: proc.ContainGroup})
		trap := mClock.Trap().NewTicker("activity", "poll")
		t.Cleanup(trap.Close) // before the Manager closes
		p := mustStart(t, m, proc.StartRequest{Command: command, Env: map[string]string{"FIFO": fifo}, Stdin: true})
		return p, fifo, mClock, trap
	}
	waitIn := func(ctx context.Context, p *proc.Process) <-chan error {
		errc := make(chan error, 1) // one sender
		// Ends with WaitInput, which the test ends one way or another.
		go func() { errc <- p.WaitInput(ctx) }()
		return errc
	}

	t.Run("input-at-a-tick", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		p, fifo, mClock, trap := start(t, `read x < "$FIFO"; echo got; read y`)
		errc := waitIn(ctx, p)
		call := trap.MustWait(ctx) // the first look found nothing
		if call.Duration <= 0 || call.Duration > 200*time.Millisecond {
			t.Errorf("WaitInput polls every %v; want at most 200ms, so that 250ms holds", call.Duration)
		}
		call.MustRelease(ctx)
		feedFifo(t, fifo)
		waitLine(ctx, t, p, regexp.MustCompile("^got"))
		// Wait until the shell reads its stdin; WaitInput cannot have
		// noticed, for it has not looked again.
		waitActivity(ctx, t, p, "the shell to read its stdin", func(a proc.Activity) bool { return a.WaitingForInput })
		select {
		case err := <-errc:
			t.Fatalf("WaitInput() = %v before a tick", err)
		default:
		}
		mClock.Advance(call.Duration).MustWait(ctx)
		if err := recv(ctx, t, errc, "WaitInput"); err != nil {
			t.Fatalf("WaitInput() = %v; want nil", err)
		}
	})

	t.Run("final-first", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		p, fifo, _, trap := start(t, `read x < "$FIFO"`)
		errc := waitIn(ctx, p)
		trap.MustWait(ctx).MustRelease(ctx)
		feedFifo(t, fifo)
		if err := recv(ctx, t, errc, "WaitInput"); !errors.Is(err, proc.ErrNotRunning) {
			t.Fatalf("WaitInput() = %v; want ErrNotRunning", err)
		}
	})

	t.Run("ctx-ends", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		p, fifo, _, trap := start(t, `read x < "$FIFO"`)
		defer feedFifo(t, fifo)
		wctx, cancel := context.WithCancel(ctx)
		errc := waitIn(wctx, p)
		trap.MustWait(ctx).MustRelease(ctx)
		cancel()
		if err := recv(ctx, t, errc, "WaitInput"); !errors.Is(err, context.Canceled) {
			t.Fatalf("WaitInput() = %v; want context.Canceled", err)
		}
	})
}

// TestActivityFollowsChanges looks at a tree again and again while it
// changes, so that each look but the first finds what the looks before
// it read (members that did not run are not read again): a shell waiting
// for input starts two members and waits again, then kills one, then
// replaces itself with a listener. Each change shows in the next looks.
func TestActivityFollowsChanges(t *testing.T) {
	t.Parallel()
	treeEachMode(t, func(t *testing.T, mode treeMode) {
		ctx := testCtx(t)
		req := helperReq("activity-listen", "tcp4", "127.0.0.1:0")
		req.Args = append([]string{"sh", "-c", `read x; sleep 60 & sleep 60 & read y; kill $!; wait $!; read z; exec "$@"`, "sh"}, req.Args...)
		req.Stdin = true
		p := startIn(t, mode, req)
		stage := func(what string, members int, waiting bool, listeners int) {
			t.Helper()
			waitActivity(ctx, t, p, what, func(a proc.Activity) bool {
				return a.Members == members && a.WaitingForInput == waiting && len(a.Listeners) == listeners
			})
			// Looked at again, the idle tree shows the same.
			for range 3 {
				a, err := p.Activity()
				if err != nil || a.Members != members || a.WaitingForInput != waiting || len(a.Listeners) != listeners {
					t.Fatalf("%s, looked at again: Activity() = %+v, %v; want %d members, waiting %v, %d listeners", what, a, err, members, waiting, listeners)
				}
			}
		}
		stage("the shell reads x", 1, true, 0)
		if _, err := p.Write([]byte("x\n")); err != nil {
			t.Fatal(err)
		}
		stage("two sleeps, the shell reads y", 3, true, 0)
		if _, err := p.Write([]byte("y\n")); err != nil {
			t.Fatal(err)
		}
		stage("one sleep killed, the shell reads z", 2, true, 0)
		if _, err := p.Write([]byte("z\n")); err != nil {
			t.Fatal(err)
		}
		waitLine(ctx, t, p, regexp.MustCompile(`^listening `))
		stage("the shell became a listener", 2, false, 1)
	})
}
