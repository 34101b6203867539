//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/procvisor/proc/internal/testkit"
)

// The escapes of design section 17 ("What the tree may not do besides
// writing files"), each built from its attack's reproduction: metadata
// outside the roots (E2), other processes without a signal (E3),
// terminals (E4), the keyring, and clone3 (E1; the cgroup itself in
// TestPlacedInCgroup). Run as root here (CI); TestEscapesNonRootHost runs
// the same as uid 65534.

// escapeWant sets up a root and an outside directory whose files belong
// to owner (the sandboxed child's user) and returns the operations to try
// with their expected results, and a check of what must be unchanged
// afterwards. host names the host's PID for the ops helper: a number, or
// "parent" where the host is the child's parent.
func escapeWant(t *testing.T, owner int, host string) (p Policy, want map[string]string, check func(t *testing.T)) {
	root, outside := sharedDir(t), sharedDir(t)
	in := func(s string) string { return filepath.Join(root, s) }
	out := func(s string) string { return filepath.Join(outside, s) }
	for _, f := range []string{in("f"), in("g"), in("h"), out("f")} {
		if err := os.WriteFile(f, []byte("data"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f, 0o666); err != nil { // also writable by another user
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(in("d"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(out("f"), in("link-out")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{in("f"), in("g"), in("h"), in("d"), out("f")} {
		if err := os.Chown(f, owner, owner); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Lchown(in("link-out"), owner, owner); err != nil {
		t.Fatal(err)
	}
	uid := strconv.Itoa(owner)
	want = map[string]string{
		// E2: mode, owner, times and attributes.
		"chmod=" + in("f") + ":0755":           "ok",
		"fchmodat=" + in("g") + ":0700":        "ok",
		"fchmod-w=" + in("h") + ":0640":        "ok",
		"fchmod-ro=" + in("d") + ":0755":       "ok",
		"chmod=" + out("f") + ":0777":          "EPERM",
		"fchmodat=" + out("f") + ":0600":       "EPERM",
		"fchmod-ro=" + out("f") + ":0600":      "EPERM",
		"chmod=" + in("link-out") + ":0777":    "EPERM",
		"chmod=" + in("d") + ":02777":          "EPERM", // setgid, inside a root too
		"chmod=" + in("f") + ":04755":          "EPERM", // setuid
		"chown=" + in("f") + ":" + uid:         "ok",
		"chown=" + out("f") + ":" + uid:        "EPERM",
		"lchown=" + in("link-out") + ":" + uid: "ok", // the link itself lies in the root
		"utimes=" + out("f"):                   "EPERM",
		"touch=" + out("f"):                    "EPERM",
		"touch=" + in("f"):                     "ok",
		"setxattr=" + in("f"):                  "EPERM",
		"setfacl=" + in("f"):                   "EPERM",
		"setflags=" + in("f"):                  "EPERM",
		// E1: clone3, which could name another cgroup.
		"clone3": "ENOSYS",
		// E3: other processes.
		"prlimit=" + host:     "EPERM",
		"prlimit=0":           "ok",
		"prlimit=self":        "ok",
		"prlimit-get=" + host: "ok",
		"renice=" + host:      "EPERM",
		"renice=self":         "ok",
		"renice-user":         "EPERM",
		"affinity=" + host:    "EPERM",
		"affinity=self":       "ok",
		// The keyring.
		"keyctl": "EPERM",
		// E4: terminals other than the tree's own; a terminal of its own.
		"open-ro=/dev/urandom": "ok",
		// The master opens, but Landlock checks the peer's open as one of
		// /dev/pts/N, which no rule may grant without granting every
		// terminal: a tree cannot make a terminal of its own.
		"ptmx-peer": "EACCES",
	}
	for _, dev := range []string{"/dev/console", "/dev/tty1", "/dev/ttyS0", "/dev/vcs"} {
		if _, err := os.Stat(dev); err == nil {
			want["open-ro="+dev] = "EACCES"
		}
	}
	ptmx, pts := openPty(t)
	want["open-ro="+pts] = "EACCES"
	want["tiocsti="+pts] = "EACCES"
	_ = ptmx
	check = func(t *testing.T) {
		t.Helper()
		modes := map[string]os.FileMode{in("f"): 0o755, in("g"): 0o700, in("h"): 0o640, out("f"): 0o666}
		for path, mode := range modes {
			if st, err := os.Stat(path); err != nil || st.Mode().Perm() != mode || st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
				t.Errorf("%s: %v, %v; want mode %v", path, st.Mode(), err, mode)
			}
		}
		if st, err := os.Stat(out("f")); err != nil || st.ModTime().Unix() == 1 {
			t.Errorf("the times of the file outside the root changed: %v, %v", st.ModTime(), err)
		}
		if st, err := os.Stat(in("d")); err != nil || st.Mode()&os.ModeSetgid != 0 {
			t.Errorf("%s: %v, %v; want no setgid bit", in("d"), st.Mode(), err)
		}
	}
	return Policy{WritableRoots: []string{root}}, want, check
}

// openPty opens a terminal pair the test holds, as another record's
// would be: the master and the path of its peer.
func openPty(t *testing.T) (*os.File, string) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	return m, "/dev/pts/" + strconv.Itoa(n)
}

func TestEscapes(t *testing.T) {
	t.Parallel()
	support(t)
	testkit.EachParallel(t, []string{"direct", "double-fork"}, func(t *testing.T, name string) {
		ctx := testCtx(t)
		p, want, check := escapeWant(t, os.Getuid(), strconv.Itoa(os.Getpid()))
		var args []string
		for op := range want {
			args = append(args, op)
		}
		res := run(ctx, t, opsCmd(wrappers[name], args...), p, true)
		checkOps(t, res, args, want)
		check(t)
	})
}

// TestEscapesNetworkOn: the escape rules do not depend on the network.
func TestEscapesNetworkOn(t *testing.T) {
	t.Parallel()
	support(t)
	ctx := testCtx(t)
	p, want, check := escapeWant(t, os.Getuid(), strconv.Itoa(os.Getpid()))
	p.Network = true
	var args []string
	for op := range want {
		args = append(args, op)
	}
	res := run(ctx, t, opsCmd(nil, args...), p, true)
	checkOps(t, res, args, want)
	check(t)
}

// sharedDir makes a directory any user may use (the escape tests' root
// and outside directories, which a uid 65534 host's child reaches too),
// removed when the test ends.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "proc-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestEscapesNonRootHost runs the escapes with a host of uid 65534: a copy
// of the test binary, run as that user, probes and starts the ops helper
// sandboxed as TestEscapes does. Its child owns the files outside the
// root as it owns those inside, as a user's agent owns ~/.ssh.
func TestEscapesNonRootHost(t *testing.T) {
	t.Parallel()
	support(t)
	if os.Geteuid() != 0 {
		t.Skip("needs a root test process to start a uid 65534 host (CI runs as root)")
	}
	ctx := testCtx(t)
	p, want, check := escapeWant(t, nobody, "parent")
	var args []string
	for op := range want {
		args = append(args, op)
	}
	out := runAsNobody(ctx, t, append([]string{"ops", p.WritableRoots[0]}, args...)...)
	checkOps(t, result{out: out}, args, want)
	check(t)
}

// nobody is the user a non-root host runs as.
const nobody = 65534

// runAsNobody runs the "nobody-host" helper with args as uid 65534, from
// a copy of the test binary any user may run, and returns its output; the
// test fails if the host could not run.
func runAsNobody(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	bin := filepath.Join(sharedDir(t), "sandbox.test")
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), helperEnv+"=nobody-host", "GORACE=atexit_sleep_ms=0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the uid %d host: %v\n%s", nobody, err, out)
	}
	return string(out)
}

func init() { helpers["nobody-host"] = nobodyHostHelper }

// nobodyHostHelper is a host that starts a sandboxed child under a policy
// with the writable root args[1] and prints its output: the ops helper
// trying args[2:] (args[0] "ops"), or the program BIN with args[2:]
// (args[0] "exec:BIN").
func nobodyHostHelper(args []string) int {
	sup, err := Probe(Steps{})
	if err != nil {
		fmt.Println("probe:", err)
		return 1
	}
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	var cmd *exec.Cmd
	if bin, ok := strings.CutPrefix(args[0], "exec:"); ok {
		cmd = exec.Command(bin, args[2:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd = opsCmd(nil, args[2:]...)
		cmd.Env = append(cmd.Env, "HOME=/")
	}
	cmd.Stdout, cmd.Stderr = w, w
	h, err := Start(cmd, cmd.Start, Policy{WritableRoots: args[1:2]}, sup)
	w.Close()
	if err != nil {
		fmt.Println("start:", err)
		return 1
	}
	h.Release()
	_, _ = io.Copy(os.Stdout, r)
	_ = cmd.Wait()
	h.Stop()
	return 0
}

// TestPlacedInCgroup (E1): a child started with UseCgroupFD is forked
// with clone (clone3 is refused in the tree) and moved into the cgroup
// while held, before it runs: its first look at /proc/self/cgroup finds
// it there, and its own clone3 fails.
func TestPlacedInCgroup(t *testing.T) {
	t.Parallel()
	support(t)
	dir := testCgroup(t)
	ctx := testCtx(t)
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	cmd := opsCmd(nil, "read=/proc/self/cgroup", "clone3")
	cmd.Env = append(cmd.Env, "SANDBOX_TEST_PRINT_CGROUP=1")
	cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
	res := run(ctx, t, cmd, Policy{}, true)
	if got := res.line(t, "clone3"); got != "ENOSYS" {
		t.Errorf("clone3 in the tree: %s; want ENOSYS", got)
	}
	rel := strings.TrimPrefix(dir, cgroupMount)
	if !strings.Contains(res.out, "\n0::"+rel+"\n") {
		t.Errorf("the child was not in %s when it ran:\n%s", rel, res.out)
	}
}

// TestPlaceFails: a cgroup that cannot take the child (removed from
// outside) fails the start, and the child, killed while held, is reaped.
func TestPlaceFails(t *testing.T) {
	t.Parallel()
	support(t)
	dir := testCgroup(t)
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Rmdir(dir); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, UseCgroupFD: true, CgroupFD: fd}
	h, err := start(cmd, cmd.Start, Policy{}, support(t), true)
	if err == nil {
		h.Release()
		h.Stop()
		_ = cmd.Wait()
		t.Fatal("the start into a removed cgroup succeeded")
	}
	if cmd.Process != nil {
		t.Errorf("cmd.Process is %v after the failed start; want nil", cmd.Process)
	}
}

// cgroupMount is where cgroup v2 is mounted on the machines that run
// these tests (CI included).
const cgroupMount = "/sys/fs/cgroup/unified"

// testCgroup makes a cgroup for the test and removes it when the test
// ends; it skips where there is no writable cgroup v2.
func testCgroup(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(cgroupMount, "proc-sandbox-test-"+strconv.Itoa(os.Getpid())+"-"+strings.ReplaceAll(t.Name(), "/", "-"))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("no writable cgroup v2 at %s (CI has one): %v", cgroupMount, err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) })
	return dir
}

// TestOwnTerminal (E4): the tree's own terminal opens, but pushing input
// into it (TIOCSTI) is refused as everywhere else, and so is reading
// another terminal.
func TestOwnTerminal(t *testing.T) {
	t.Parallel()
	support(t)
	ctx := testCtx(t)
	_, own := openPty(t)
	_, other := openPty(t)
	args := []string{"open-ro=" + own, "tiocsti=" + own, "open-ro=" + other}
	res := run(ctx, t, opsCmd(nil, args...), Policy{TTY: own}, true)
	checkOps(t, res, args, map[string]string{args[0]: "ok", args[1]: "EPERM", args[2]: "EACCES"})
}

// TestStopRefuses: once the host stops serving a tree's routed calls
// (Held.Stop), they fail and change nothing; none is let through.
func TestStopRefuses(t *testing.T) {
	t.Parallel()
	support(t)
	root := t.TempDir()
	f := filepath.Join(root, "f")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The helper waits for a line on its stdin before each operation.
	cmd := opsCmd(nil, "wait", "chmod="+f+":0644", "wait", "chmod="+f+":0640")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd.Stdout = w
	h, err := start(cmd, cmd.Start, Policy{WritableRoots: []string{root}}, support(t), true)
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	h.Release()
	lines := bufio.NewReader(r)
	step := func() string {
		if _, err := in.Write([]byte("\n")); err != nil {
			t.Fatal(err)
		}
		for {
			l, err := lines.ReadString('\n')
			if err != nil {
				t.Fatalf("read the helper's output: %v", err)
			}
			if !strings.HasPrefix(l, "wait:") {
				return strings.TrimSpace(l)
			}
		}
	}
	if got := step(); got != "chmod: ok" {
		t.Fatalf("chmod while served: %q; want ok", got)
	}
	h.Stop()
	if got := step(); got != "chmod: ENOSYS" {
		t.Errorf("chmod after Stop: %q; want ENOSYS", got)
	}
	in.Close()
	_ = cmd.Wait()
	if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, %v; want 0644 (the chmod after Stop changed nothing)", st.Mode(), err)
	}
}

// TestListenConnect: with the network off, Listen lets the tree bind and
// listen on TCP ports, and ConnectPorts lets it connect to those ports
// only; UDP, raw and MPTCP sockets, other ports, connects hidden in a
// send, and (with ConnectPorts) AF_UNIX sockets stay refused.
func TestListenConnect(t *testing.T) {
	t.Parallel()
	support(t)
	allowed := listen(t, "tcp4", "127.0.0.1:0")
	other := listen(t, "tcp4", "127.0.0.1:0")
	sock := listen(t, "unix", filepath.Join(t.TempDir(), "daemon.sock"))
	_, port, _ := strings.Cut(allowed, ":")
	n, _ := strconv.Atoi(port)
	for name, tt := range map[string]struct {
		p    Policy
		want map[string]string
	}{
		"listen": {Policy{Listen: true}, map[string]string{
			"tcp4-bind": "ok", "tcp4-connect=" + allowed: "EACCES", "unix-connect=" + sock: "EACCES",
			"udp4=127.0.0.1:9": "EACCES", "raw": "EACCES", "socketpair": "ok",
		}},
		"connect": {Policy{ConnectPorts: []int{n}}, map[string]string{
			"tcp4-bind": "EACCES", "tcp4-connect=" + allowed: "ok", "tcp4-connect=" + other: "EACCES",
			"mptcp-connect=" + allowed: "EACCES", "fastopen=" + other: "EPERM", "unix-connect=" + sock: "EACCES",
			"udp4=127.0.0.1:9": "EACCES", "raw": "EACCES", "socketpair": "ok", "io_uring": "EPERM",
		}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			var args []string
			for op := range tt.want {
				args = append(args, op)
			}
			res := run(ctx, t, opsCmd(nil, args...), tt.p, true)
			checkOps(t, res, args, tt.want)
		})
	}
}
