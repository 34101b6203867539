//go:build linux && !proc_otherunix

package proc_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/procvisor/proc"
	"github.com/procvisor/proc/internal/procfs"
	"golang.org/x/sys/unix"
)

// The Linux part of the shared test helpers: test cgroups (made below the
// test process's own, checked empty and removed when the test ends),
// pidfds, and what /proc says of this process.

// --- cgroups ---------------------------------------------------------------

// treeCgroupMount is the cgroup2 mount, as the library finds it.
var treeCgroupMount = sync.OnceValues(func() (string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		fields, postFields := strings.Fields(pre), strings.Fields(post)
		if ok && len(fields) >= 5 && len(postFields) >= 1 && postFields[0] == "cgroup2" {
			return fields[4], nil
		}
	}
	return "", errors.New("no cgroup2 mount in /proc/self/mountinfo")
})

// treeCgroupRoot is this process's own cgroup, if it can be written.
var treeCgroupRoot = sync.OnceValues(func() (string, error) {
	mount, err := treeCgroupMount()
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	line := treeCgroupLine(data)
	if line == "" {
		return "", errors.New("no cgroup v2 line (0::) in /proc/self/cgroup")
	}
	dir := filepath.Join(mount, line)
	probe := filepath.Join(dir, fmt.Sprintf("proc-test-probe-%d-%d", os.Getpid(), rand.Uint64()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		return "", fmt.Errorf("cgroup v2 at %s is not writable: %w", dir, err)
	}
	return dir, os.Remove(probe)
})

// exitRaceTest marks t, a test that pins the exact decision of a race
// with the child's exit, parallel: this backend stops a child and looks
// whether it exited without reaping it (haltChild, exitsSoon: pidfds and
// /proc), so a deadline or a write racing the exit is decided exactly.
func exitRaceTest(t *testing.T) { t.Parallel() }

// backgroundIdle waits until m's background work that reads files is
// done: the cgroup worker, which readies a done record's cgroup for reuse
// after the record's Done closed (proc.CgroupWorkerIdle). A test that
// counts descriptors calls it before it counts.
func backgroundIdle(m *proc.Manager) { proc.CgroupWorkerIdle(m) }

// recordCgroupFile matches what a Manager keeps open of its record
// cgroups between records, a cache bounded by design: a spare's
// directory (the spares grow when a start finds none), and a cgroup
// readied for reuse's cpu.stat and cgroup.events.
var recordCgroupFile = regexp.MustCompile(`/t[0-9]+(/cpu\.stat|/cgroup\.events)?$`)

// isRecordCgroupFile reports whether target, an open descriptor's, is
// one a Manager keeps open of its record cgroups (noLeaksBut).
func isRecordCgroupFile(target string) bool { return recordCgroupFile.MatchString(target) }

// treeCgroupParent makes a cgroup of this test's own below the test
// process's cgroup, to serve as a Manager's CgroupParent, or skips the test
// where cgroup v2 cannot be written. When the test ends — after the
// cleanups registered later, such as the Manager's Close — it fails the
// test if any cgroup is left below it (the Manager's own and its records'
// must all be gone), then kills and removes what is left, and itself.
func treeCgroupParent(t testing.TB) string {
	t.Helper()
	root, err := treeCgroupRoot()
	if err != nil {
		t.Skipf("no writable cgroup v2 (%v): the cgroup tests run on the development machines and in CI, where it is writable", err)
	}
	treeSweepOnce.Do(func() { treeSweep(t, root) })
	name := fmt.Sprintf("proc-test-%d-%s-%d", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "_"), rand.Uint32())
	dir := filepath.Join(root, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("make test cgroup: %v", err)
	}
	t.Cleanup(func() {
		left := treeCgroupsBelow(t, dir)
		if len(left) != 0 {
			t.Errorf("cgroups left below %s after the test: %q; want none (Close removes the Manager's cgroup and every record's)", dir, left)
		}
		treeClear(t, dir, left) // leave the machine clean all the same
	})
	return dir
}

var treeSweepOnce sync.Once

// treeSweep removes the test cgroups below root that a test process which
// is gone left behind (it crashed, or a test timeout ended it before its
// cleanups ran), killing what is inside first; those of live test
// processes (another package run) are theirs.
func treeSweep(t testing.TB, root string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Logf("sweep test cgroups: %v", err)
		return
	}
	for _, e := range entries {
		// "proc-test-<PID>-…", as treeCgroupParent names them.
		rest, ok := strings.CutPrefix(e.Name(), "proc-test-")
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || !e.IsDir() || pid == os.Getpid() || !errors.Is(unix.Kill(pid, 0), unix.ESRCH) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		left := treeCgroupsBelow(t, dir)
		t.Logf("removing test cgroup %s of gone test process %d (%d cgroups below)", dir, pid, len(left))
		treeClear(t, dir, left)
	}
}

// treeClear kills what runs in cgroup dir and removes the cgroups left
// below it (parents before children, as treeCgroupsBelow lists them), then
// dir, deepest first.
func treeClear(t testing.TB, dir string, left []string) {
	t.Helper()
	_ = os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	for i := len(left) - 1; i >= 0; i-- {
		treeRemoveCgroup(t, left[i])
	}
	treeRemoveCgroup(t, dir)
}

// treeCgroupsBelow lists the cgroups below dir, parents before children.
func treeCgroupsBelow(t testing.TB, dir string) []string {
	t.Helper()
	var below []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir {
			below = append(below, path)
		}
		return nil
	})
	if err != nil {
		t.Errorf("list cgroups below %s: %v", dir, err)
	}
	return below
}

// treeRemoveCgroup removes the empty cgroup dir; a cgroup whose killed
// members are not yet gone refuses with EBUSY for a moment, so it waits on
// cgroup.events (inotify) until it says "populated 0".
func treeRemoveCgroup(t testing.TB, dir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := treeWaitUnpopulated(ctx, dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Errorf("wait for %s to empty: %v", dir, err)
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Errorf("remove test cgroup %s: %v", dir, err)
	}
}

// treeWaitUnpopulated waits until dir's cgroup.events says "populated 0",
// woken by inotify (the kernel signals a change of the file as IN_MODIFY).
func treeWaitUnpopulated(ctx context.Context, dir string) error {
	events := filepath.Join(dir, "cgroup.events")
	var data []byte
	err := treeInotifyUntil(ctx, events, unix.IN_MODIFY, func() (done bool, err error) {
		data, err = os.ReadFile(events)
		return bytes.Contains(data, []byte("populated 0")), err
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s still says %q: %w", events, data, err)
	}
	return err
}

// treeWaitGone waits until dir has no entry name, woken by inotify on dir.
func treeWaitGone(ctx context.Context, dir, name string) error {
	err := treeInotifyUntil(ctx, dir, unix.IN_DELETE|unix.IN_DELETE_SELF, func() (bool, error) {
		_, err := os.Stat(filepath.Join(dir, name))
		return errors.Is(err, os.ErrNotExist), nil
	})
	if errors.Is(err, unix.ENOENT) {
		return nil // dir went too
	}
	return err
}

// treeInotifyUntil returns once done says so (or fails), asking it first
// and again whenever inotify reports an event of mask on path; it returns
// context.DeadlineExceeded when ctx's deadline passes first.
func treeInotifyUntil(ctx context.Context, path string, mask uint32, done func() (bool, error)) error {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, path, mask); err != nil {
		return err
	}
	buf := make([]byte, 4096)
	for {
		if ok, err := done(); ok || err != nil {
			return err
		}
		ms := treeMillisLeft(ctx)
		if ms <= 0 {
			return context.DeadlineExceeded
		}
		treePollIn(fd, ms)
		_, _ = unix.Read(fd, buf)
	}
}

// treeMillisLeft is how long to poll before looking at ctx again: a
// second at most, nothing once its deadline passed.
func treeMillisLeft(ctx context.Context) int {
	if deadline, ok := ctx.Deadline(); ok {
		return min(1000, int(time.Until(deadline).Milliseconds()))
	}
	return 1000
}

// treePollIn reports whether fd is readable within ms milliseconds (-1:
// no bound). A poll interrupted (Go's preemption signal) polls again for
// what is left.
func treePollIn(fd, ms int) bool {
	deadline := time.Now().Add(time.Duration(ms) * time.Millisecond)
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, ms)
		if !errors.Is(err, unix.EINTR) {
			return err == nil && n > 0
		}
		if ms >= 0 {
			ms = max(0, int(time.Until(deadline).Milliseconds()))
		}
	}
}

// treeCgroupOf returns the cgroup v2 directory of pid, and false if pid
// is gone.
func treeCgroupOf(t testing.TB, pid int) (string, bool) {
	t.Helper()
	mount, err := treeCgroupMount()
	if err != nil {
		t.Fatalf("cgroup mount: %v", err)
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return "", false
	}
	if err != nil {
		t.Fatalf("read cgroup of %d: %v", pid, err)
	}
	return filepath.Join(mount, treeCgroupLine(data)), true
}

// treeCgroupLine is the path of the cgroup v2 line (0::) of a
// /proc/<pid>/cgroup.
func treeCgroupLine(data []byte) string {
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "0::"); ok {
			return rest
		}
	}
	return ""
}

// --- processes -------------------------------------------------------------

// treePidfd opens a pidfd of pid (closed when the test ends); it becomes
// readable once the process exited, whoever its parent is.
func treePidfd(t testing.TB, pid int) int {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd_open(%d): %v", pid, err)
	}
	t.Cleanup(func() { _ = unix.Close(fd) })
	return fd
}

// treeExited reports whether the process of pidfd exited (zombie or
// reaped).
func treeExited(fd int) bool { return treePollIn(fd, 0) }

// treeExitsBy reports whether the process of pidfd exits before ctx's
// deadline.
func treeExitsBy(ctx context.Context, fd int) bool {
	for {
		ms := treeMillisLeft(ctx)
		if treePollIn(fd, max(ms, 0)) {
			return true
		}
		if ms <= 0 {
			return false
		}
	}
}

// treeWaitPidfd waits until the process of pidfd exited, or fails the test
// when ctx's deadline passes.
func treeWaitPidfd(ctx context.Context, t testing.TB, fd int, what string) {
	t.Helper()
	if !treeExitsBy(ctx, fd) {
		t.Fatalf("waiting for %s: %v", what, context.DeadlineExceeded)
	}
}

// --- this process --------------------------------------------------------

// selfStartTime is this process's start time (field 22 of its stat).
func selfStartTime(t testing.TB) int64 {
	t.Helper()
	start := procfs.SelfStartTime()
	if start == 0 {
		t.Fatal("cannot read this process's start time")
	}
	return int64(start)
}

// selfPIDNamespace is the inode of this process's PID namespace.
func selfPIDNamespace(t testing.TB) string {
	t.Helper()
	ino, ok := procfs.PIDNamespace(0)
	if !ok {
		t.Fatal("cannot read this process's PID namespace")
	}
	return strconv.FormatUint(ino, 10)
}

// sleepInCgroup starts a sleep cloned into the cgroup dir, as a dead host's
// record would have left it, and returns its PID; it is reaped when it
// dies.
func sleepInCgroup(t testing.TB, dir string) int {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd, Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sleep in %s: %v", dir, err)
	}
	// Reaped when it dies: killed by the Manager, or by the cleanup.
	go func() { _ = cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd.Process.Pid
}

// procPIDs lists the processes in /proc.
func procPIDs() []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// findWatchdog finds this process's watchdog child in /proc.
func findWatchdog() int {
	self := strconv.Itoa(os.Getpid())
	for _, pid := range procPIDs() {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 || fields[1] != self {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.Contains(string(cmdline), "proc-watchdog") {
			return pid
		}
	}
	return 0
}

// diesWithin reports whether the process of pidfd fd exits within d.
func diesWithin(fd int, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return treeExitsBy(ctx, fd)
}

// --- hosts -----------------------------------------------------------------

// testHost is the test binary re-run as a host (a process with a Manager
// of its own, which a test kills to see what dies with it): in a session
// of its own unless cmd says otherwise, its stdin held open (hosts wait on
// it), its stdout read line by line, and its stderr (where hostFail says
// why a host gave up) kept in a file, which fatalf quotes and which the
// test's log gets (or, if the test passed, its stderr) when it ends.
type testHost struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  *bufio.Scanner
	errLog string // the file of the host's stderr
	quoted bool   // fatalf quoted errLog: the cleanup need not show it
	done   chan struct{}
	err    error // Wait's, once done is closed
}

// startHost starts cmd (from helperCmd) as a host. When the test ends the
// host is killed, if it still runs, and reaped, and what it wrote on its
// stderr is shown.
func startHost(t testing.TB, cmd *exec.Cmd) *testHost {
	t.Helper()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	// A file, not a pipe: exec's Wait would wait for a pipe's copy until
	// everything that inherited it (the host's watchdog) exits.
	errLog, err := os.CreateTemp(t.TempDir(), "host-stderr-")
	if err != nil {
		t.Fatal(err)
	}
	defer errLog.Close() // the host has its own copy once started
	cmd.Stderr = errLog
	out, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = out.Close() })
	cmd.Stdout = w
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Start()
	_ = w.Close()
	if err != nil {
		t.Fatalf("start host %q: %v", cmd.Args, err)
	}
	h := &testHost{cmd: cmd, in: in, lines: bufio.NewScanner(out), errLog: errLog.Name(), done: make(chan struct{})}
	// Joined by the cleanup below, which kills the host first.
	go func() { h.err = cmd.Wait(); close(h.done) }()
	// Runs after the one below (cleanups run last first): the host is
	// reaped, so what it wrote is all there.
	t.Cleanup(func() {
		if said := h.stderr(); said == "" || h.quoted {
			return
		} else if t.Failed() {
			t.Logf("host %q ended (%v); its stderr:\n%s", cmd.Args, h.err, said)
		} else {
			fmt.Fprintf(os.Stderr, "%s: host %q ended (%v); its stderr:\n%s\n", t.Name(), cmd.Args, h.err, said)
		}
	})
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-h.done
	})
	return h
}

// stderr returns what the host wrote on its stderr so far, or why it
// cannot be read.
func (h *testHost) stderr() string {
	said, err := os.ReadFile(h.errLog)
	if err != nil {
		return fmt.Sprintf("(reading the host's stderr: %v)", err)
	}
	return strings.TrimSpace(string(said))
}

// line returns the host's next line, and false at the end of its output.
func (h *testHost) line() (string, bool) {
	ok := h.lines.Scan()
	return h.lines.Text(), ok
}

// linesUntil returns the host's lines up to the line last (without it),
// or all of them if its output ends first.
func (h *testHost) linesUntil(last string) []string {
	var lines []string
	for line, ok := h.line(); ok && line != last; line, ok = h.line() {
		lines = append(lines, line)
	}
	return lines
}

// kill SIGKILLs the host and returns Wait's error once it is reaped.
func (h *testHost) kill(ctx context.Context, t testing.TB) error {
	t.Helper()
	_ = h.cmd.Process.Signal(syscall.SIGKILL)
	return h.wait(ctx, t)
}

// wait returns Wait's error once the host is reaped.
func (h *testHost) wait(ctx context.Context, t testing.TB) error {
	t.Helper()
	recv(ctx, t, h.done, "the host's end")
	return h.err
}

// hostFail ends a host that failed: it says err on stderr, which the
// test shows (testHost), and returns the exit code 1.
func hostFail(err error) int {
	fmt.Fprintln(os.Stderr, "host:", err)
	return 1
}

// hostWait holds a host until its stdin ends (the test closes it) or the
// test kills it.
func hostWait() int {
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// fatalf kills the host, if it still runs, and fails the test, saying
// how the host ended ("signal: killed" if fatalf killed it) and what it
// wrote on its stderr.
func (h *testHost) fatalf(t testing.TB, format string, args ...any) {
	t.Helper()
	_ = h.cmd.Process.Kill()
	<-h.done
	h.quoted = true
	t.Fatalf(format+" (the host: %v; its stderr: %q)", append(args, h.err, h.stderr())...)
}

// feedFifo opens the FIFO fifo for writing, which waits for a reader, and
// writes one line to it.
func feedFifo(t testing.TB, fifo string) {
	t.Helper()
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("open fifo: %v", err)
	}
	defer f.Close()
	if _, err := f.WriteString("line\n"); err != nil {
		t.Fatalf("write fifo: %v", err)
	}
}
