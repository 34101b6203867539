//go:build unix

package proc_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/procvisor/proc"
)

// Unix-only tests of design sections 8 and 16: running out of descriptors
// while opening the log file, and ClearEnv with nothing added.

func init() {
	helpers["eco-log-emfile"] = ecoLogEMFILE
}

// ecoLogEMFILE runs in a child of the test, so that the test process keeps
// its own descriptor limit: it lowers RLIMIT_NOFILE, opens descriptors
// until none is left, and starts a process whose LogPath (in args[0]) then
// cannot be opened. It prints "ok" and exits 0 when the start failed as
// design section 8 says; otherwise it prints what was wrong and exits 1.
func ecoLogEMFILE(args []string) int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Println("getrlimit:", err)
		return 1
	}
	lim.Cur = min(lim.Cur, 128)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Println("setrlimit:", err)
		return 1
	}
	m := proc.NewManager(proc.Options{})
	defer m.Close()
	logPath := filepath.Join(args[0], "out.log")
	req := proc.StartRequest{ID: "emfile", Args: []string{os.Args[0]}, LogPath: logPath}

	var fillers []*os.File
	for len(fillers) < 1000 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			break
		}
		fillers = append(fillers, f)
	}
	p, err := m.Start(req)
	for _, f := range fillers {
		_ = f.Close()
	}

	var problems []string
	if p != nil {
		problems = append(problems, "the start succeeded")
	}
	if !errors.Is(err, syscall.EMFILE) {
		problems = append(problems, "the error does not wrap EMFILE")
	}
	if in := mgrSentinelsIn(err); len(in) != 0 {
		problems = append(problems, fmt.Sprintf("the error wraps sentinels %v", in))
	}
	if err != nil && !strings.Contains(err.Error(), logPath) {
		problems = append(problems, "the error does not name the log file")
	}
	if _, statErr := os.Lstat(logPath); !errors.Is(statErr, os.ErrNotExist) {
		problems = append(problems, fmt.Sprintf("the log file is there (%v)", statErr))
	}
	if n := len(m.List()); n != 0 {
		problems = append(problems, fmt.Sprintf("%d records", n))
	}
	if len(problems) > 0 {
		fmt.Printf("Start with no descriptor left = %v: %s\n", err, strings.Join(problems, "; "))
		return 1
	}
	fmt.Println("ok")
	return 0
}

// TestLogPathOutOfDescriptors pins design section 8: running out of
// descriptors while opening the log file is an OS refusal (EMFILE wrapped,
// no sentinel), not bad input, and leaves nothing behind.
func TestLogPathOutOfDescriptors(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	snap := waitFinal(ctx, t, mustStart(t, m, helperReq("eco-log-emfile", t.TempDir())))
	if code := exitCode(t, snap.Info); code != 0 || snap.Output.Text != "ok\n" {
		t.Errorf("helper exited %d: %q", code, snap.Output.Text)
	}
}

// TestClearEnvEmpty pins that ClearEnv with no Env gives the child an empty
// environment, not the parent's (a nil exec.Cmd.Env inherits).
func TestClearEnvEmpty(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	ecoSetSecret(t)
	m := newManager(t, proc.Options{})
	snap, err := m.Run(ctx, proc.StartRequest{Args: []string{"env"}, ClearEnv: true})
	if err != nil {
		t.Fatalf("Run(env) = %v", err)
	}
	if code := exitCode(t, snap.Info); code != 0 || snap.Output.Text != "" {
		t.Errorf("env with ClearEnv exited %d and printed %q; want an empty environment", code, snap.Output.Text)
	}
}
