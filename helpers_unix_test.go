//go:build unix

package proc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procvisor/proc/internal/procfs"
	"go.uber.org/goleak"
)

// The Unix part of the shared test helpers: runs isolated from other
// tests, descriptor and goroutine counts, /proc reading, and a few
// shorthands for starting and closing.

// isolatedEnv names the test that a child test binary runs alone.
const isolatedEnv = "PROC_TEST_ISOLATED"

// isolated reports whether this is the isolated run of t. Counts that
// belong to the whole test process — open descriptors, goroutines — are
// only exact when no other test runs at the same time, and tests here run
// in parallel. So in the test binary that go test started, isolated runs t
// again, alone, in a child test binary, fails t if that run fails
// (relaying its output), and returns false: the caller returns at once. In
// the child it returns true and the caller does the work.
func isolated(ctx context.Context, t *testing.T) bool {
	t.Helper()
	if os.Getenv(isolatedEnv) == t.Name() {
		return true
	}
	timeout := 5 * time.Minute
	if deadline, ok := ctx.Deadline(); ok {
		timeout = time.Until(deadline)
	}
	// Anchor each level of the name: -test.run matches the levels one by
	// one, and "^TestX/group$" would also run TestX/cgroup.
	levels := strings.Split(t.Name(), "/")
	for i, l := range levels {
		levels[i] = "^" + regexp.QuoteMeta(l) + "$"
	}
	cmd := exec.CommandContext(ctx, os.Args[0],
		"-test.run="+strings.Join(levels, "/"),
		"-test.count=1", "-test.v", "-test.timeout="+timeout.String())
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != helperEnv && name != isolatedEnv && name != "GORACE" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, isolatedEnv+"="+t.Name(), "GORACE="+helperGorace)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	text := string(out)
	switch {
	case err != nil:
		t.Fatalf("isolated run of %s: %v; its output:\n%s", t.Name(), err, text)
	case strings.Contains(text, "--- SKIP: "+t.Name()+" "):
		t.Skipf("isolated run of %s skipped:\n%s", t.Name(), text)
	case !strings.Contains(text, "--- PASS: "+t.Name()+" "):
		t.Fatalf("isolated run of %s did not pass; its output:\n%s", t.Name(), text)
	}
	t.Logf("isolated run of %s:\n%s", t.Name(), text)
	return false
}

// noLeaks records the open descriptors and goroutines now and returns a
// check that fails t unless, when it is called, they are those of before.
// Only exact in an isolated run.
func noLeaks(t *testing.T) (check func(what string)) {
	t.Helper()
	return noLeaksBut(t, nil, 0)
}

// noLeaksBut is noLeaks that leaves out of the comparison, before and
// after, the descriptors whose targets kept reports true (a cache the
// code under test keeps by design), and checks only that at most keptMax
// of those are open after; kept nil leaves none out.
func noLeaksBut(t *testing.T, kept func(target string) bool, keptMax int) (check func(what string)) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	leaveOut := func(fds map[string]string) (n int) {
		for fd, target := range fds {
			if kept != nil && kept(target) {
				delete(fds, fd)
				n++
			}
		}
		return n
	}
	before := openFDs(t)
	leaveOut(before)
	return func(what string) {
		t.Helper()
		after := openFDs(t)
		if n := leaveOut(after); n > keptMax {
			t.Errorf("%s: %d open descriptors of the kind kept by design; want %d at most", what, n, keptMax)
		}
		var added, gone []string
		for fd, target := range after {
			if before[fd] != target {
				added = append(added, fd+" -> "+target)
			}
		}
		for fd, target := range before {
			if after[fd] != target {
				gone = append(gone, fd+" -> "+target)
			}
		}
		if len(after) != len(before) || len(added) != 0 {
			t.Errorf("%s: %d open descriptors; want %d as before; new or changed %q, gone %q",
				what, len(after), len(before), added, gone)
		}
		if err := goleak.Find(ignore); err != nil {
			t.Errorf("goroutines %s: %v", what, err)
		}
	}
}

// openFDs returns the open descriptors of the test process and what they
// refer to.
func openFDs(t testing.TB) map[string]string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("list open descriptors: %v", err)
	}
	fds := make(map[string]string, len(entries))
	for _, e := range entries {
		// The descriptor of the listing itself is gone by now, as is one
		// closed since: neither is open.
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil {
			continue
		}
		fds[e.Name()] = target
	}
	return fds
}

// hasProcFS reports whether /proc/<pid>/stat can be read (Linux).
func hasProcFS() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}

// needProcFS skips t where there is no /proc to read.
func needProcFS(t testing.TB) {
	t.Helper()
	if !hasProcFS() {
		t.Skipf("no /proc on this system")
	}
}

// needTool skips the test where a program it runs is not installed.
func needTool(t testing.TB, name string) {
	t.Helper()
	if name == "" {
		return
	}
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s is not installed (%v); it is on the development machines and in CI", name, err)
	}
}

// pfExiting is the kernel's PF_EXITING task flag (/proc/<pid>/stat field
// 9): the process is in its exit, past any signal and user code.
const pfExiting = 0x4

// procStat is what the tests read of /proc/<pid>/stat.
type procStat struct {
	exists             bool // false: the PID is gone (reaped)
	pid, pgrp, session int
	ttyNr              int
	state              byte
	flags              uint64
	comm               string
}

func (k procStat) String() string {
	return fmt.Sprintf("pid %d (%s) state %c flags %#x group %d", k.pid, k.comm, k.state, k.flags, k.pgrp)
}

// dead reports whether k is gone, a zombie or being reaped.
func (k procStat) dead() bool { return !k.exists || k.state == 'Z' || k.state == 'X' }

// memberDead reports whether k, once a member of process group pgid, is
// dead: reaped, a zombie, or its PID already reused outside the group.
func (k procStat) memberDead(pgid int) bool { return k.dead() || k.pgrp != pgid }

// readStat reads /proc/<pid>/stat; a PID that is gone has exists false.
func readStat(t testing.TB, pid int) procStat {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return procStat{pid: pid}
	}
	st, ok := procfs.ParseStat(data)
	if err != nil || !ok {
		t.Fatalf("/proc/%d/stat = %q, %v: cannot parse", pid, data, err)
	}
	comm := data[bytes.IndexByte(data, '(')+1 : bytes.LastIndexByte(data, ')')]
	return procStat{exists: true, pid: pid, pgrp: st.Pgrp, session: st.Session, ttyNr: int(st.TTYNr),
		state: st.State, flags: st.Flags, comm: string(comm)}
}

// tasks lists the processes of the system (those that did not vanish
// while being listed).
func tasks(t testing.TB) []procStat {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("list /proc: %v", err)
	}
	var all []procStat
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			if k := readStat(t, pid); k.exists {
				all = append(all, k)
			}
		}
	}
	return all
}

// liveMembers returns the processes that belong to one of the groups and
// are not zombies (a zombie is dead; reaping orphans is PID 1's job).
func liveMembers(t testing.TB, groups ...int) []procStat {
	t.Helper()
	var live []procStat
	for _, k := range tasks(t) {
		if slices.Contains(groups, k.pgrp) && !k.dead() {
			live = append(live, k)
		}
	}
	return live
}

// tasksWith returns the processes of the system whose command line holds
// marker as one whole argument.
func tasksWith(t testing.TB, marker string) []procStat {
	t.Helper()
	var found []procStat
	for _, k := range tasks(t) {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", k.pid))
		if err == nil && bytes.Contains(cmdline, []byte("\x00"+marker+"\x00")) {
			found = append(found, k)
		}
	}
	return found
}

// withExtraFiles is a CommandContext hook that passes files to the child
// as its descriptors 3 and up.
func withExtraFiles(files ...*os.File) func(context.Context, string, ...string) *exec.Cmd {
	return func(ctx context.Context, name string, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.ExtraFiles = files
		return cmd
	}
}

// readPipe reads n bytes from f (a pipe), fewer only at end-of-file, and
// fails t if ctx ends first.
func readPipe(ctx context.Context, t testing.TB, f *os.File, n int) string {
	t.Helper()
	if deadline, ok := ctx.Deadline(); ok {
		if err := f.SetReadDeadline(deadline); err != nil {
			t.Fatalf("set read deadline: %v", err)
		}
	}
	buf := make([]byte, n)
	got, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read %d bytes from %s: %v (got %q)", n, f.Name(), err, buf[:got])
	}
	return string(buf[:got])
}
