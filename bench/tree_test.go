//go:build linux

package bench

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procvisor/proc"
	"github.com/procvisor/proc/proctest"

	"github.com/procvisor/proc/internal/testkit"
)

// Containment benchmarks (issue 10): what a cgroup per record costs a
// start, and how fast a killed tree is known to be empty.

// containManager returns a manager with the given containment that is
// closed when b ends, after checking with one start of `true` that its
// records get that containment. Where cgroups cannot be used, b is
// skipped, saying why.
func containManager(b *testing.B, mode proc.Containment) *proc.Manager {
	return containManagerOpts(b, proc.Options{Containment: mode})
}

// containManagerOpts is containManager with more options.
func containManagerOpts(b *testing.B, opts proc.Options) *proc.Manager {
	b.Helper()
	mode := opts.Containment
	m := proctest.NewManager(b, opts)
	p, err := m.Start(proc.StartRequest{Args: []string{"true"}})
	if errors.Is(err, proc.ErrUnsupported) {
		b.Skipf("containment %q is unavailable here: %v", mode, err)
	}
	if err != nil {
		b.Fatalf("Start(true) with containment %q = %v; want nil", mode, err)
	}
	<-p.Done()
	checkFinal(b, p, 0)
	if got := p.Info().Containment; got != string(mode) {
		b.Fatalf("Info().Containment = %q; want %q", got, mode)
	}
	return m
}

// truePairedContainRuns is the number of timed runs of each variant in a
// block of BenchmarkTrueContain: at least 100 consecutive starts, so that
// work a mode does off the start path (the cgroup worker) runs inside the
// measurement, as it does for a service that starts commands all day.
const truePairedContainRuns = 100

// BenchmarkTrueContain measures start to final of `true` in cgroup mode
// against the same start in group mode, paired as in BenchmarkTruePaired:
// each op is one block in which every variant makes one untimed run and
// then truePairedContainRuns timed ones. The order of group and cgroup
// alternates from block to block, so that neither always runs in the
// state the other left behind (the cgroup worker makes the next spare
// cgroup and removes the used ones after a start, off its path). Both
// managers are in their steady state.
//
// Reported: "x-group-cgroup", the median over the blocks of cgroup's block
// time over group's in the same block (target <= 1.05); "x-watchdog" and
// "x-watchdog-cgroup", group and cgroup mode with the host-death watchdog
// over the same mode without it (KeepOnHostExit; target <= 1.02); "x-raw-<variant>"
// against a bare exec.Command("true").Run(); "ns-<variant>", the median
// time of one run; and, as the steadier measure on a shared machine, the
// CPU time of this process per run ("cpu-ns-<variant>") and of the
// children it reaped ("child-cpu-ns-<variant>"), with their ratios
// "cpu-x-group-cgroup" and "child-cpu-x-group-cgroup". ns/op is a block.
func BenchmarkTrueContain(b *testing.B) {
	args := []string{"true"}
	group := containManager(b, proc.ContainGroup)
	cgroup := containManager(b, proc.ContainCgroup)
	// Group mode without the host-death watchdog: what the watchdog costs.
	nowatch := containManagerOpts(b, proc.Options{Containment: proc.ContainGroup, KeepOnHostExit: true})
	cgNowatch := containManagerOpts(b, proc.Options{Containment: proc.ContainCgroup, KeepOnHostExit: true})
	fillManager(b, group)
	fillManager(b, cgroup)
	fillManager(b, nowatch)
	fillManager(b, cgNowatch)
	type variant struct {
		name string
		run  func()
	}
	startOn := func(m *proc.Manager) func() {
		return func() { checkFinal(b, procRun(b, m, proc.StartRequest{Args: args}), 0) }
	}
	raw := variant{"raw", func() {
		if err := exec.Command(args[0]).Run(); err != nil {
			b.Fatalf("exec.Command(true).Run() = %v; want nil", err)
		}
	}}
	grp, cg := variant{"group", startOn(group)}, variant{"cgroup", startOn(cgroup)}
	nw := variant{"group-nowatch", startOn(nowatch)}
	cnw := variant{"cgroup-nowatch", startOn(cgNowatch)}
	names := []string{raw.name, grp.name, cg.name, nw.name, cnw.name}
	wall := map[string][]float64{}
	self := map[string][]float64{}
	child := map[string][]float64{}
	var xWall, xWatch, xWatchCg []float64
	b.ReportAllocs()
	block := 0
	for b.Loop() {
		order := []variant{raw, grp, cg, nw, cnw}
		if block%2 == 1 {
			order = []variant{raw, cnw, nw, cg, grp}
		}
		block++
		for _, v := range order {
			v.run()
			cpu := readCPU(b)
			start := time.Now()
			for range truePairedContainRuns {
				v.run()
			}
			d := time.Since(start)
			used := readCPU(b)
			wall[v.name] = append(wall[v.name], float64(d)/truePairedContainRuns)
			self[v.name] = append(self[v.name], float64(used.self-cpu.self)/truePairedContainRuns)
			child[v.name] = append(child[v.name], float64(used.children-cpu.children)/truePairedContainRuns)
		}
		last := func(m map[string][]float64, name string) float64 { return m[name][len(m[name])-1] }
		xWall = append(xWall, last(wall, "cgroup")/last(wall, "group"))
		xWatch = append(xWatch, last(wall, "group")/last(wall, "group-nowatch"))
		xWatchCg = append(xWatchCg, last(wall, "cgroup")/last(wall, "cgroup-nowatch"))
	}
	for _, name := range names {
		b.ReportMetric(medianOf(wall[name]), "ns-"+name)
		b.ReportMetric(medianOf(self[name]), "cpu-ns-"+name)
		b.ReportMetric(medianOf(child[name]), "child-cpu-ns-"+name)
		if name != "raw" {
			var x []float64
			for i := range wall[name] {
				x = append(x, wall[name][i]/wall["raw"][i])
			}
			b.ReportMetric(medianOf(x), "x-raw-"+name)
		}
	}
	b.ReportMetric(medianOf(xWall), "x-group-cgroup")
	b.ReportMetric(medianOf(xWatch), "x-watchdog")
	b.ReportMetric(medianOf(xWatchCg), "x-watchdog-cgroup")
	// Total CPU over all blocks: per-block CPU times are a few ticks of
	// the kernel's accounting, too coarse for a median of ratios.
	b.ReportMetric(sumOf(self["cgroup"])/sumOf(self["group"]), "cpu-x-group-cgroup")
	b.ReportMetric(sumOf(child["cgroup"])/sumOf(child["group"]), "child-cpu-x-group-cgroup")
}

// spawnGoroutines and spawnPerGoroutine shape a block of
// BenchmarkSpawnContain: 8 goroutines that each run `true` 25 times, one
// after another (200 consecutive starts).
const (
	spawnGoroutines   = 8
	spawnPerGoroutine = 25
)

// BenchmarkSpawnContain measures the spawn rate of 8 goroutines that each
// run `true` to final again and again, in cgroup mode against group mode:
// each op is one block of 200 starts (spawnGoroutines x
// spawnPerGoroutine) in each mode, the order alternating between ops.
// Both managers are in their steady state. Reported: "x-group-cgroup",
// the median over the ops of cgroup's block time over group's (target <=
// 1.05), "cpu-x-group-cgroup", the CPU time of this process in cgroup
// mode over group mode over all blocks, and "ms-<mode>", the median block
// time.
func BenchmarkSpawnContain(b *testing.B) {
	managers := map[proc.Containment]*proc.Manager{}
	for _, mode := range containModes {
		managers[mode] = containManager(b, mode)
		fillManager(b, managers[mode])
	}
	block := func(m *proc.Manager) {
		errs := make(chan error, spawnGoroutines) // one send per goroutine
		for range spawnGoroutines {
			// Ends after spawnPerGoroutine runs, or the first failure.
			go func() {
				for range spawnPerGoroutine {
					p, err := m.Start(proc.StartRequest{Args: []string{"true"}})
					if err != nil {
						errs <- err
						return
					}
					<-p.Done()
					if code := p.Info().ExitCode; code == nil || *code != 0 {
						errs <- fmt.Errorf("true: exit code %v; want 0", code)
						return
					}
				}
				errs <- nil
			}()
		}
		for range spawnGoroutines {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
	}
	wall := map[proc.Containment][]float64{}
	cpu := map[proc.Containment]time.Duration{}
	b.ReportAllocs()
	loopAlternating(b, func(mode proc.Containment) {
		before := readCPU(b)
		start := time.Now()
		block(managers[mode])
		wall[mode] = append(wall[mode], float64(time.Since(start)))
		cpu[mode] += readCPU(b).self - before.self
	})
	for _, mode := range containModes {
		b.ReportMetric(medianOf(wall[mode])/1e6, "ms-"+string(mode))
	}
	b.ReportMetric(medianOf(ratios(wall[proc.ContainCgroup], wall[proc.ContainGroup])), "x-group-cgroup")
	b.ReportMetric(float64(cpu[proc.ContainCgroup])/float64(cpu[proc.ContainGroup]), "cpu-x-group-cgroup")
}

// thousandSleeps is the number of concurrent `sleep` records of
// BenchmarkThousandContain.
const thousandSleeps = 1000

// BenchmarkThousandContain measures 1,000 concurrent starts of `sleep 600`
// and the Close that stops them, in cgroup mode against group mode: each
// op makes a Manager of each mode (the order alternating between ops),
// starts one `true` in it so that containment is decided and the
// watchdog runs, then times the 1,000 starts (from one goroutine, as a
// service's request loop would) and the Close. Reported:
// "x-group-cgroup-start" and "x-group-cgroup-close", the medians over the
// ops of cgroup's time over group's (targets <= 1.05 and <= 1.10), and
// "ms-<mode>-start", "ms-<mode>-close", the median times.
func BenchmarkThousandContain(b *testing.B) {
	starts := map[proc.Containment][]float64{}
	closes := map[proc.Containment][]float64{}
	b.ReportAllocs()
	loopAlternating(b, func(mode proc.Containment) {
		start, stop := thousandProc(b, mode)
		starts[mode] = append(starts[mode], float64(start))
		closes[mode] = append(closes[mode], float64(stop))
	})
	for _, mode := range containModes {
		b.ReportMetric(medianOf(starts[mode])/1e6, "ms-"+string(mode)+"-start")
		b.ReportMetric(medianOf(closes[mode])/1e6, "ms-"+string(mode)+"-close")
	}
	g, c := proc.ContainGroup, proc.ContainCgroup
	b.ReportMetric(medianOf(ratios(starts[c], starts[g])), "x-group-cgroup-start")
	b.ReportMetric(medianOf(ratios(closes[c], closes[g])), "x-group-cgroup-close")
}

// medianOf is the median of v; 0 if v is empty.
func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// sumOf is the sum of v.
func sumOf(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s
}

// containModes are the modes the containment benchmarks compare.
var containModes = []proc.Containment{proc.ContainGroup, proc.ContainCgroup}

// loopAlternating runs b's loop: each op calls run once for every mode of
// containModes, in their order on even ops and reversed on odd ones, so
// that neither mode always runs in the state the other left behind.
func loopAlternating(b *testing.B, run func(mode proc.Containment)) {
	b.Helper()
	reversed := slices.Clone(containModes)
	slices.Reverse(reversed)
	for op := 0; b.Loop(); op++ {
		order := containModes
		if op%2 == 1 {
			order = reversed
		}
		for _, mode := range order {
			run(mode)
		}
	}
}

// ratios is a[i] / b[i] for each i.
func ratios(a, b []float64) []float64 {
	x := make([]float64, len(a))
	for i := range a {
		x[i] = a[i] / b[i]
	}
	return x
}

// killTreeMembers is the number of background members of the tree that
// BenchmarkKillTree kills; with the shell that started them the tree has
// one more.
const killTreeMembers = 200

// killTreeScript starts killTreeMembers sleeps in the background, says
// "ready" once it has forked the last one, and waits.
var killTreeScript = fmt.Sprintf("for i in $(seq %d); do sleep 600 & done; echo ready; wait", killTreeMembers)

var readyLine = regexp.MustCompile(`^ready$`)

// killTiming is one kill of a tree, each duration from just before
// Signal(Kill): when Signal returned, when Done closed, and when the tree
// was known to be empty from outside (cgroup.events says "populated 0";
// in group mode, every member's pidfd reports its exit). empty is never
// earlier than done: the tree is known empty only when both are.
type killTiming struct{ signal, done, empty time.Duration }

// BenchmarkKillTree measures Signal(Kill) of a tree of a shell and its
// 200 background sleeps until the tree is known to be empty, in cgroup
// mode (target: 10 ms) and in group mode for comparison. Each op kills one
// tree of each mode, the order alternating between ops; building the
// trees (about 200 forks each) is inside ns/op, so ns/op is not the
// figure to read. Reported, medians over the ops: "ms-<mode>-signal",
// "ms-<mode>-done" and "ms-<mode>-empty" (see killTiming),
// "max-ms-<mode>-empty" the worst, and "x-group-cgroup" the median of
// cgroup's empty time over group's in the same op.
//
// Emptiness is observed without the library: cgroup.events of the
// record's cgroup (found from /proc/<pid>/cgroup before the kill), polled
// for POLLPRI; in group mode, a pidfd of each of the 201 members found in
// /proc before the kill, polled until every one is readable, then a scan
// of /proc confirms that the group has no live member left.
func BenchmarkKillTree(b *testing.B) {
	managers := map[proc.Containment]*proc.Manager{}
	for _, mode := range containModes {
		managers[mode] = containManager(b, mode)
	}
	timings := map[proc.Containment][]killTiming{}
	b.ReportAllocs()
	loopAlternating(b, func(mode proc.Containment) {
		timings[mode] = append(timings[mode], killTree(b, managers[mode], mode))
	})
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	for _, mode := range containModes {
		var signal, done, empty []float64
		for _, t := range timings[mode] {
			signal = append(signal, ms(t.signal))
			done = append(done, ms(t.done))
			empty = append(empty, ms(t.empty))
		}
		b.ReportMetric(medianOf(signal), "ms-"+string(mode)+"-signal")
		b.ReportMetric(medianOf(done), "ms-"+string(mode)+"-done")
		b.ReportMetric(medianOf(empty), "ms-"+string(mode)+"-empty")
		b.ReportMetric(slices.Max(empty), "max-ms-"+string(mode)+"-empty")
	}
	var x []float64
	for i, g := range timings[proc.ContainGroup] {
		x = append(x, float64(timings[proc.ContainCgroup][i].empty)/float64(g.empty))
	}
	b.ReportMetric(medianOf(x), "x-group-cgroup")
}

// killTree starts killTreeScript on m, waits until the shell said "ready"
// and checks that all its members exist, then kills the tree and times
// the kill.
func killTree(b *testing.B, m *proc.Manager, mode proc.Containment) killTiming {
	b.Helper()
	ctx := testkit.Ctx(b, time.Minute)
	p, err := m.Start(proc.StartRequest{Args: []string{"sh", "-c", killTreeScript}})
	if err != nil {
		b.Fatalf("Start(%d sleeps) = %v; want nil", killTreeMembers, err)
	}
	if _, err := p.WaitFor(ctx, readyLine, true); err != nil {
		b.Fatalf("WaitFor(ready) = %v; want nil", err)
	}
	pid := p.Info().PID
	// The shell printed "ready" after its last fork returned: every member
	// exists now, whether or not it has exec'd sleep yet.
	var (
		members []int
		wait    func() error
		check   func() error
	)
	switch mode {
	case proc.ContainCgroup:
		dir, err := cgroupDirOf(pid)
		if err != nil {
			b.Fatal(err)
		}
		members = cgroupProcs(dir)
		events, err := os.Open(filepath.Join(dir, "cgroup.events"))
		if err != nil {
			b.Fatal(err)
		}
		defer events.Close()
		wait = func() error { return waitUnpopulated(events) }
		check = func() error {
			if pids := cgroupProcs(dir); len(pids) > 0 {
				return fmt.Errorf("cgroup %s still holds %d processes after populated 0", dir, len(pids))
			}
			return nil
		}
	default:
		members = groupMembers(pid)
		fds := make([]int, 0, len(members))
		defer func() {
			for _, fd := range fds {
				_ = unix.Close(fd)
			}
		}()
		for _, member := range members {
			fd, err := unix.PidfdOpen(member, 0)
			if err != nil {
				b.Fatalf("pidfd_open(%d) = %v; want a descriptor", member, err)
			}
			fds = append(fds, fd)
		}
		wait = func() error { return waitPidfds(fds) }
		check = func() error {
			if pids := groupMembers(pid); len(pids) > 0 {
				return fmt.Errorf("group %d still has %d live members after all pidfds reported an exit", pid, len(pids))
			}
			return nil
		}
	}
	if len(members) != killTreeMembers+1 {
		b.Fatalf("%s tree of %d has %d members; want %d", mode, pid, len(members), killTreeMembers+1)
	}

	emptied := make(chan error, 1) // one send, by the goroutine below
	var emptyAt time.Time
	start := time.Now()
	// Ends when the tree is empty (or its cgroup.events cannot be read).
	go func() {
		err := wait()
		emptyAt = time.Now()
		emptied <- err
	}()
	if err := p.Signal(proc.Kill); err != nil {
		b.Fatalf("Signal(kill) = %v; want nil", err)
	}
	signalled := time.Since(start)
	<-p.Done()
	done := time.Since(start)
	if err := <-emptied; err != nil {
		b.Fatalf("waiting for the %s tree to be empty: %v", mode, err)
	}
	if err := check(); err != nil {
		b.Fatal(err)
	}
	return killTiming{signal: signalled, done: done, empty: max(done, emptyAt.Sub(start))}
}

// cgroupDirOf returns the cgroup v2 directory of process pid, from
// /proc/<pid>/cgroup and the cgroup2 mount in /proc/self/mountinfo.
func cgroupDirOf(pid int) (string, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return "", err
	}
	var rel string
	for _, line := range strings.Split(string(data), "\n") {
		if r, ok := strings.CutPrefix(line, "0::"); ok {
			rel = r
		}
	}
	if rel == "" {
		return "", fmt.Errorf("process %d is in no cgroup v2", pid)
	}
	mountinfo, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer mountinfo.Close()
	sc := bufio.NewScanner(mountinfo)
	for sc.Scan() {
		// "id parent major:minor root mountpoint options ... - fstype ..."
		pre, post, _ := strings.Cut(sc.Text(), " - ")
		f := strings.Fields(pre)
		if len(f) >= 5 && strings.HasPrefix(post, "cgroup2 ") {
			inside, ok := strings.CutPrefix(rel, f[3])
			if !ok {
				return "", fmt.Errorf("cgroup %s of process %d is outside the mount's root %s", rel, pid, f[3])
			}
			return filepath.Join(f[4], inside), nil
		}
	}
	return "", errors.New("no cgroup2 file system is mounted")
}

// cgroupProcs lists cgroup.procs of dir; nothing if dir is gone.
func cgroupProcs(dir string) []int {
	data, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitUnpopulated returns once the cgroup.events file f says "populated 0"
// or the cgroup is gone (it can be removed only once it is empty). The
// kernel flags the file for POLLPRI when a value in it changes after the
// last read, so a change between the read and the poll is not missed.
func waitUnpopulated(f *os.File) error {
	fd := int(f.Fd())
	buf := make([]byte, 256)
	for {
		n, err := unix.Pread(fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENOENT) {
				return nil // removed
			}
			return err
		}
		if populated(buf[:n]) == "0" {
			return nil
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLPRI}}
		if _, err := unix.Poll(fds, -1); err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// populated returns the value of the "populated" line of cgroup.events.
func populated(events []byte) string {
	for _, line := range strings.Split(string(events), "\n") {
		if v, ok := strings.CutPrefix(line, "populated "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// waitPidfds returns once every pidfd in fds is readable: its process has
// exited (a zombie is not alive).
func waitPidfds(fds []int) error {
	pending := make([]unix.PollFd, 0, len(fds))
	for _, fd := range fds {
		pending = append(pending, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	for len(pending) > 0 {
		if _, err := unix.Poll(pending, -1); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return err
		}
		pending = slices.DeleteFunc(pending, func(p unix.PollFd) bool { return p.Revents != 0 })
	}
	return nil
}

// groupMembers lists the processes in /proc whose process group is pgid
// and that are neither zombies nor dead.
func groupMembers(pgid int) []int {
	names, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := strconv.Itoa(pgid)
	var pids []int
	for _, e := range names {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp ...": comm may hold spaces.
		i := strings.LastIndexByte(string(data), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(data[i+1:]))
		if len(f) >= 3 && f[0] != "Z" && f[0] != "X" && f[2] == want {
			pids = append(pids, pid)
		}
	}
	return pids
}
