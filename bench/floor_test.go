//go:build linux

package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel's floor under BenchmarkThousandContain: the same 1,000
// starts of `sleep 600` and their stop, made with os/exec alone, without
// the library. "group" starts each child leading a session of its own;
// "cgroup" also makes a cgroup for each child on the start path and
// clones the child into it, and at the child's end reads the cgroup's
// cpu.stat (a final record's tree usage) and removes it; "cgroup-nostat"
// is "cgroup" without the read. Each op runs every variant once, the
// order rotating between ops.

// floorVariants are the variants of BenchmarkThousandFloor.
var floorVariants = []string{"group", "cgroup", "cgroup-nostat"}

// BenchmarkThousandFloor measures, for each variant, 1,000 starts of
// `sleep 600` from one goroutine, each child waited for by a goroutine
// of its own (as a library's exit goroutine would), and the stop: SIGTERM
// to every child, then until every waiter returned (and, with cgroups,
// removed its cgroup). Reported: "x-group-<variant>-start" and
// "x-group-<variant>-close", the medians over the ops of the variant's
// time over group's in the same op, and "ms-<variant>-start",
// "ms-<variant>-close", the median times.
func BenchmarkThousandFloor(b *testing.B) {
	own, err := cgroupDirOf(os.Getpid())
	if err != nil {
		b.Skipf("no cgroup v2 here: %v", err)
	}
	parent := filepath.Join(own, fmt.Sprintf("bench-floor-%d", os.Getpid()))
	if err := os.Mkdir(parent, 0o755); err != nil {
		b.Skipf("cannot make a cgroup in %s: %v", own, err)
	}
	b.Cleanup(func() { _ = unix.Rmdir(parent) })
	starts := map[string][]float64{}
	closes := map[string][]float64{}
	b.ReportAllocs()
	for op := 0; b.Loop(); op++ {
		for i := range floorVariants {
			v := floorVariants[(i+op)%len(floorVariants)]
			start, stop := thousandFloor(b, parent, v)
			starts[v] = append(starts[v], float64(start))
			closes[v] = append(closes[v], float64(stop))
		}
	}
	for _, v := range floorVariants {
		b.ReportMetric(medianOf(starts[v])/1e6, "ms-"+v+"-start")
		b.ReportMetric(medianOf(closes[v])/1e6, "ms-"+v+"-close")
		if v != "group" {
			b.ReportMetric(medianOf(ratios(starts[v], starts["group"])), "x-group-"+v+"-start")
			b.ReportMetric(medianOf(ratios(closes[v], closes["group"])), "x-group-"+v+"-close")
		}
	}
}

// thousandFloor runs one variant once: thousandSleeps starts, then the
// stop, and returns how long each took.
func thousandFloor(b *testing.B, parent, variant string) (start, stop time.Duration) {
	b.Helper()
	cgroups := variant != "group"
	ended := make(chan error, thousandSleeps) // one send per waiter
	var cmds []*exec.Cmd
	defer func() {
		// After a failure: nothing is left running.
		for _, cmd := range cmds {
			_ = cmd.Process.Kill()
		}
	}()
	t0 := time.Now()
	for i := range thousandSleeps {
		cmd := exec.Command("sleep", "600")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		dir := filepath.Join(parent, "t"+strconv.Itoa(i))
		fd := -1
		if cgroups {
			if err := unix.Mkdir(dir, 0o755); err != nil {
				b.Fatalf("mkdir %s: %v", dir, err)
			}
			var err error
			if fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
				b.Fatalf("open %s: %v", dir, err)
			}
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
		}
		err := cmd.Start()
		if fd >= 0 {
			_ = unix.Close(fd)
		}
		if err != nil {
			b.Fatalf("start sleep: %v", err)
		}
		cmds = append(cmds, cmd)
		// Ends when the child was reaped (and its cgroup removed).
		go func() {
			_ = cmd.Wait()
			var err error
			if cgroups {
				if variant == "cgroup" {
					var buf [512]byte
					if _, err = readAll(filepath.Join(dir, "cpu.stat"), buf[:]); err != nil {
						err = fmt.Errorf("read cpu.stat: %w", err)
					}
				}
				if rerr := unix.Rmdir(dir); rerr != nil {
					err = errors.Join(err, fmt.Errorf("rmdir %s: %w", dir, rerr))
				}
			}
			ended <- err
		}()
	}
	t1 := time.Now()
	for _, cmd := range cmds {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	var errs []error
	for range cmds {
		errs = append(errs, <-ended)
	}
	t2 := time.Now()
	cmds = nil
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	return t1.Sub(t0), t2.Sub(t1)
}

// readAll reads the file at path into buf with one open, reads and one
// close.
func readAll(path string, buf []byte) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n, nil
}
