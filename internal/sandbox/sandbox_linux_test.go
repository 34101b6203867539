//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procvisor/proc/internal/testkit"
)

// probed is the probe's answer for this host, asked once.
var probed = sync.OnceValues(func() (Support, error) { return Probe(Steps{}) })

// support returns the probe's answer, or skips: the sandbox runs where
// Landlock ABI 3 or newer, seccomp and ptrace are available (CI: kernel
// 6.18, ABI 7).
func support(t testing.TB) Support {
	t.Helper()
	sup, err := probed()
	if err != nil {
		t.Skipf("the sandbox cannot run here (CI runs it): %v", err)
	}
	return sup
}

// testCtx ends with the test, at the latest after d (default 60 s).
func testCtx(t testing.TB, d ...time.Duration) context.Context {
	t.Helper()
	return testkit.Ctx(t, 60*time.Second, d...)
}

// result is what a sandboxed child did.
type result struct {
	out   string
	state *os.ProcessState
}

// line returns the result line of op ("ok", "EACCES", ...), or fails.
func (r result) line(t testing.TB, op string) string {
	t.Helper()
	for _, l := range strings.Split(r.out, "\n") {
		if v, ok := strings.CutPrefix(l, op+": "); ok {
			return v
		}
	}
	t.Fatalf("no result for %s in %q (%v)", op, r.out, r.state)
	return ""
}

// run starts cmd under p (with the hold as given), waits for it and for
// its output to end (a double-forked grandchild holds the pipe too).
func run(ctx context.Context, t testing.TB, cmd *exec.Cmd, p Policy, hold bool) result {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd.Stdout, cmd.Stderr = w, w
	h, err := start(cmd, cmd.Start, p, support(t), hold)
	w.Close()
	if err != nil {
		t.Fatalf("start %v: %v", cmd.Args, err)
	}
	h.Release()
	if dl, ok := ctx.Deadline(); ok {
		_ = r.SetReadDeadline(dl)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read the output of %v: %v", cmd.Args, err)
	}
	_ = cmd.Wait()
	return result{out: string(out), state: cmd.ProcessState}
}

// opsCmd runs the ops helper with args, through the wrapper argv before it
// ("sh", "-c", ...) if any: the helper's argv is appended as "$@".
func opsCmd(wrapper []string, args ...string) *exec.Cmd {
	argv := append([]string{os.Args[0]}, args...)
	if len(wrapper) > 0 {
		argv = append(append(append([]string{}, wrapper...), "proc-sandbox-test"), argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), helperEnv+"=ops", "GORACE=atexit_sleep_ms=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd
}

// wrappers run the helper directly and as descendants: through a shell,
// in a session of its own, and double-forked (orphaned, reparented).
var wrappers = map[string][]string{
	"direct":      nil,
	"sh-c":        {"sh", "-c", `"$@"`},
	"setsid":      {"sh", "-c", `exec setsid "$@"`},
	"double-fork": {"sh", "-c", `("$@" &) ; exit 0`},
}

func TestFiles(t *testing.T) {
	t.Parallel()
	support(t)
	for name, wrapper := range wrappers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			root, outside := t.TempDir(), t.TempDir()
			for _, dir := range []string{root, outside} {
				if err := os.WriteFile(filepath.Join(dir, "f"), []byte("data"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			in := func(s string) string { return filepath.Join(root, s) }
			out := func(s string) string { return filepath.Join(outside, s) }
			if err := os.Symlink(out("f"), in("link-out")); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{
				"read=" + out("f"):                           "ok",
				"create=" + in("new"):                        "ok",
				"append=" + in("f"):                          "ok",
				"mkdir=" + in("d"):                           "ok",
				"append=/dev/null":                           "ok",
				"trunc-open=/dev/null":                       "ok",
				"create=" + out("new"):                       "EACCES",
				"append=" + out("f"):                         "EACCES",
				"truncate=" + out("f"):                       "EACCES",
				"trunc-open=" + out("f"):                     "EACCES",
				"mkdir=" + out("d"):                          "EACCES",
				"rm=" + out("f"):                             "EACCES",
				"rename=" + in("f") + ":" + out("moved"):     "EACCES",
				"rename=" + out("f") + ":" + in("moved"):     "EACCES",
				"link=" + in("f") + ":" + out("hard"):        "EACCES",
				"link=" + out("f") + ":" + in("hard"):        "EXDEV", // Landlock: REFER denied
				"append=" + in("link-out"):                   "EACCES",
				"append=/proc/self/root" + out("f"):          "EACCES",
				"symlink=" + in("f") + ":" + out("sym"):      "EACCES",
				"create=/proc/self/root" + out("via-proc"):   "EACCES",
				"mknod=" + out("null"):                       "EACCES",
				"append=" + filepath.Join(root, "d-missing"): "ENOENT", // a sane error inside, not EACCES
			}
			var args []string
			for op := range want {
				args = append(args, op)
			}
			res := run(ctx, t, opsCmd(wrapper, args...), Policy{WritableRoots: []string{root}}, true)
			checkOps(t, res, args, want)
			if data, err := os.ReadFile(out("f")); err != nil || string(data) != "data" {
				t.Errorf("the file outside the root holds %q, %v; want it untouched", data, err)
			}
		})
	}
}

// checkOps matches the helper's lines, one per argument in order, with
// want.
func checkOps(t *testing.T, res result, args []string, want map[string]string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(res.out), "\n")
	if len(lines) != len(args) {
		t.Fatalf("%d result lines for %d operations (%v):\n%s", len(lines), len(args), res.state, res.out)
	}
	for i, a := range args {
		_, got, _ := strings.Cut(lines[i], ": ")
		if got != want[a] {
			t.Errorf("%s: %s; want %s", a, got, want[a])
		}
	}
}

func TestNetworkOff(t *testing.T) {
	t.Parallel()
	support(t)
	tcp4 := listen(t, "tcp4", "127.0.0.1:0")
	tcp6 := listen(t, "tcp6", "[::1]:0")
	sock := listen(t, "unix", filepath.Join(t.TempDir(), "daemon.sock"))
	want := map[string]string{
		"tcp4-connect=" + tcp4:  "EACCES",
		"tcp6-connect=" + tcp6:  "EACCES",
		"mptcp-connect=" + tcp4: "EACCES",
		"tcp4-bind":             "EACCES",
		"tcp6-bind":             "EACCES",
		"udp4=127.0.0.1:9":      "EACCES",
		"raw":                   "EACCES",
		"netlink":               "EACCES",
		"io_uring":              "EPERM",
		"unix-connect=" + sock:  "EACCES",
		"unix-dgram":            "EACCES",
		"socketpair-dgram":      "EACCES",
		"socketpair":            "ok",
	}
	for name, wrapper := range wrappers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			var args []string
			for op := range want {
				args = append(args, op)
			}
			res := run(ctx, t, opsCmd(wrapper, args...), Policy{}, true)
			checkOps(t, res, args, want)
		})
	}
}

func TestNetworkOn(t *testing.T) {
	t.Parallel()
	support(t)
	ctx := testCtx(t)
	tcp4 := listen(t, "tcp4", "127.0.0.1:0")
	args := []string{"tcp4-connect=" + tcp4, "tcp4-bind", "socketpair", "unix-dgram"}
	res := run(ctx, t, opsCmd(nil, args...), Policy{Network: true}, true)
	checkOps(t, res, args, map[string]string{args[0]: "ok", args[1]: "ok", args[2]: "ok", args[3]: "ok"})
}

// listen listens on addr (a free port) until the test ends, accepting
// and closing connections, and returns the address.
func listen(t *testing.T, network, addr string) string {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatalf("listen %s %s: %v", network, addr, err)
	}
	done := make(chan struct{})
	// Stopped by the cleanup's Close, which fails Accept.
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
	})
	return l.Addr().String()
}

func TestHostNotRestricted(t *testing.T) {
	// Not parallel: it counts this process's threads.
	support(t)
	ctx := testCtx(t)
	base := threads(t)
	const starts = 50
	for i := range starts {
		// true, not the (race-built, slow to start) test binary.
		if res := run(ctx, t, exec.Command("true"), Policy{}, true); !res.state.Success() {
			t.Fatalf("start %d: %v %q", i, res.state, res.out)
		}
	}
	for _, task := range taskStatus(t) {
		if task["NoNewPrivs"] != "0" || task["Seccomp"] != "0" {
			t.Errorf("host thread %s: NoNewPrivs %s, Seccomp %s; want 0 and 0", task["Pid"], task["NoNewPrivs"], task["Seccomp"])
		}
	}
	// The restricted threads end after their starts returned; Go may
	// have made pool threads meanwhile, but never more than it had
	// before the starts (it keeps idle ones, so look for no growth by
	// the number of starts).
	for {
		n := threads(t)
		if n <= base+2 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d threads after %d sandboxed starts, %d before", n, starts, base)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// threads counts this process's threads.
func threads(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// taskStatus reads /proc/self/task/*/status into maps.
func taskStatus(t testing.TB) []map[string]string {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var all []map[string]string
	for _, e := range ents {
		data, err := os.ReadFile("/proc/self/task/" + e.Name() + "/status")
		if err != nil {
			continue // ended meanwhile
		}
		m := map[string]string{}
		for _, l := range strings.Split(string(data), "\n") {
			k, v, _ := strings.Cut(l, ":")
			m[k] = strings.TrimSpace(v)
		}
		all = append(all, m)
	}
	return all
}

// windowProbe races for the host: it lists /proc/<host>/task at once and,
// for each thread, tries to read its environ and to signal it (signal 0:
// the permission check only). It prints how many of each succeeded.
const windowProbe = `#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(int argc, char **argv) {
	char path[256], buf[64];
	int host = atoi(argv[1]), reads = 0, signals = 0;
	snprintf(path, sizeof path, "/proc/%d/task", host);
	DIR *d = opendir(path);
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL) {
		int tid = atoi(e->d_name);
		if (tid <= 0) continue;
		snprintf(path, sizeof path, "/proc/%d/task/%d/environ", host, tid);
		int fd = open(path, O_RDONLY);
		if (fd >= 0) {
			if (read(fd, buf, sizeof buf) > 0) reads++;
			close(fd);
		}
		if (syscall(SYS_tgkill, host, tid, 0) == 0) signals++;
	}
	printf("reads %d signals %d\n", reads, signals);
	return 0;
}
`

// buildProbe compiles windowProbe statically (so that it runs its first
// instruction at once: no dynamic loader) with the cc that -race needs.
func buildProbe(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no cc (the -race CI job has one)")
	}
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "probe.c"), filepath.Join(dir, "probe")
	if err := os.WriteFile(src, []byte(windowProbe), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cc", "-static", "-O2", "-o", bin, src).CombinedOutput(); err != nil {
		t.Skipf("cc -static failed (no static C library; CI has one): %v\n%s", err, out)
	}
	return bin
}

// windowLeaks starts the probe n times and counts the starts whose probe
// read the host's environment or could signal one of its threads.
func windowLeaks(ctx context.Context, t *testing.T, bin string, n int, hold bool) (leaks int) {
	t.Helper()
	host := strconv.Itoa(os.Getpid())
	for range n {
		cmd := exec.Command(bin, host)
		res := run(ctx, t, cmd, Policy{}, hold)
		var reads, signals int
		if _, err := fmt.Sscanf(res.out, "reads %d signals %d", &reads, &signals); err != nil {
			t.Fatalf("probe output %q (%v): %v", res.out, res.state, err)
		}
		if reads > 0 || signals > 0 {
			leaks++
		}
	}
	return leaks
}

// TestWindow: until the restricted thread is gone its child shares its
// domain; the hold keeps the child from running any code of its own
// meanwhile. Without the hold the same probe gets through (a prototype
// measured 83-153 of 300; 50-82 here), which shows the probe can see the
// window.
func TestWindow(t *testing.T) {
	t.Parallel()
	support(t)
	bin := buildProbe(t)
	// 400 sequential starts: minutes when the machine is loaded.
	ctx := testCtx(t, 5*time.Minute)
	const held, unheld = 300, 100
	if leaks := windowLeaks(ctx, t, bin, held, true); leaks != 0 {
		t.Errorf("held: %d of %d sandboxed starts reached the host", leaks, held)
	}
	if leaks := windowLeaks(ctx, t, bin, unheld, false); leaks == 0 {
		t.Errorf("not held: 0 of %d starts reached the host; the probe cannot see the window", unheld)
	} else {
		t.Logf("not held: %d of %d starts reached the host", leaks, unheld)
	}
}

func TestPdeathsigRefused(t *testing.T) {
	t.Parallel()
	sup := support(t)
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if _, err := Start(cmd, cmd.Start, Policy{}, sup); err == nil || cmd.Process != nil {
		t.Fatalf("Start with Pdeathsig = %v (process %v); want an error and nothing started", err, cmd.Process)
	}
}

// TestExitKill: with ExitKill the held child dies with the thread that
// holds it unless Release came first; here it comes, and the child runs.
func TestExitKillReleased(t *testing.T) {
	t.Parallel()
	support(t)
	ctx := testCtx(t)
	res := run(ctx, t, opsCmd(nil, "socketpair"), Policy{ExitKill: true}, true)
	if res.line(t, "socketpair") != "ok" || !res.state.Success() {
		t.Fatalf("child: %q, %v", res.out, res.state)
	}
}

// TestRegisterOnThread: Register runs on the restricted thread while the
// child is held at its exec stop, traced by that thread and under the
// exit-kill; the thread then lets the child go without Release. A failing
// Register fails the start with its error: the child is killed before it
// ran, reaped, and cmd.Process is nil.
func TestRegisterOnThread(t *testing.T) {
	t.Parallel()
	sup := support(t)
	t.Run("registered", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var status []byte
		var statusErr error
		var tid, registered int
		cmd := exec.Command("echo", "ran")
		cmd.Stdout = w
		p := Policy{ExitKill: true, Register: func(pid int) error {
			tid, registered = unix.Gettid(), pid
			status, statusErr = os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			return nil
		}}
		h, err := Start(cmd, cmd.Start, p, sup)
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		defer h.Release()
		if registered != cmd.Process.Pid || tid == unix.Gettid() || tid == processID {
			t.Fatalf("Register(%d) on thread %d; want the child %d on the restricted thread", registered, tid, cmd.Process.Pid)
		}
		if statusErr != nil {
			t.Fatal(statusErr)
		}
		want := fmt.Sprintf("TracerPid:\t%d\n", tid)
		if !strings.Contains(string(status), want) || !strings.Contains(string(status), "State:\tt (tracing stop)") {
			t.Fatalf("child at Register:\n%s\nwant stopped, traced by thread %d", status, tid)
		}
		// Not released: the thread let the child go by itself.
		if dl, ok := ctx.Deadline(); ok {
			_ = r.SetReadDeadline(dl)
		}
		out, err := io.ReadAll(r)
		if err != nil || string(out) != "ran\n" {
			t.Fatalf("child wrote %q, %v before Release; want \"ran\\n\"", out, err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
	})
	t.Run("fails", func(t *testing.T) {
		t.Parallel()
		refused := errors.New("no slot")
		var pid int
		cmd := exec.Command("true")
		p := Policy{ExitKill: true, Register: func(p int) error { pid = p; return refused }}
		if _, err := Start(cmd, cmd.Start, p, sup); !errors.Is(err, refused) || cmd.Process != nil {
			t.Fatalf("Start with a failing Register = %v (process %v); want its error, nothing running", err, cmd.Process)
		}
		if pid == 0 {
			t.Fatal("Register was not called")
		}
		// Reaped: the PID names no child of this process any more.
		var ws unix.WaitStatus
		if _, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil); !errors.Is(err, unix.ECHILD) {
			t.Fatalf("wait4(%d) = %v; want ECHILD (killed and reaped)", pid, err)
		}
	})
}

// TestUntraced: once started, the child runs untraced (the thread that
// held it is gone) and keeps running.
func TestUntraced(t *testing.T) {
	t.Parallel()
	sup := support(t)
	ctx := testCtx(t)
	cmd := exec.Command("sh", "-c", "read x || true")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	h, err := Start(cmd, cmd.Start, Policy{}, sup)
	if err != nil {
		t.Fatal(err)
	}
	h.Release()
	for {
		st := readStatus(t, cmd.Process.Pid)
		if st["TracerPid"] == "0" && st["NoNewPrivs"] == "1" && strings.HasPrefix(st["State"], "S") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("child status %v; want untraced, sleeping", st)
		case <-time.After(time.Millisecond):
		}
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
}

func readStatus(t testing.TB, pid int) map[string]string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		m[k] = strings.TrimSpace(v)
	}
	return m
}

// The "mainthread" helper starts sandboxed children from a program whose
// restricted goroutine lands on the main thread (GOMAXPROCS=1: the new
// goroutine runs on the thread that started it, the main one, until that
// thread is parked), and reports how often Start moved off it, and the
// main thread's state.
func init() { helpers["mainthread"] = mainThreadHelper }

func mainThreadHelper([]string) int {
	sup, err := Probe(Steps{})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	before := movedOffMain.Load()
	for range 10 {
		cmd := exec.Command("true")
		h, err := Start(cmd, cmd.Start, Policy{}, sup)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		h.Release()
		if err := cmd.Wait(); err != nil {
			fmt.Println(err)
			return 1
		}
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/status", os.Getpid()))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	nnp := "?"
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "NoNewPrivs:"); ok {
			nnp = strings.TrimSpace(v)
		}
	}
	fmt.Printf("moved %d main-nnp %s\n", movedOffMain.Load()-before, nnp)
	return 0
}

func TestMainThread(t *testing.T) {
	t.Parallel()
	support(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=mainthread", "GOMAXPROCS=1", "GORACE=atexit_sleep_ms=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	var moved int
	var nnp string
	if _, err := fmt.Sscanf(string(out), "moved %d main-nnp %s", &moved, &nnp); err != nil {
		t.Fatalf("helper output %q: %v", out, err)
	}
	if moved == 0 {
		t.Errorf("no start landed on the main thread (%q): the case was not played", out)
	}
	if moved > 1 {
		t.Errorf("%d starts landed on the main thread; want 1: the first parks it for good", moved)
	}
	if nnp != "0" {
		t.Errorf("the main thread has NoNewPrivs %s after %d moves; want 0", nnp, moved)
	}
}

func TestProbeUnsupported(t *testing.T) {
	t.Parallel()
	fail := func() error { return unix.EPERM }
	tests := []struct {
		name  string
		steps Steps
		step  string
		msg   string
	}{
		{"landlock-not-built", Steps{Landlock: func() (int, error) { return 0, unix.ENOSYS }}, "landlock", "CONFIG_SECURITY_LANDLOCK"},
		{"landlock-not-enabled", Steps{Landlock: func() (int, error) { return 0, unix.EOPNOTSUPP }}, "landlock", "add landlock to the kernel's lsm= list"},
		{"landlock-abi-2", Steps{Landlock: func() (int, error) { return 2, nil }}, "landlock", "ABI 3"},
		{"seccomp", Steps{Landlock: func() (int, error) { return 7, nil }, Seccomp: func() error { return unix.EINVAL }}, "seccomp", "CONFIG_SECCOMP_FILTER"},
		{"hold", Steps{Landlock: func() (int, error) { return 7, nil }, Seccomp: func() error { return nil }, Hold: fail}, "hold", "held"},
		{"capabilities", Steps{Landlock: func() (int, error) { return 7, nil }, Seccomp: func() error { return nil }, Hold: func() error { return nil }, Capabilities: fail}, "capabilities", "CAP_SETPCAP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Probe(tt.steps)
			var u *UnsupportedError
			if !errors.As(err, &u) || u.Step != tt.step || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Probe = %v; want an *UnsupportedError of step %s saying %q", err, tt.step, tt.msg)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		abi  int
		p    Policy
		want string
	}{
		{7, Policy{}, "landlock abi 7, seccomp, no connect, no capabilities"},
		{12, Policy{Network: true}, "landlock abi 12, network, no capabilities"},
		{4, Policy{}, "landlock abi 4, seccomp, no connect, no capabilities, signals"},
		{7, Policy{Listen: true}, "landlock abi 7, seccomp, listen, no connect, no capabilities"},
		{7, Policy{Listen: true, ConnectPorts: []int{3000, 443}}, "landlock abi 7, seccomp, listen, connect 3000,443, no unix sockets, no capabilities"},
	} {
		if got := (Support{ABI: tt.abi}).Describe(tt.p); got != tt.want {
			t.Errorf("Support{ABI: %d}.Describe(%+v) = %q; want %q", tt.abi, tt.p, got, tt.want)
		}
	}
}

// The "held-host" helper starts "sleep 100" sandboxed, with ExitKill as
// its argument says, prints its PID and waits to be killed, never
// releasing it.
func init() { helpers["held-host"] = heldHostHelper }

func heldHostHelper(args []string) int {
	sup, err := Probe(Steps{})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	cmd := exec.Command("sleep", "100")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if _, err := Start(cmd, cmd.Start, Policy{ExitKill: args[0] == "exitkill"}, sup); err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println(cmd.Process.Pid)
	select {} // until killed
}

// TestExitKillHostDies: a child held with ExitKill dies with its host
// (group mode's guarantee of section 14 before the watchdog knows the
// child); without ExitKill the same child outlives it, which shows the
// test can see the difference.
func TestExitKillHostDies(t *testing.T) {
	t.Parallel()
	support(t)
	testkit.EachParallel(t, []string{"exitkill", "plain"}, func(t *testing.T, mode string) {
		ctx := testCtx(t)
		cmd := exec.Command(os.Args[0], mode)
		cmd.Env = append(os.Environ(), helperEnv+"=held-host", "GORACE=atexit_sleep_ms=0")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		pid, perr := strconv.Atoi(strings.TrimSpace(line))
		if err != nil || perr != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("host said %q: %v %v", line, err, perr)
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		died := pollIn(ctx, fd, 2*time.Second)
		if !died {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		if want := mode == "exitkill"; died != want {
			t.Errorf("held child died with its host: %v; want %v", died, want)
		}
	})
}

// pollIn waits up to d (or ctx's end) for fd to be readable.
func pollIn(ctx context.Context, fd int, d time.Duration) bool {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		d = time.Until(dl)
	}
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(d.Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}
