//go:build linux

package sandbox

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStartForked: StartForked returns once the child is forked, and
// Release, called at once, returns only once the child is held at its
// exec stop: a signal sent then reaches the program (a signal before the
// stop would be taken by the hold, and the exec's SIGTRAP would end the
// child). Released before its exec stop, the child gets no exit-kill and
// keeps running, untraced, once the thread that held it is gone.
func TestStartForked(t *testing.T) {
	t.Parallel()
	sup := support(t)
	ctx := testCtx(t)
	sleep := func() (*exec.Cmd, *Held) {
		t.Helper()
		cmd := exec.Command("sleep", "100")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		h, err := StartForked(cmd, cmd.Start, Policy{ExitKill: true}, sup)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Stop)
		return cmd, h
	}
	for i := range 20 {
		cmd, h := sleep()
		h.Release()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Fatalf("child %d, sent SIGTERM once released: %v; want killed by SIGTERM", i, cmd.ProcessState)
		}
	}
	cmd, h := sleep()
	h.Release()
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	for {
		st := readStatus(t, cmd.Process.Pid)
		if st["TracerPid"] == "0" && strings.HasPrefix(st["State"], "S") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("child status %v; want untraced, sleeping", st)
		case <-time.After(time.Millisecond):
		}
	}
}
