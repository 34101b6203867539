//go:build linux && !proc_otherunix

package proc_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/procvisor/proc"
)

// TestSandboxEscapes replays the attacks on the sandbox's first version
// (design section 17, "What the tree may not do besides writing files")
// with the tools the attacker used, through a Manager in both modes, as a
// root host: a setuid copy of dash, loosening a file outside the roots,
// the host's limits, priority and affinity, and leaving the cgroup. What
// a workspace needs keeps working: chmod +x of a script, touch, renice of
// itself. The non-root host's run is internal/sandbox's
// TestEscapesNonRootHost; each system call's answer is pinned there.
func TestSandboxEscapes(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	if os.Geteuid() != 0 {
		t.Skip("the attacks are those of a root host's child (CI runs as root; internal/sandbox runs a uid 65534 host)")
	}
	for _, tool := range []string{"prlimit", "renice", "taskset", "chattr"} {
		needTool(t, tool)
	}
	host := strconv.Itoa(os.Getpid())
	// $1 the root, $2 outside, $3 the host's PID.
	script := `cp /bin/dash "$1/dash" && chmod 4755 "$1/dash" 2>/dev/null && echo suid-set || echo suid-refused
printf '#!/bin/sh\necho script-ran\n' >"$1/s.sh" && chmod +x "$1/s.sh" && "$1/s.sh"
chmod 777 "$2/f" 2>/dev/null && echo chmod-out || echo chmod-out-refused
chown 0:0 "$2/f" 2>/dev/null && echo chown-out || echo chown-out-refused
touch "$2/f" 2>/dev/null && echo touch-out || echo touch-out-refused
touch -d @1 "$1/s.sh" && echo touch-in
chattr +i "$1/s.sh" 2>/dev/null && echo chattr-set || echo chattr-refused
lim=$(prlimit --pid "$3" --nofile --raw --noheadings -o SOFT,HARD | tr -s ' ' ':' | sed 's/^://')
prlimit --pid "$3" --nofile="$lim" 2>/dev/null && echo prlimit-host || echo prlimit-host-refused
prlimit --pid $$ --nofile="$lim" && echo prlimit-self
renice -n 0 -p "$3" >/dev/null 2>&1 && echo renice-host || echo renice-host-refused
renice -n "$(nice)" -p $$ >/dev/null && echo renice-self
mask=$(taskset -p "$3" | sed 's/.*: //')
taskset -p "$mask" "$3" >/dev/null 2>&1 && echo taskset-host || echo taskset-host-refused
sh -c 'taskset -p "$1" $$ >/dev/null && echo taskset-child' sh "$mask"
`
	want := "suid-refused\nscript-ran\nchmod-out-refused\nchown-out-refused\ntouch-out-refused\ntouch-in\nchattr-refused\n" +
		"prlimit-host-refused\nprlimit-self\nrenice-host-refused\nrenice-self\ntaskset-host-refused\ntaskset-child\n"
	for _, c := range sbModes {
		t.Run(string(c), func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			root, outside := t.TempDir(), t.TempDir()
			out := filepath.Join(outside, "f")
			if err := os.WriteFile(out, []byte("data\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			m := sbManager(t, c, proc.Options{Sandbox: &proc.Sandbox{WritableRoots: []string{root}}})
			snap := waitFinal(ctx, t, mustStart(t, m, proc.StartRequest{Args: []string{"sh", "-c", script, "sh", root, outside, host}}))
			if snap.Output.Text != want {
				t.Errorf("output:\n%s\nwant:\n%s", snap.Output.Text, want)
			}
			if st, err := os.Stat(filepath.Join(root, "dash")); err != nil || st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
				t.Errorf("the copy of dash: %v, %v; want no setuid bit", st.Mode(), err)
			}
			if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o600 {
				t.Errorf("the file outside: %v, %v; want mode 0600", st.Mode(), err)
			}
		})
	}
}

// TestSandboxStaysInCgroup (E1): in cgroup mode a sandboxed child runs in
// its record's cgroup from its first instruction, and neither it nor its
// descendants can clone into another (clone3 fails with ENOSYS, so the
// shell's and Go's forks use clone).
func TestSandboxStaysInCgroup(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	ctx := testCtx(t)
	m := sbManager(t, proc.ContainCgroup, proc.Options{Sandbox: &proc.Sandbox{}})
	p := mustStart(t, m, helperReq("sb-clone3"))
	snap := waitFinal(ctx, t, p)
	wantExit(t, snap, 0)
	lines := strings.Split(strings.TrimSpace(snap.Output.Text), "\n")
	if len(lines) != 3 || lines[0] != "clone3: ENOSYS" || lines[1] != lines[2] || !strings.HasPrefix(lines[1], "0::/") {
		t.Fatalf("output %q; want clone3 refused and the child and its own child in one cgroup", snap.Output.Text)
	}
	if !strings.Contains(lines[1], "/proc-test-") {
		t.Errorf("the child ran in %s, not below the test's cgroup", lines[1])
	}
}

var _ = helper("sb-clone3", sbClone3)

// sbClone3 prints what clone3 answers (a bad size: EINVAL where it is
// allowed, and nothing is forked), its own cgroup and its child's.
func sbClone3([]string) int {
	_, _, errno := unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)
	fmt.Println("clone3:", unix.ErrnoName(errno))
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println(cgroupLine(string(own)))
	child, err := exec.Command("cat", "/proc/self/cgroup").Output()
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println(cgroupLine(string(child)))
	return 0
}

// cgroupLine is the cgroup v2 line of a /proc/<pid>/cgroup file.
func cgroupLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "0::") {
			return l
		}
	}
	return ""
}

// TestSandboxServer: a sandboxed dev server (Listen) is reachable from
// the host, and a sandboxed client allowed its port (ConnectPorts)
// reaches it, while the client's other connections stay refused; both
// modes. Info.Sandbox says so.
func TestSandboxServer(t *testing.T) {
	t.Parallel()
	needSandbox(t)
	if sup, _ := sbSupport(); sup.ABI < 4 {
		t.Skipf("Landlock ABI %d has no TCP rules (CI: ABI 7)", sup.ABI)
	}
	other := sbListen(t)
	for _, c := range sbModes {
		t.Run(string(c), func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			m := sbManager(t, c, proc.Options{})
			req := helperReq("sb-serve")
			req.Sandbox = &proc.Sandbox{Listen: true}
			srv := mustStart(t, m, req)
			if !strings.Contains(srv.Info().Sandbox, "listen") {
				t.Errorf("server Info.Sandbox %q; want listen", srv.Info().Sandbox)
			}
			line := waitLine(ctx, t, srv, regexp.MustCompile(`port (\d+)`))
			port := strings.TrimSpace(strings.TrimPrefix(line, "port "))
			n, _ := strconv.Atoi(port)
			addr := "127.0.0.1:" + port
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("the host cannot reach the sandboxed server: %v", err)
			}
			conn.Close()
			req = helperReq("sb-dial", addr, other)
			req.Sandbox = &proc.Sandbox{ConnectPorts: []int{n}}
			client := mustStart(t, m, req)
			snap := waitFinal(ctx, t, client)
			if want := "dial " + addr + ": ok\ndial " + other + ": EACCES\n"; snap.Output.Text != want {
				t.Errorf("client output %q; want %q", snap.Output.Text, want)
			}
			wantExit(t, waitFinal(ctx, t, srv), 0)
		})
	}
}

var (
	_ = helper("sb-serve", sbServe)
	_ = helper("sb-dial", sbDial)
)

// sbServe listens on a free loopback port, prints it, takes two
// connections and exits.
func sbServe([]string) int {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer l.Close()
	fmt.Println("port", l.Addr().(*net.TCPAddr).Port)
	for range 2 {
		c, err := l.Accept()
		if err != nil {
			fmt.Println(err)
			return 1
		}
		c.Close()
	}
	return 0
}

// sbDial tries to connect to each address and prints what the kernel said.
func sbDial(args []string) int {
	for _, a := range args {
		r := "ok"
		if c, err := net.Dial("tcp4", a); err != nil {
			var errno unix.Errno
			if errors.As(err, &errno) {
				r = unix.ErrnoName(errno)
			} else {
				r = err.Error()
			}
		} else {
			c.Close()
		}
		fmt.Printf("dial %s: %s\n", a, r)
	}
	return 0
}
