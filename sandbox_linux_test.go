//go:build linux && !proc_otherunix

package proc_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/procvisor/proc"
	"github.com/procvisor/proc/internal/sandbox"
)

// sbSupport is the kernel's answer for the sandbox, asked once.
var sbSupport = sync.OnceValues(func() (sandbox.Support, error) { return sandbox.Probe(sandbox.Steps{}) })

// needSandbox skips where the kernel cannot run the sandbox (CI: kernel
// 6.18, Landlock ABI 7, runs them all) and returns Info.Sandbox for the
// network off.
func needSandbox(t testing.TB) string {
	t.Helper()
	sup, err := sbSupport()
	if err != nil {
		t.Skipf("the sandbox cannot run here (CI runs it): %v", err)
	}
	return sup.Describe(sandbox.Policy{})
}

// stressSandboxed says whether TestStress sandboxes a third of its starts:
// wherever the kernel can.
func stressSandboxed() bool {
	_, err := sbSupport()
	return err == nil
}

// sbModes are the containments every sandbox test runs in.
var sbModes = []proc.Containment{proc.ContainCgroup, proc.ContainGroup}

// eachSandboxMode runs f as parallel subtests, one for each of sbModes.
func eachSandboxMode(t *testing.T, f func(t *testing.T, c proc.Containment)) {
	t.Helper()
	for _, c := range sbModes {
		t.Run(string(c), func(t *testing.T) {
			t.Parallel()
			f(t, c)
		})
	}
}

// sbManager is a Manager of the given containment (cgroup below a test
// cgroup of its own).
func sbManager(t *testing.T, c proc.Containment, opts proc.Options) *proc.Manager {
	t.Helper()
	opts.Containment = c
	if c == proc.ContainCgroup {
		opts.CgroupParent = treeCgroupParent(t)
	}
	return newManager(t, opts)
}

func TestSandboxFiles(t *testing.T) {
	t.Parallel()
	info := needSandbox(t)
	eachSandboxMode(t, func(t *testing.T, c proc.Containment) {
		ctx := testCtx(t)
		root, outside := t.TempDir(), t.TempDir()
		if err := os.WriteFile(filepath.Join(outside, "f"), []byte("data\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		m := sbManager(t, c, proc.Options{})
		script := `echo in >"$1/a" && echo in-ok
echo out 2>/dev/null >"$2/f" || echo out-refused
mkdir "$2/d" 2>/dev/null || echo mkdir-refused
: >/dev/null && echo null-ok
cat "$2/f"
sh -c 'echo child 2>/dev/null >"$2/g" || echo child-refused' sh "$1" "$2"
`
		p := mustStart(t, m, proc.StartRequest{
			Args:    []string{"sh", "-c", script, "sh", root, outside},
			Sandbox: &proc.Sandbox{WritableRoots: []string{root}},
		})
		snap := waitFinal(ctx, t, p)
		wantExit(t, snap, 0)
		want := "in-ok\nout-refused\nmkdir-refused\nnull-ok\ndata\nchild-refused\n"
		if snap.Output.Text != want {
			t.Errorf("output %q; want %q", snap.Output.Text, want)
		}
		if snap.Info.Sandbox != info || snap.Info.Containment != string(c) {
			t.Errorf("Info.Sandbox %q, Containment %q; want %q, %q", snap.Info.Sandbox, snap.Info.Containment, info, c)
		}
		if data, _ := os.ReadFile(filepath.Join(outside, "f")); string(data) != "data\n" {
			t.Errorf("the file outside holds %q; want it untouched", data)
		}
		// The same Manager without a sandbox is unrestricted.
		plain := waitFinal(ctx, t, mustStart(t, m, proc.StartRequest{Args: []string{"sh", "-c", `echo out >"$1/f"`, "sh", outside}}))
		wantExit(t, plain, 0)
		if plain.Info.Sandbox != "" {
			t.Errorf("unsandboxed Info.Sandbox %q; want empty", plain.Info.Sandbox)
		}
	})
}

var _ = helper("sb-connect", sbConnect)

// sbConnect connects to the TCP address args[0] and says whether it could.
func sbConnect(args []string) int {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err == nil {
		host, port, _ := strings.Cut(args[0], ":")
		n, _ := strconv.Atoi(port)
		sa := &unix.SockaddrInet4{Port: n}
		copy(sa.Addr[:], netIP4(host))
		err = unix.Connect(fd, sa)
		unix.Close(fd)
	}
	if err != nil {
		fmt.Println("connect:", unix.ErrnoName(err.(unix.Errno)))
		return 0
	}
	fmt.Println("connect: ok")
	return 0
}

func netIP4(s string) []byte {
	var b [4]byte
	for i, part := range strings.SplitN(s, ".", 4) {
		n, _ := strconv.Atoi(part)
		b[i] = byte(n)
	}
	return b[:]
}

func TestSandboxNetwork(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	addr := sbListen(t)
	for _, c := range sbModes {
		for _, network := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/network=%v", c, network), func(t *testing.T) {
				t.Parallel()
				// Each subtest's own deadline: a parallel subtest may wait
				// long for its turn when the whole suite runs.
				ctx := testCtx(t)
				m := sbManager(t, c, proc.Options{Sandbox: &proc.Sandbox{Network: network}})
				snap := waitFinal(ctx, t, mustStart(t, m, helperReq("sb-connect", addr)))
				want := "connect: EACCES\n"
				if network {
					want = "connect: ok\n"
				}
				if snap.Output.Text != want {
					t.Errorf("output %q (%s); want %q", snap.Output.Text, snap.Info.Sandbox, want)
				}
				if got := strings.Contains(snap.Info.Sandbox, "network"); got != network {
					t.Errorf("Info.Sandbox %q; want it to say network only when allowed", snap.Info.Sandbox)
				}
			})
		}
	}
}

// sbListen listens on a free loopback port until the test ends.
func sbListen(t *testing.T) string {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 64); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel completes connections into the backlog: nobody accepts.
	return fmt.Sprintf("127.0.0.1:%d", sa.(*unix.SockaddrInet4).Port)
}

var _ = helper("sb-ptrace", sbPtrace)

// sbPtrace tries to trace pid args[0] (PTRACE_SEIZE, which does not stop
// it; a success is undone) and says whether it could.
func sbPtrace(args []string) int {
	pid, _ := strconv.Atoi(args[0])
	_, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(pid), 0, 0, 0, 0)
	if errno != 0 {
		fmt.Println("ptrace:", unix.ErrnoName(errno))
		return 0
	}
	_ = unix.PtraceDetach(pid)
	fmt.Println("ptrace: ok")
	return 0
}

// TestSandboxHostile: a sandboxed child of a root host can neither reach
// the host (its environment, signals, ptrace) nor leave or loosen its
// tree (its cgroup's files), nor mount, make devices or change /proc/sys.
func TestSandboxHostile(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("the hostile children are those of a root host (CI runs as root)")
	}
	mount, err := treeCgroupMount()
	if err != nil {
		t.Skipf("no cgroup2 mount (%v): CI has one", err)
	}
	root := t.TempDir()
	host := strconv.Itoa(os.Getpid())
	script := `cg="$1$(sed -n 's/^0:://p' /proc/self/cgroup)"
echo $$ 2>/dev/null >"$cg/../cgroup.procs" && echo left-tree || echo procs-refused
echo 1 2>/dev/null >"$cg/cgroup.kill" && echo killed || echo kill-refused
echo 1 2>/dev/null >"$cg/cgroup.max.descendants" && echo limit-changed || echo limit-refused
echo +pids 2>/dev/null >"$cg/cgroup.subtree_control" && echo controllers-changed || echo control-refused
cat /proc/$2/environ >/dev/null 2>&1 && echo environ-read || echo environ-refused
cat /proc/$2/task/*/environ >/dev/null 2>&1 && echo task-environ-read || echo task-environ-refused
kill -0 $2 2>/dev/null && echo host-signalled || echo signal-refused
mount -t tmpfs none "$3" 2>/dev/null && echo mounted || echo mount-refused
mknod "$3/null" c 1 3 2>/dev/null && echo mknod || echo mknod-refused
(cat /proc/sys/kernel/domainname 2>/dev/null >/proc/sys/kernel/domainname) && echo sysctl-written || echo sysctl-refused
`
	want := "procs-refused\nkill-refused\nlimit-refused\ncontrol-refused\nenviron-refused\ntask-environ-refused\n" +
		"signal-refused\nmount-refused\nmknod-refused\nsysctl-refused\n"
	eachSandboxMode(t, func(t *testing.T, c proc.Containment) {
		ctx := testCtx(t)
		m := sbManager(t, c, proc.Options{Sandbox: &proc.Sandbox{WritableRoots: []string{root}}})
		snap := waitFinal(ctx, t, mustStart(t, m, proc.StartRequest{Args: []string{"sh", "-c", script, "sh", mount, host, root}}))
		if snap.Output.Text != want {
			t.Errorf("output:\n%s\nwant:\n%s", snap.Output.Text, want)
		}
		snap = waitFinal(ctx, t, mustStart(t, m, helperReq("sb-ptrace", host)))
		if snap.Output.Text != "ptrace: EPERM\n" {
			t.Errorf("ptrace of the host: %q; want EPERM", snap.Output.Text)
		}
	})
}

// TestSandboxTTY: under a terminal, the sandboxed child reads and writes
// its own terminal and /dev/tty, with ioctls (stty), and nothing else of
// /dev/pts.
func TestSandboxTTY(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	other, otherTTY, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		other.Close()
		otherTTY.Close()
	})
	eachSandboxMode(t, func(t *testing.T, c proc.Containment) {
		ctx := testCtx(t)
		m := sbManager(t, c, proc.Options{Sandbox: &proc.Sandbox{}})
		script := `read line; echo "got $line"
echo tty-ok >/dev/tty
echo reopened >"$(tty)"
stty size
echo x 2>/dev/null >"$1" && echo other-written || echo other-refused
`
		p := startStdin(t, m, proc.StartRequest{Args: []string{"sh", "-c", script, "sh", otherTTY.Name()}, TTY: true, Size: proc.TermSize{Rows: 30, Cols: 100}})
		if _, err := p.Write([]byte("hello\n")); err != nil {
			t.Fatal(err)
		}
		snap := waitFinal(ctx, t, p)
		wantExit(t, snap, 0)
		for _, w := range []string{"got hello", "tty-ok", "reopened", "30 100", "other-refused"} {
			if !strings.Contains(snap.Output.Text, w) {
				t.Errorf("output %q lacks %q", snap.Output.Text, w)
			}
		}
	})
}

// TestSandboxTimeoutAndClose: the timeout and Close stop a sandboxed tree
// as any other.
func TestSandboxTimeoutAndClose(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	eachSandboxMode(t, func(t *testing.T, c proc.Containment) {
		ctx := testCtx(t)
		m := sbManager(t, c, proc.Options{Sandbox: &proc.Sandbox{}, KillGrace: 100 * time.Millisecond})
		timed := mustStart(t, m, proc.StartRequest{Command: "sleep 100 & sleep 100", Timeout: 50 * time.Millisecond})
		snap := waitFinal(ctx, t, timed)
		if !snap.Info.TimedOut {
			t.Errorf("timed-out record: %+v; want TimedOut", snap.Info)
		}
		wantExit(t, snap, proc.ExitTimedOut)
		closed := mustStart(t, m, proc.StartRequest{Command: "sleep 100 & sleep 100"})
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if info := closed.Info(); info.Running || info.Signal != "SIGTERM" {
			t.Errorf("after Close: %+v; want final, ended by SIGTERM", info)
		}
	})
}

func TestSandboxStartOrGet(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	// Group mode: a Manager with the default cgroup parent would make its
	// cgroup beside the test's (at the root here), and leave it there if
	// the test binary were killed.
	m := sbManager(t, proc.ContainGroup, proc.Options{})
	root := t.TempDir()
	req := proc.StartRequest{ID: "sb", Command: "sleep 100", Sandbox: &proc.Sandbox{WritableRoots: []string{root}}}
	p, started, err := m.StartOrGet(req)
	if err != nil || !started {
		t.Fatalf("StartOrGet = %v, %v", started, err)
	}
	req.Sandbox = &proc.Sandbox{WritableRoots: []string{root}}
	if again, started, err := m.StartOrGet(req); err != nil || started || again != p {
		t.Fatalf("StartOrGet with the same sandbox = %v, %v, %v; want the same record", again, started, err)
	}
	for _, other := range []*proc.Sandbox{nil, {}, {WritableRoots: []string{root}, Network: true}} {
		req.Sandbox = other
		if _, _, err := m.StartOrGet(req); !errors.Is(err, proc.ErrDuplicateID) {
			t.Errorf("StartOrGet with Sandbox %+v = %v; want ErrDuplicateID", other, err)
		}
	}
	_ = p.Signal(proc.Kill)
}

// TestSandboxUnsupported: a kernel without a feature the sandbox needs,
// played at each step of the probe, fails the start with ErrUnsupported
// naming it, and leaves nothing: no record, descriptor, goroutine or
// cgroup (treeCgroupParent checks that none is left).
func TestSandboxUnsupported(t *testing.T) {
	t.Parallel()
	abi7 := func() (int, error) { return 7, nil }
	ok := func() error { return nil }
	fail := func() error { return unix.EPERM }
	for name, tt := range map[string]struct {
		steps sandbox.Steps
		says  string
	}{
		"landlock-off":  {sandbox.Steps{Landlock: func() (int, error) { return 0, unix.EOPNOTSUPP }}, "add landlock to the kernel's lsm= list"},
		"landlock-abi2": {sandbox.Steps{Landlock: func() (int, error) { return 2, nil }}, "ABI 3"},
		"seccomp":       {sandbox.Steps{Landlock: abi7, Seccomp: fail}, "seccomp"},
		"hold":          {sandbox.Steps{Landlock: abi7, Seccomp: ok, Hold: fail}, "held"},
		"capabilities":  {sandbox.Steps{Landlock: abi7, Seccomp: ok, Hold: ok, Capabilities: fail}, "CAP_SETPCAP"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t, time.Minute)
			if !isolated(ctx, t) {
				return
			}
			m := proc.NewManager(proc.Options{Containment: proc.ContainCgroup, CgroupParent: treeCgroupParent(t)})
			t.Cleanup(func() { _ = m.Close() })
			proc.SetSandboxSteps(m, tt.steps)
			waitFinal(ctx, t, mustStart(t, m, proc.StartRequest{Args: []string{"true"}}))
			// The warm-up's cgroup is made ready again in the background
			// (its files read and closed): not a descriptor of the starts
			// counted below.
			backgroundIdle(m)
			check := noLeaks(t)
			for range 2 { // the answer is cached: the second start gets it too
				_, err := m.Start(proc.StartRequest{Args: []string{"true"}, Sandbox: &proc.Sandbox{}})
				if !errors.Is(err, proc.ErrUnsupported) || !strings.Contains(err.Error(), tt.says) {
					t.Fatalf("Start = %v; want ErrUnsupported saying %q", err, tt.says)
				}
			}
			check("after refused sandboxed starts")
			if n := len(m.List()); n != 1 {
				t.Errorf("%d records; want 1 (the unsandboxed start)", n)
			}
		})
	}
}

var _ = helper("sb-host", sbHost)

// sbHost, a host of its own, makes sandboxed starts in both modes and
// says whether any of its threads was left restricted and how many
// threads it has, before and after.
func sbHost(args []string) int {
	parent := args[0]
	before := len(sbTasks())
	for _, c := range sbModes {
		opts := proc.Options{Containment: c, Sandbox: &proc.Sandbox{}}
		if c == proc.ContainCgroup {
			opts.CgroupParent = parent
		}
		m := proc.NewManager(opts)
		for range 20 {
			p, err := m.Start(proc.StartRequest{Args: []string{"true"}})
			if err != nil {
				fmt.Println(err)
				return 1
			}
			<-p.Done()
		}
		_ = m.Close()
	}
	after := 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if after = len(sbTasks()); after <= before+2 {
			break
		}
	}
	restricted := 0
	for _, status := range sbTasks() {
		if regexp.MustCompile(`(?m)^(NoNewPrivs:\s*1|Seccomp:\s*[12])$`).MatchString(status) {
			restricted++
		}
	}
	fmt.Printf("threads %d %d restricted %d\n", before, after, restricted)
	return 0
}

// sbTasks returns /proc/self/task/*/status.
func sbTasks() []string {
	ents, _ := os.ReadDir("/proc/self/task")
	var all []string
	for _, e := range ents {
		if data, err := os.ReadFile("/proc/self/task/" + e.Name() + "/status"); err == nil {
			all = append(all, string(data))
		}
	}
	return all
}

// TestSandboxHostNotRestricted: after many sandboxed starts no thread of
// the host, the main one included, is left restricted, and the thread
// count is back where it was (a host of its own: parallel tests would
// add threads).
func TestSandboxHostNotRestricted(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	ctx := testCtx(t, time.Minute)
	parent := treeCgroupParent(t)
	cmd := helperCmd("sb-host", parent)
	out, err := cmd.CombinedOutput()
	if err != nil || ctx.Err() != nil {
		t.Fatalf("host: %v\n%s", err, out)
	}
	var before, after, restricted int
	if _, err := fmt.Sscanf(string(out), "threads %d %d restricted %d", &before, &after, &restricted); err != nil {
		t.Fatalf("host said %q: %v", out, err)
	}
	if restricted != 0 || after > before+2 {
		t.Errorf("after 40 sandboxed starts: %d restricted threads, %d threads (%d before); want 0, and no growth", restricted, after, before)
	}
}

// TestSandboxHostDeath: a sandboxed tree dies with its host as any other
// (design section 17: group mode keeps section 14's guarantee without
// Pdeathsig), through the real watchdog, in both modes.
func TestSandboxHostDeath(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	hostDeath(t, "sandbox")
}

// TestSandboxHostDeathDuringStarts: a host killed while it makes
// sandboxed starts in group mode must leave no child, though the sandbox
// cannot use Pdeathsig. The held child's PTRACE_O_EXITKILL covers it only
// from its exec stop on: a host killed between the fork and that stop
// left a child that runs (its tracer thread died before the option was
// set: detached) or, when the host died before the child's
// PTRACE_TRACEME, one reparented to PID 1, traced by it and stopped at
// its exec for good (1, 2 and 4 of 10 rounds in three runs, before the
// pending mark). The watchdog's pending mark covers the whole start.
//
// The same in cgroup mode ("sandbox-cgroup"), where a sandboxed child is
// forked outside its cgroup (its tree may not clone into one) and moved in
// at its exec stop; the pending mark covers it until then (no exit-kill:
// it would begin only where the child enters its cgroup, which the
// watchdog kills with the host).
func TestSandboxHostDeathDuringStarts(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	proc.EachParallel(t, []string{"sandbox", "sandbox-cgroup"}, hostDeathDuringStarts)
}

// TestSandboxActivity: a sandboxed record's activity is read as any
// other's: a shell reading its stdin pipe or its terminal is waiting for
// input (Activity and WaitInput), a sleeping one is not, and with the
// network allowed a listener is reported with its address and PID.
func TestSandboxActivity(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	for _, c := range sbModes {
		for _, tc := range []struct {
			name    string
			req     proc.StartRequest
			waiting bool
		}{
			{"read-stdin", proc.StartRequest{Command: "read x", Stdin: true}, true},
			{"read-tty", proc.StartRequest{Command: "read x", TTY: true}, true},
			{"sleep", proc.StartRequest{Command: "echo ready; exec sleep 30", Stdin: true}, false},
			{"sleep-tty", proc.StartRequest{Command: "echo ready; exec sleep 30", TTY: true}, false},
		} {
			t.Run(string(c)+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				ctx := testCtx(t)
				p := mustStart(t, sbManager(t, c, proc.Options{Sandbox: &proc.Sandbox{}}), tc.req)
				if p.Info().Sandbox == "" {
					t.Fatalf("Info.Sandbox empty; want the record sandboxed")
				}
				if !tc.waiting {
					waitLine(ctx, t, p, regexp.MustCompile("^ready"))
					mustNotWait(ctx, t, p, tc.name)
					return
				}
				if err := p.WaitInput(ctx); err != nil {
					t.Fatalf("WaitInput() = %v; output %q", err, p.Output().Text)
				}
				a, err := p.Activity()
				if err != nil || !a.WaitingForInput || a.Members != 1 {
					t.Errorf("Activity() = %+v, %v; want waiting for input, 1 member", a, err)
				}
			})
		}
		t.Run(string(c)+"/listener", func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			m := sbManager(t, c, proc.Options{Sandbox: &proc.Sandbox{Network: true}})
			p := mustStart(t, m, helperReq("activity-listen", "tcp4", "127.0.0.1:0"))
			line := waitLine(ctx, t, p, regexp.MustCompile(`^(listening|listen:) `))
			var pid int
			var addr string
			if _, err := fmt.Sscanf(line, "listening %d %s", &pid, &addr); err != nil {
				t.Fatalf("helper (%s): %q", p.Info().Sandbox, line)
			}
			a, err := p.Activity()
			if err != nil {
				t.Fatalf("Activity() = %v", err)
			}
			_, port, _ := strings.Cut(addr, ":")
			want := proc.Listener{Network: "tcp", Address: addr, PID: pid}
			want.Port, _ = strconv.Atoi(port)
			if len(a.Listeners) != 1 || a.Listeners[0] != want || pid != p.Info().PID {
				t.Errorf("Activity().Listeners = %+v (child %d); want [%+v]", a.Listeners, p.Info().PID, want)
			}
		})
	}
}

// sbCounted wraps the kernel's probe steps, counting the calls of each
// in n (Landlock, Seccomp, Hold, Capabilities); fail, if set, replaces
// the hold step's answer.
func sbCounted(n *[4]atomic.Int32, fail error) sandbox.Steps {
	def := sandbox.DefaultSteps()
	return sandbox.Steps{
		Landlock: func() (int, error) { n[0].Add(1); return def.Landlock() },
		Seccomp:  func() error { n[1].Add(1); return def.Seccomp() },
		Hold: func() error {
			n[2].Add(1)
			if fail != nil {
				return fail
			}
			return def.Hold()
		},
		Capabilities: func() error { n[3].Add(1); return def.Capabilities() },
	}
}

// TestSandboxProbeOnce: a Manager probes the kernel on its first
// sandboxed start and never again, however many starts follow, from
// however many goroutines, with the policy of the request or of Options;
// a Manager that has made no sandboxed start has not probed; a missing
// feature found is returned again without a second probe; and each
// Manager probes for itself.
func TestSandboxProbeOnce(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	want := func(t *testing.T, n *[4]atomic.Int32, calls [4]int32, when string) {
		t.Helper()
		got := [4]int32{n[0].Load(), n[1].Load(), n[2].Load(), n[3].Load()}
		if got != calls {
			t.Errorf("%s: probe steps (landlock, seccomp, hold, capabilities) called %v times; want %v", when, got, calls)
		}
	}
	eachSandboxMode(t, func(t *testing.T, c proc.Containment) {
		ctx := testCtx(t)
		m := sbManager(t, c, proc.Options{})
		var n [4]atomic.Int32
		proc.SetSandboxSteps(m, sbCounted(&n, nil))
		wantExit(t, waitFinal(ctx, t, mustStart(t, m, proc.StartRequest{Args: []string{"true"}})), 0)
		want(t, &n, [4]int32{}, "after an unsandboxed start")
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			// Ends after its starts, each awaited.
			go func() {
				defer wg.Done()
				for _, sb := range []*proc.Sandbox{{}, {Network: true}} {
					p, err := m.Start(proc.StartRequest{Args: []string{"true"}, Sandbox: sb})
					if err != nil {
						t.Errorf("Start = %v", err)
						return
					}
					if err := p.Wait(ctx); err != nil || p.Info().Sandbox == "" {
						t.Errorf("Wait = %v, Info.Sandbox %q; want a sandboxed exit", err, p.Info().Sandbox)
					}
				}
			}()
		}
		wg.Wait()
		want(t, &n, [4]int32{1, 1, 1, 1}, "after 8 sandboxed starts")

		// Options.Sandbox: the default policy asks the same probe.
		d := sbManager(t, c, proc.Options{Sandbox: &proc.Sandbox{}})
		var dn [4]atomic.Int32
		proc.SetSandboxSteps(d, sbCounted(&dn, nil))
		for range 3 {
			snap := waitFinal(ctx, t, mustStart(t, d, proc.StartRequest{Args: []string{"true"}}))
			wantExit(t, snap, 0)
		}
		want(t, &dn, [4]int32{1, 1, 1, 1}, "after 3 starts sandboxed by Options")
		want(t, &n, [4]int32{1, 1, 1, 1}, "another Manager's starts")

		// A missing feature is kept: asked again, the Manager answers
		// without probing.
		f := sbManager(t, c, proc.Options{})
		var fn [4]atomic.Int32
		proc.SetSandboxSteps(f, sbCounted(&fn, unix.EPERM))
		for i := range 3 {
			_, err := f.Start(proc.StartRequest{Args: []string{"true"}, Sandbox: &proc.Sandbox{}})
			if !errors.Is(err, proc.ErrUnsupported) || !strings.Contains(err.Error(), "held") {
				t.Fatalf("start %d: Start = %v; want ErrUnsupported saying the child cannot be held", i, err)
			}
		}
		want(t, &fn, [4]int32{1, 1, 1, 0}, "after 3 refused starts")

		// An error of the moment (the hold's probe could not fork: out
		// of processes) is no missing feature: it is not kept, and the
		// next start probes again and runs.
		e := sbManager(t, c, proc.Options{Sandbox: &proc.Sandbox{}})
		var en [4]atomic.Int32
		steps := sbCounted(&en, nil)
		hold, first := steps.Hold, true
		steps.Hold = func() error { // called under the Manager's probe lock
			if first {
				first = false
				en[2].Add(1)
				return unix.EAGAIN
			}
			return hold()
		}
		proc.SetSandboxSteps(e, steps)
		if _, err := e.Start(proc.StartRequest{Args: []string{"true"}}); err == nil || errors.Is(err, proc.ErrUnsupported) {
			t.Errorf("Start while the hold's probe cannot fork = %v; want an error, not ErrUnsupported", err)
		}
		for range 2 {
			snap := waitFinal(ctx, t, mustStart(t, e, proc.StartRequest{Args: []string{"true"}}))
			wantExit(t, snap, 0)
		}
		want(t, &en, [4]int32{2, 2, 2, 1}, "after a start refused for a moment and 2 that ran")
	})
}
