//go:build linux

package proc_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procvisor/proc"
)

func init() {
	helpers["review-inflight-host"] = reviewInflightHost
}

// TestReviewHostDeathDuringStarts: in group mode a child is registered
// with the watchdog only after cmd.Start returned (treeSetup.started →
// newGroupTreeGuarded → guard). A host killed in between must not leave a
// child that runs, leads its own session, and was never told to the
// watchdog (design section 14: "every tree a Manager started is killed
// within 100 ms when the host process dies"); Pdeathsig covers it.
//
// Each round runs a host that starts `sleep 600` children from four
// goroutines without pause, and SIGKILLs it after a random number of
// starts. The children carry a marker in their environment; once the
// watchdog has exited, none may be left.
func TestReviewHostDeathDuringStarts(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 120*time.Second)
	const rounds = 10
	escaped := 0
	for round := 0; round < rounds; round++ {
		mark := fmt.Sprintf("review-inflight-%d-%d", os.Getpid(), rand.Uint64())
		host := helperCmd("review-inflight-host", mark)
		host.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		host.Stderr = os.Stderr
		out, err := host.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		in, err := host.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := host.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- host.Wait() }()
		sc := bufio.NewScanner(out)
		var watchdog int
		if sc.Scan() {
			watchdog, _ = strconv.Atoi(strings.TrimPrefix(sc.Text(), "watchdog "))
		}
		if watchdog == 0 {
			_ = host.Process.Kill()
			t.Fatalf("host: no watchdog (%v)", <-exited)
		}
		wfd := treePidfd(t, watchdog)
		killAt := 20 + rand.IntN(40)
		for n := 0; n < killAt && sc.Scan(); n++ {
		}
		_ = host.Process.Signal(syscall.SIGKILL)
		_ = in.Close()
		recv(ctx, t, exited, "the host's end")
		treeWaitPidfd(ctx, t, wfd, "the watchdog")
		// The watchdog's SIGKILLs may take a moment to end their targets.
		var left []int
		for _, pid := range reviewMarked(mark) {
			fd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				continue
			}
			if !diesWithin(fd, time.Second) {
				left = append(left, pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			_ = unix.Close(fd)
		}
		if len(left) > 0 {
			escaped++
			t.Logf("round %d: %d children outlived the host and its watchdog: %v", round, len(left), left)
		}
	}
	if escaped > 0 {
		t.Errorf("in %d of %d rounds a child started while the host was killed outlived it (group mode registers the group with the watchdog only after the child runs)", escaped, rounds)
	}
}

// reviewMarked lists the live processes whose environment holds mark.
func reviewMarked(mark string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !bytes.Contains(env, []byte("REVIEW_MARK="+mark)) {
			continue
		}
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// reviewInflightHost starts marked `sleep 600` children in group mode from
// four goroutines, printing a line per start, until it is killed.
func reviewInflightHost(args []string) int {
	m := proc.NewManager(proc.Options{Containment: proc.ContainGroup})
	req := proc.StartRequest{Args: []string{"sleep", "600"}, Env: map[string]string{"REVIEW_MARK": args[0]}}
	if _, err := m.Start(req); err != nil {
		fmt.Fprintln(os.Stderr, "host:", err)
		return 1
	}
	fmt.Println("watchdog", findWatchdog())
	var mu sync.Mutex
	for range 4 {
		go func() {
			for {
				if _, err := m.Start(req); err != nil {
					fmt.Fprintln(os.Stderr, "host:", err)
					return
				}
				mu.Lock()
				fmt.Println("started")
				mu.Unlock()
			}
		}()
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}
