//go:build linux

package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procvisor/proc"
)

// thousandVsExecVariants are the variants of BenchmarkThousandVsExec:
// os/exec ("exec-") and the library ("proc-") in each mode.
var thousandVsExecVariants = []string{"exec-group", "proc-group", "exec-cgroup", "proc-cgroup"}

// BenchmarkThousandVsExec measures the library's 1,000 concurrent starts
// of `sleep 600` and their stop against os/exec doing the same work in the
// same op, in each mode (design section 10's rows):
//
//   - "exec-group": os/exec, each child leading a session of its own
//     (Setsid), its stdout and stderr one pipe that a goroutine of its own
//     reads to EOF before reaping the child (an asynchronous supervisor's
//     least: it must keep the output and see the exit while the caller
//     goes on); the stop is SIGTERM to every child, then until every
//     goroutine returned;
//   - "exec-cgroup": the same, each child also cloned into a cgroup made
//     for it on the start path, whose cpu.stat is read and which is
//     removed after the child was reaped (thousandFloor's "cgroup" with
//     pipes);
//   - "proc-group", "proc-cgroup": a Manager of that mode, warmed by one
//     `true` (containment decided, the watchdog running), 1,000 Starts and
//     Manager.Close.
//
// Each op runs every variant once, the order rotating. Reported, the
// medians over the ops of the library's time over os/exec's in the same
// op: "x-exec-group-start", "x-exec-group-close", "x-exec-cgroup-start",
// "x-exec-cgroup-close" (targets <= 1.05), and "x-exec-<mode>-cpu", the
// same of this process's CPU time over the start and the stop together
// (the children's own excluded); and "ms-<variant>-start",
// "ms-<variant>-close", the median times.
func BenchmarkThousandVsExec(b *testing.B) {
	own, err := cgroupDirOf(os.Getpid())
	if err != nil {
		b.Skipf("no cgroup v2 here: %v", err)
	}
	parent := filepath.Join(own, fmt.Sprintf("bench-vs-exec-%d", os.Getpid()))
	if err := os.Mkdir(parent, 0o755); err != nil {
		b.Skipf("cannot make a cgroup in %s: %v", own, err)
	}
	b.Cleanup(func() { _ = unix.Rmdir(parent) })
	starts := map[string][]float64{}
	closes := map[string][]float64{}
	cpu := map[string][]float64{} // host CPU of the start and the stop
	b.ReportAllocs()
	for op := 0; b.Loop(); op++ {
		for i := range thousandVsExecVariants {
			v := thousandVsExecVariants[(i+op)%len(thousandVsExecVariants)]
			var start, stop time.Duration
			used := readCPU(b)
			switch v {
			case "exec-group":
				start, stop = thousandExec(b, parent, false)
			case "exec-cgroup":
				start, stop = thousandExec(b, parent, true)
			case "proc-group":
				start, stop = thousandProc(b, proc.ContainGroup)
			case "proc-cgroup":
				start, stop = thousandProc(b, proc.ContainCgroup)
			}
			starts[v] = append(starts[v], float64(start))
			closes[v] = append(closes[v], float64(stop))
			cpu[v] = append(cpu[v], float64(readCPU(b).self-used.self))
		}
	}
	for _, v := range thousandVsExecVariants {
		b.ReportMetric(medianOf(starts[v])/1e6, "ms-"+v+"-start")
		b.ReportMetric(medianOf(closes[v])/1e6, "ms-"+v+"-close")
	}
	for _, mode := range []string{"group", "cgroup"} {
		b.ReportMetric(medianOf(ratios(starts["proc-"+mode], starts["exec-"+mode])), "x-exec-"+mode+"-start")
		b.ReportMetric(medianOf(ratios(closes["proc-"+mode], closes["exec-"+mode])), "x-exec-"+mode+"-close")
		b.ReportMetric(medianOf(ratios(cpu["proc-"+mode], cpu["exec-"+mode])), "x-exec-"+mode+"-cpu")
	}
}

// thousandExec is one run of BenchmarkThousandVsExec's os/exec variants:
// thousandSleeps starts with pipes, then the stop.
func thousandExec(b *testing.B, parent string, cgroups bool) (start, stop time.Duration) {
	b.Helper()
	var kids children
	defer kids.killLeft()
	t0 := time.Now()
	for i := range thousandSleeps {
		cmd := kids.sleeper()
		r, w, err := os.Pipe()
		if err != nil {
			b.Fatalf("pipe: %v", err)
		}
		cmd.Stdout, cmd.Stderr = w, w
		dir := filepath.Join(parent, "t"+strconv.Itoa(i))
		fd := -1
		if cgroups {
			fd = childCgroup(b, dir)
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
		}
		err = cmd.Start()
		_ = w.Close()
		if fd >= 0 {
			_ = unix.Close(fd)
		}
		if err != nil {
			_ = r.Close()
			b.Fatalf("start sleep: %v", err)
		}
		kids.started(cmd)
		// Ends when the pipe is at EOF and the child was reaped (and its
		// cgroup removed).
		go func() {
			buf := make([]byte, 512)
			_, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, buf)
			_ = r.Close()
			_ = cmd.Wait()
			if cgroups {
				var stat [512]byte
				if _, rerr := readAll(filepath.Join(dir, "cpu.stat"), stat[:]); rerr != nil {
					err = errors.Join(err, fmt.Errorf("read cpu.stat: %w", rerr))
				}
				if rerr := unix.Rmdir(dir); rerr != nil {
					err = errors.Join(err, fmt.Errorf("rmdir %s: %w", dir, rerr))
				}
			}
			kids.ended <- err
		}()
	}
	start = time.Since(t0)
	return start, kids.stop(b)
}

// thousandProc is one run of a Manager of mode, warmed by one `true`:
// thousandSleeps starts, then its Close; BenchmarkThousandContain's run
// and BenchmarkThousandVsExec's library variants.
func thousandProc(b *testing.B, mode proc.Containment) (start, stop time.Duration) {
	b.Helper()
	m := proc.NewManager(proc.Options{Containment: mode, KillGrace: 10 * time.Second})
	p, err := m.Start(proc.StartRequest{Args: []string{"true"}})
	if errors.Is(err, proc.ErrUnsupported) {
		_ = m.Close()
		b.Skipf("containment %q is unavailable here: %v", mode, err)
	}
	if err != nil {
		_ = m.Close()
		b.Fatalf("Start(true) with containment %q = %v; want nil", mode, err)
	}
	<-p.Done()
	t0 := time.Now()
	for range thousandSleeps {
		if _, err := m.Start(proc.StartRequest{Args: []string{"sleep", "600"}}); err != nil {
			_ = m.Close()
			b.Fatalf("Start(sleep) = %v; want nil", err)
		}
	}
	t1 := time.Now()
	if err := m.Close(); err != nil {
		b.Fatalf("Close = %v; want nil", err)
	}
	return t1.Sub(t0), time.Since(t1)
}
