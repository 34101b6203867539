//go:build linux

package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procvisor/proc"
)

func init() { benchHelpers["thousand-mem"] = thousandMemHelper }

// BenchmarkThousandMemory measures what 1,000 running children cost the
// host that supervises them (issue 38's row: no more than 17 KiB of
// resident memory each and 6 OS threads): each op runs, in a fresh
// process of its own (this binary as the helper "thousand-mem", so that
// no earlier benchmark's threads or heap count), 1,000 `sleep 600` with
// their output captured, and reads the process's VmRSS and Threads from
// /proc/self/status before the first start and once the last start
// returned; then it stops them. Variants: proc-group and proc-cgroup, a
// Manager of that mode; exec-group, os/exec with Setsid, a pipe per child
// and a goroutine reading it and waiting for the child (for scale: each
// waiting goroutine holds a thread in wait4).
//
// Reported per variant, medians over the ops: "rss-KiB-per-child-<v>",
// the growth of VmRSS over the 1,000 starts divided by 1,000, and
// "threads-<v>", the process's threads with the 1,000 running
// ("threads-max-<v>": the most in any op).
func BenchmarkThousandMemory(b *testing.B) {
	variants := []string{"proc-group", "proc-cgroup", "exec-group"}
	rss := map[string][]float64{}
	threads := map[string][]float64{}
	for b.Loop() {
		for _, v := range variants {
			cmd := exec.Command(os.Args[0], v)
			cmd.Env = append(os.Environ(), benchHelperEnv+"=thousand-mem")
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				b.Fatalf("%s: %v", v, err)
			}
			var m thousandMem
			if err := json.Unmarshal(out, &m); err != nil {
				b.Fatalf("%s: %v in %q", v, err, out)
			}
			if m.Skip != "" {
				b.Skipf("%s: %s", v, m.Skip)
			}
			rss[v] = append(rss[v], float64(m.After.RSS-m.Before.RSS)/float64(thousandSleeps))
			threads[v] = append(threads[v], float64(m.After.Threads))
		}
	}
	for _, v := range variants {
		b.ReportMetric(medianOf(rss[v]), "rss-KiB-per-child-"+v)
		b.ReportMetric(medianOf(threads[v]), "threads-"+v)
		b.ReportMetric(slices.Max(threads[v]), "threads-max-"+v)
	}
}

// thousandMem is what the helper "thousand-mem" reports: its status
// before the first start and after the last, or why it could not run.
type thousandMem struct {
	Before, After procStatus
	Skip          string `json:",omitempty"`
}

// procStatus is the part of /proc/self/status BenchmarkThousandMemory
// reads: VmRSS in KiB, and Threads.
type procStatus struct {
	RSS, Threads int64
}

// readProcStatus reads this process's procStatus.
func readProcStatus() (procStatus, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return procStatus{}, err
	}
	var st procStatus
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *int64
		switch name {
		case "VmRSS":
			dst = &st.RSS
		case "Threads":
			dst = &st.Threads
		default:
			continue
		}
		if *dst, err = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64); err != nil {
			return procStatus{}, fmt.Errorf("status %s: %w", name, err)
		}
	}
	return st, nil
}

// thousandMemHelper is BenchmarkThousandMemory's child: args[0] names the
// variant. It prints a thousandMem as JSON; it leaves no child running.
func thousandMemHelper(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "thousand-mem: want VARIANT")
		return 2
	}
	var m thousandMem
	var err error
	switch args[0] {
	case "proc-group":
		m, err = thousandMemProc(proc.ContainGroup)
	case "proc-cgroup":
		m, err = thousandMemProc(proc.ContainCgroup)
	case "exec-group":
		m, err = thousandMemExec()
	default:
		err = fmt.Errorf("unknown variant %q", args[0])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "thousand-mem:", err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(m); err != nil {
		fmt.Fprintln(os.Stderr, "thousand-mem:", err)
		return 1
	}
	return 0
}

// thousandMemProc runs thousandSleeps `sleep 600` under a Manager of mode
// (warmed by one `true`, as thousandProc's), then closes it.
func thousandMemProc(mode proc.Containment) (thousandMem, error) {
	var m thousandMem
	mgr := proc.NewManager(proc.Options{Containment: mode, KillGrace: 10 * time.Second})
	defer mgr.Close()
	p, err := mgr.Start(proc.StartRequest{Args: []string{"true"}})
	if err != nil {
		m.Skip = fmt.Sprintf("containment %q: %v", mode, err)
		return m, nil
	}
	<-p.Done()
	if m.Before, err = readProcStatus(); err != nil {
		return m, err
	}
	for range thousandSleeps {
		if _, err := mgr.Start(proc.StartRequest{Args: []string{"sleep", "600"}}); err != nil {
			return m, fmt.Errorf("start sleep: %w", err)
		}
	}
	if m.After, err = readProcStatus(); err != nil {
		return m, err
	}
	return m, mgr.Close()
}

// thousandMemExec runs thousandSleeps `sleep 600` with os/exec as
// thousandExec's group variant does (Setsid, a pipe and a goroutine that
// reads it and waits for the child), then stops them.
func thousandMemExec() (thousandMem, error) {
	var m thousandMem
	var err error
	if m.Before, err = readProcStatus(); err != nil {
		return m, err
	}
	var cmds []*exec.Cmd
	ended := make(chan error, thousandSleeps)
	defer func() {
		for _, cmd := range cmds {
			_ = cmd.Process.Kill()
		}
		for range cmds {
			<-ended
		}
	}()
	for range thousandSleeps {
		cmd := exec.Command("sleep", "600")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		r, w, err := os.Pipe()
		if err != nil {
			return m, err
		}
		cmd.Stdout, cmd.Stderr = w, w
		err = cmd.Start()
		_ = w.Close()
		if err != nil {
			_ = r.Close()
			return m, fmt.Errorf("start sleep: %w", err)
		}
		cmds = append(cmds, cmd)
		// Ends when the pipe is at EOF and the child was reaped.
		go func() {
			_, err := io.Copy(io.Discard, r)
			_ = r.Close()
			_ = cmd.Wait()
			ended <- err
		}()
	}
	m.After, err = readProcStatus()
	return m, err
}
