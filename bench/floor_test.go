//go:build linux

package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procvisor/proc"
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
	parent := benchCgroup(b, "bench-floor")
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
	var kids children
	defer kids.killLeft()
	t0 := time.Now()
	for i := range thousandSleeps {
		cmd := kids.sleeper()
		dir := filepath.Join(parent, "t"+strconv.Itoa(i))
		fd := -1
		if cgroups {
			fd = childCgroup(b, dir)
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, fd
		}
		err := cmd.Start()
		if fd >= 0 {
			_ = unix.Close(fd)
		}
		if err != nil {
			b.Fatalf("start sleep: %v", err)
		}
		kids.started(cmd)
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
			kids.ended <- err
		}()
	}
	start = time.Since(t0)
	return start, kids.stop(b)
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

// BenchmarkTrueFloor is the kernel's floor under BenchmarkTrueContain's
// x-group-cgroup, in the same run as the library's ratio: start to final
// of `true` in blocks of truePairedContainRuns, os/exec alone against the
// library, each in group and in cgroup form. Variants:
//
//   - "async-group": os/exec in the asynchronous shape a library needs
//     (rawCaptureAsync: the pipe read by a goroutine that then reaps, the
//     caller waiting on a channel), the child leading a session of its
//     own (Setsid), as in group mode;
//   - "async-cgroup": the same, the child cloned into one cgroup made
//     beforehand and reused for every start (as the library reuses a
//     record's cgroup), with what a reused cgroup must cost at the least:
//     before the caller is woken, the cgroup's cpu.stat (the final
//     record's tree usage) and cgroup.events (the tree is empty) read
//     through descriptors held open; after it, the next start's baseline
//     (cpu.stat again) and the check that nothing was made below it (a
//     stat of the held directory);
//   - "group", "cgroup": the library (steadyManager) in those modes.
//
// Each op is one block: every variant makes one untimed run and then
// truePairedContainRuns timed ones, the order reversed on every other
// block. Reported, medians over the blocks of ratios of block times in
// the same block: "x-floor" (async-cgroup over async-group: what the
// kernel charges for a cgroup per record), "x-group-cgroup" (the library's
// cgroup over its group mode, BenchmarkTrueContain's row) and
// "x-above-floor" (x-group-cgroup over x-floor in each block: what the
// library adds to the kernel's part); "ns-<variant>", the median time of
// one run.
func BenchmarkTrueFloor(b *testing.B) {
	parent := benchCgroup(b, "bench-true-floor")
	dir := filepath.Join(parent, "t1")
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = unix.Rmdir(dir) })
	var cg floorCgroup
	var err error
	if cg.dir, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
		b.Fatal(err)
	}
	defer unix.Close(cg.dir)
	for _, f := range []struct {
		fd   *int
		name string
	}{{&cg.stat, "cpu.stat"}, {&cg.events, "cgroup.events"}} {
		if *f.fd, err = unix.Openat(cg.dir, f.name, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
			b.Fatal(err)
		}
		defer unix.Close(*f.fd)
	}
	args := []string{"true"}
	buf := make([]byte, 64<<10)
	startOn := func(m *proc.Manager) func() {
		return func() { checkFinal(b, procRun(b, m, proc.StartRequest{Args: args}), 0) }
	}
	type variant struct {
		name string
		run  func()
	}
	variants := []variant{
		{"async-group", func() {
			if err := <-floorAsync(args, buf, nil); err != nil {
				b.Fatalf("async true: %v", err)
			}
		}},
		{"async-cgroup", func() {
			if err := <-floorAsync(args, buf, &cg); err != nil {
				b.Fatalf("async true in a cgroup: %v", err)
			}
			if err := cg.ready(); err != nil {
				b.Fatal(err)
			}
		}},
		{"group", startOn(steadyManager(b, proc.Options{Containment: proc.ContainGroup}))},
		{"cgroup", startOn(steadyManager(b, proc.Options{Containment: proc.ContainCgroup}))},
	}
	wall := map[string][]float64{}
	order := slices.Clone(variants)
	b.ReportAllocs()
	for block := 0; b.Loop(); block++ {
		copy(order, variants)
		if block%2 == 1 {
			slices.Reverse(order)
		}
		for _, v := range order {
			v.run()
			start := time.Now()
			for range truePairedContainRuns {
				v.run()
			}
			wall[v.name] = append(wall[v.name], float64(time.Since(start))/truePairedContainRuns)
		}
	}
	if b.N == 0 {
		return
	}
	floor := ratios(wall["async-cgroup"], wall["async-group"])
	lib := ratios(wall["cgroup"], wall["group"])
	for _, v := range variants {
		b.ReportMetric(medianOf(wall[v.name]), "ns-"+v.name)
	}
	b.ReportMetric(medianOf(floor), "x-floor")
	b.ReportMetric(medianOf(lib), "x-group-cgroup")
	b.ReportMetric(medianOf(ratios(lib, floor)), "x-above-floor")
}

// floorCgroup is BenchmarkTrueFloor's reused cgroup: its directory,
// cpu.stat and cgroup.events, held open.
type floorCgroup struct{ dir, stat, events int }

// end reads what a final record in cg reads before its end is published:
// its tree's usage (cpu.stat) and that the tree is empty (cgroup.events).
func (cg *floorCgroup) end() error {
	var buf [512]byte
	if _, err := unix.Pread(cg.stat, buf[:], 0); err != nil {
		return fmt.Errorf("read cpu.stat: %w", err)
	}
	n, err := unix.Pread(cg.events, buf[:], 0)
	if err != nil {
		return fmt.Errorf("read cgroup.events: %w", err)
	}
	if !strings.Contains(string(buf[:n]), "populated 0") {
		return fmt.Errorf("cgroup.events after the reap: %q; want populated 0", buf[:n])
	}
	return nil
}

// ready does what readies cg for the next start, off the record's path:
// nothing below it (its directory's link count) and the next baseline
// (cpu.stat).
func (cg *floorCgroup) ready() error {
	var st unix.Stat_t
	if err := unix.Fstat(cg.dir, &st); err != nil || st.Nlink != 2 {
		return fmt.Errorf("the reused cgroup: stat %v, %d links; want 2", err, st.Nlink)
	}
	var buf [512]byte
	if _, err := unix.Pread(cg.stat, buf[:], 0); err != nil {
		return fmt.Errorf("read cpu.stat: %w", err)
	}
	return nil
}

// floorAsync starts args with os/exec leading a session of its own (in
// cg if not nil), its output read with buf by a goroutine that then reaps
// it (and reads cg's end, cg.end) and sends the result.
func floorAsync(args []string, buf []byte, cg *floorCgroup) <-chan error {
	setup := func(cmd *exec.Cmd) {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if cg != nil {
			cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, cg.dir
		}
	}
	var end func() error
	if cg != nil {
		end = cg.end
	}
	return rawCaptureAsyncWith(args, buf, setup, end)
}

// benchCgroup makes the cgroup name-PID beside the benchmark's own and
// removes it when b ends; it skips b where there is no cgroup v2 or the
// cgroup cannot be made.
func benchCgroup(b *testing.B, name string) string {
	b.Helper()
	own, err := cgroupDirOf(os.Getpid())
	if err != nil {
		b.Skipf("no cgroup v2 here: %v", err)
	}
	parent := filepath.Join(own, fmt.Sprintf("%s-%d", name, os.Getpid()))
	if err := os.Mkdir(parent, 0o755); err != nil {
		b.Skipf("cannot make a cgroup in %s: %v", own, err)
	}
	b.Cleanup(func() { _ = unix.Rmdir(parent) })
	return parent
}

// childCgroup makes the cgroup dir for a child and opens it, for
// SysProcAttr.CgroupFD; the caller closes the descriptor once the child
// started.
func childCgroup(b *testing.B, dir string) int {
	b.Helper()
	if err := unix.Mkdir(dir, 0o755); err != nil {
		b.Fatalf("mkdir %s: %v", dir, err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatalf("open %s: %v", dir, err)
	}
	return fd
}

// children are the thousandSleeps children of an os/exec run
// (thousandFloor, thousandExec), each in a session of its own, and the
// results of the goroutines that wait for them.
type children struct {
	cmds  []*exec.Cmd
	ended chan error // one send per child's waiter
}

// sleeper returns a child `sleep 600` that leads a session of its own;
// the first call makes ended, before any waiter sends to it.
func (k *children) sleeper() *exec.Cmd {
	if k.ended == nil {
		k.ended = make(chan error, thousandSleeps)
	}
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd
}

// started counts cmd among the children once it started.
func (k *children) started(cmd *exec.Cmd) { k.cmds = append(k.cmds, cmd) }

// killLeft kills the children still counted: after a failure, nothing is
// left running.
func (k *children) killLeft() {
	for _, cmd := range k.cmds {
		_ = cmd.Process.Kill()
	}
}

// stop sends SIGTERM to every child and waits for their waiters' results
// (one each); it returns how long that took, counts no child any more
// (nothing is left to kill), and fails b with the waiters' errors.
func (k *children) stop(b *testing.B) time.Duration {
	b.Helper()
	t1 := time.Now()
	for _, cmd := range k.cmds {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	var errs []error
	for range k.cmds {
		errs = append(errs, <-k.ended)
	}
	stop := time.Since(t1)
	k.cmds = nil
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	return stop
}
