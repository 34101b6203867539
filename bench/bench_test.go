//go:build linux

package bench

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gocmd "github.com/go-cmd/cmd"
	"golang.org/x/sys/unix"

	"github.com/procvisor/proc"
	"github.com/procvisor/proc/proctest"

	"github.com/procvisor/proc/internal/testkit"
)

// captureFlag sets the bytes BenchmarkCapture's child writes. The default
// keeps a run short; the README table is measured with -capture=1GiB.
var captureFlag = flag.String("capture", "256MiB",
	"bytes written by the child in BenchmarkCapture (README table: 1GiB)")

// rawBufSize is the read buffer of the raw baseline: the size of a Linux
// pipe, and of proc's own pump buffer.
const rawBufSize = 64 << 10

// parseSize reads "1GiB", "256MiB", "4M", "64k" or a plain byte count.
func parseSize(s string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(s), "iB"), "B")
	mult := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		}
		if mult > 1 {
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("size %q: want a positive count such as 1GiB, 256MiB or 65536", s)
	}
	return n * mult, nil
}

// sizeName names n in the largest unit that divides it: "1GiB", "64MiB".
func sizeName(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// nsPerOp holds the ns/op of every finished sub-benchmark, by full name,
// so that a later sub-benchmark can report itself as a multiple of it.
// Benchmarks run one at a time, but the map is locked all the same.
var (
	nsMu    sync.Mutex
	nsPerOp = map[string]float64{}
)

// finish records b's ns/op; if the sibling sub-benchmark named baseline has
// already finished in this run, it also reports b's time as a multiple of
// the baseline's, as the metric "x-<baseline>".
func finish(b *testing.B, baseline string) {
	b.Helper()
	if b.N == 0 {
		return
	}
	ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	name := b.Name()
	nsMu.Lock()
	nsPerOp[name] = ns
	base, ok := nsPerOp[name[:strings.LastIndexByte(name, '/')+1]+baseline]
	nsMu.Unlock()
	if ok && baseline != "" && base > 0 {
		b.ReportMetric(ns/base, "x-"+baseline)
	}
}

// cpuUse is the CPU time (user + system) of this process and of its reaped
// children. On a shared machine it is steadier than wall time, and it
// tells the supervisor's own cost from the children's.
type cpuUse struct{ self, children time.Duration }

// measured runs op in the benchmark's loop and reports its allocations,
// its CPU use (readCPU) and its ratio to baseline (finish).
func measured(b *testing.B, baseline string, op func()) {
	b.Helper()
	b.ReportAllocs()
	cpu := readCPU(b)
	for b.Loop() {
		op()
	}
	cpu.report(b)
	finish(b, baseline)
}

func readCPU(b *testing.B) cpuUse {
	b.Helper()
	var self, children syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err != nil {
		b.Fatalf("getrusage(self) = %v; want nil", err)
	}
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children); err != nil {
		b.Fatalf("getrusage(children) = %v; want nil", err)
	}
	cpu := func(ru *syscall.Rusage) time.Duration {
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return cpuUse{self: cpu(&self), children: cpu(&children)}
}

// report reports the CPU time used since c per op: "cpu-ms/op" of this
// process (the benchmark's goroutines, the library, the GC) and
// "child-cpu-ms/op" of the children reaped meanwhile.
func (c cpuUse) report(b *testing.B) {
	b.Helper()
	now := readCPU(b)
	n := float64(b.N)
	b.ReportMetric(float64((now.self-c.self).Microseconds())/1e3/n, "cpu-ms/op")
	b.ReportMetric(float64((now.children-c.children).Microseconds())/1e3/n, "child-cpu-ms/op")
}

// steadyManager returns a manager with opts that already holds
// DefaultMaxRetained final records, as a long-running service's does after
// its first thousand commands: from then on every record that becomes
// final drops the oldest one. It is closed when b ends.
func steadyManager(b *testing.B, opts proc.Options) *proc.Manager {
	b.Helper()
	m := proctest.NewManager(b, opts)
	fillManager(b, m)
	return m
}

// fillManager brings m, which holds no running record, to its steady
// state: it starts DefaultMaxRetained runs of `true` and waits until they
// are final, so that m holds DefaultMaxRetained final records.
func fillManager(b *testing.B, m *proc.Manager) {
	b.Helper()
	procs := make([]*proc.Process, 0, proc.DefaultMaxRetained)
	for range proc.DefaultMaxRetained {
		p, err := m.Start(proc.StartRequest{Args: []string{"true"}})
		if err != nil {
			b.Fatalf("Start(true) = %v; want nil", err)
		}
		procs = append(procs, p)
		if len(procs) >= 16 {
			// A few at a time: the machine has two cores.
			<-procs[len(procs)-16].Done()
		}
	}
	for _, p := range procs {
		<-p.Done()
	}
	if n := len(m.List()); n != proc.DefaultMaxRetained {
		b.Fatalf("List() has %d records; want %d", n, proc.DefaultMaxRetained)
	}
}

// freshManager hands out a manager that has never dropped a record: it
// replaces the manager, outside the timer, before it would hold more than
// DefaultMaxRetained records.
type freshManager struct {
	b       *testing.B
	opts    proc.Options // of every manager it makes
	m       *proc.Manager
	started int
}

// get returns a manager that can take n more records without dropping one.
func (f *freshManager) get(n int) *proc.Manager {
	if f.m == nil || f.started+n > proc.DefaultMaxRetained {
		f.b.StopTimer()
		if f.m != nil {
			if err := f.m.Close(); err != nil {
				f.b.Fatalf("Close() = %v; want nil", err)
			}
		}
		f.m, f.started = proctest.NewManager(f.b, f.opts), 0
		f.b.StartTimer()
	}
	f.started += n
	return f.m
}

// procRun starts req on m and waits until the record is final: start to
// final, as a user of the manager sees it.
func procRun(b *testing.B, m *proc.Manager, req proc.StartRequest) *proc.Process {
	b.Helper()
	p, err := m.Start(req)
	if err != nil {
		b.Fatalf("Start(%q) = %v; want nil", req.Args, err)
	}
	<-p.Done()
	return p
}

// checkFinal fails b unless p exited with 0 after writing want bytes
// (want < 0: any number).
func checkFinal(b *testing.B, p *proc.Process, want int64) {
	b.Helper()
	info := p.Info()
	if info.ExitCode == nil || *info.ExitCode != 0 {
		b.Fatalf("%q: exit code %v; want 0", info.Args, info.ExitCode)
	}
	if want >= 0 && info.OutputBytes != want {
		b.Fatalf("%q: OutputBytes = %d; want %d", info.Args, info.OutputBytes, want)
	}
}

// rawStart starts args with os/exec and the pipe end that pipe makes
// (cmd.StdoutPipe, say) before the start.
func rawStart[T any](args []string, pipe func(*exec.Cmd) (T, error)) (*exec.Cmd, T, error) {
	cmd := exec.Command(args[0], args[1:]...)
	end, err := pipe(cmd)
	if err == nil {
		err = cmd.Start()
	}
	return cmd, end, err
}

// rawCapture runs args with os/exec, reading its stdout through a pipe with
// buf, and returns the number of bytes read.
func rawCapture(args []string, buf []byte) (int64, error) {
	cmd, out, err := rawStart(args, (*exec.Cmd).StdoutPipe)
	if err != nil {
		return 0, err
	}
	// io.Discard is an io.ReaderFrom and *os.File an io.WriterTo: either
	// would make CopyBuffer ignore buf and read 8 KiB at a time. Hiding
	// them makes the baseline read exactly as proc's pump does.
	n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, struct{ io.Reader }{out}, buf)
	if werr := cmd.Wait(); err == nil {
		err = werr
	}
	return n, err
}

// rawCaptureAsync starts args with os/exec and returns at once; a
// goroutine reads its stdout and stderr (one pipe) through buf until EOF,
// reaps it, sends the error on the returned channel and ends.
func rawCaptureAsync(args []string, buf []byte) <-chan error {
	return rawCaptureAsyncWith(args, buf, nil, nil)
}

// rawCaptureAsyncWith is rawCaptureAsync with setup, if not nil, called
// on the command before its start, and end, if not nil, called by the
// goroutine after a reap without error (its error is sent instead).
func rawCaptureAsyncWith(args []string, buf []byte, setup func(*exec.Cmd), end func() error) <-chan error {
	done := make(chan error, 1) // one send, by the goroutine below
	cmd, out, err := rawStart(args, func(cmd *exec.Cmd) (io.ReadCloser, error) {
		if setup != nil {
			setup(cmd)
		}
		out, err := cmd.StdoutPipe()
		cmd.Stderr = cmd.Stdout
		return out, err
	})
	if err != nil {
		done <- err
		return done
	}
	// Ends at the child's end: its pipe's EOF, then the reap.
	go func() {
		_, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, struct{ io.Reader }{out}, buf)
		if werr := cmd.Wait(); err == nil {
			err = werr
		}
		if err == nil && end != nil {
			err = end()
		}
		done <- err
	}()
	return done
}

// gocmdRun runs args with go-cmd's default (buffered) Cmd and waits for
// its final status.
func gocmdRun(b *testing.B, args []string) gocmd.Status {
	b.Helper()
	st := <-gocmd.NewCmd(args[0], args[1:]...).Start()
	if st.Error != nil || st.Exit != 0 || !st.Complete {
		b.Fatalf("go-cmd %q: error %v, exit %d, complete %v; want nil, 0, true", args, st.Error, st.Exit, st.Complete)
	}
	return st
}

// BenchmarkCapture measures capture throughput: `head -c SIZE /dev/zero`
// (SIZE from -capture) from start until the output is fully read, through
// the manager (argv form, start to final), through os/exec reading the pipe
// raw with a 64 KiB buffer, and through go-cmd (which keeps all of it).
// Target: proc within 10% of raw (x-raw <= 1.10).
func BenchmarkCapture(b *testing.B) {
	size, err := parseSize(*captureFlag)
	if err != nil {
		b.Fatal(err)
	}
	args := []string{"head", "-c", strconv.FormatInt(size, 10), "/dev/zero"}
	b.Run("raw", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		buf := make([]byte, rawBufSize)
		cpu := readCPU(b)
		for b.Loop() {
			n, err := rawCapture(args, buf)
			if err != nil || n != size {
				b.Fatalf("raw %q = %d, %v; want %d, nil", args, n, err, size)
			}
		}
		cpu.report(b)
		finish(b, "")
	})
	b.Run("proc", func(b *testing.B) {
		m := proctest.NewManager(b, proc.Options{})
		b.SetBytes(size)
		measured(b, "raw", func() {
			p := procRun(b, m, proc.StartRequest{Args: args})
			checkFinal(b, p, size)
		})
	})
	b.Run("gocmd", func(b *testing.B) {
		b.SetBytes(size)
		measured(b, "raw", func() {
			gocmdRun(b, args)
		})
	})
}

// metricHeapObjects is the heap occupied by objects, live or not yet
// swept, read without stopping the world. It lags small allocations still
// cached per P by a few tens of KiB; runtime.ReadMemStats is exact but
// stops the world, too often to call every millisecond.
const metricHeapObjects = "/memory/classes/heap/objects:bytes"

// heapUse is what one run did to the heap, in bytes.
type heapUse struct {
	// peak is the largest heap growth sampled every millisecond (through
	// metricHeapObjects) over the heap after a full GC before the run. It
	// counts garbage not yet collected, so it depends on when the GC runs.
	peak int64
	// allocated is everything the run allocated, garbage included
	// (MemStats.TotalAlloc): an exact upper bound of the peak that does
	// not depend on the GC.
	allocated int64
	// retained is the heap growth (MemStats.HeapAlloc) after a full GC at
	// the end, while the run's result is still referenced.
	retained int64
}

// measureHeap runs run and measures its heap use. The two GCs before the
// run also empty sync.Pools, so a pooled buffer the run needs is counted.
func measureHeap(run func() any) heapUse {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	base := int64(before.HeapAlloc)

	stop := make(chan struct{})
	peakc := make(chan int64, 1) // buffered: the sampler never blocks on exit
	// The sampler ends when stop is closed; peakc joins it.
	go func() {
		s := []metrics.Sample{{Name: metricHeapObjects}}
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		var peak int64
		for {
			metrics.Read(s)
			peak = max(peak, int64(s[0].Value.Uint64()))
			select {
			case <-stop:
				peakc <- peak
				return
			case <-t.C:
			}
		}
	}()
	result := run()
	close(stop)
	peak := <-peakc
	runtime.ReadMemStats(&after)
	use := heapUse{
		peak:      max(peak, int64(after.HeapAlloc)) - base,
		allocated: int64(after.TotalAlloc - before.TotalAlloc),
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	use.retained = int64(after.HeapAlloc) - base
	runtime.KeepAlive(result)
	return use
}

// reportHeap reports the largest of each measure over the runs of b.
func reportHeap(b *testing.B, uses []heapUse) {
	var worst heapUse
	for _, u := range uses {
		worst.peak = max(worst.peak, u.peak)
		worst.allocated = max(worst.allocated, u.allocated)
		worst.retained = max(worst.retained, u.retained)
	}
	b.ReportMetric(float64(worst.peak), "peak-heap-B")
	b.ReportMetric(float64(worst.allocated), "alloc-heap-B")
	b.ReportMetric(float64(worst.retained), "retained-heap-B")
}

// BenchmarkCaptureMemory measures the heap growth while capturing 64 MiB
// and 1 GiB of `head -c SIZE /dev/zero` with default buffers. Target for
// proc: peak-heap-B the same for both sizes and below 1 MiB. go-cmd, which
// buffers everything, does the same work for comparison.
func BenchmarkCaptureMemory(b *testing.B) {
	for _, size := range []int64{64 << 20, 1 << 30} {
		args := []string{"head", "-c", strconv.FormatInt(size, 10), "/dev/zero"}
		b.Run(sizeName(size)+"/proc", func(b *testing.B) {
			m := proctest.NewManager(b, proc.Options{})
			b.SetBytes(size)
			b.ReportAllocs()
			var uses []heapUse
			for b.Loop() {
				uses = append(uses, measureHeap(func() any {
					p := procRun(b, m, proc.StartRequest{Args: args})
					checkFinal(b, p, size)
					return p
				}))
			}
			reportHeap(b, uses)
			finish(b, "")
		})
		b.Run(sizeName(size)+"/gocmd", func(b *testing.B) {
			b.SetBytes(size)
			b.ReportAllocs()
			var uses []heapUse
			for b.Loop() {
				uses = append(uses, measureHeap(func() any {
					return gocmdRun(b, args)
				}))
			}
			reportHeap(b, uses)
			finish(b, "proc")
		})
	}
}

// BenchmarkTrue measures start to final of `true` (argv form) against a
// bare exec.Command("true").Run(). proc runs in group mode on a manager in
// its steady state (it already holds MaxRetained records, so each new final
// record drops the oldest); proc-fresh in group mode on managers that never
// dropped a record; proc-cgroup with the default options (cgroup mode where
// cgroups can be used) in its steady state. The README's row is read from
// BenchmarkTruePaired, which pairs the variants within blocks.
//
// Two os/exec baselines bound what any capturing supervisor can reach:
// raw-pipe reads the output on the caller's goroutine and then waits, as a
// blocking call does; raw-async is os/exec used the way an asynchronous
// supervisor must use it (Start returns, a goroutine reads the output to
// EOF and reaps, the caller waits on a channel). proc does the same with a
// goroutine per stream and one exit goroutine, so that it sees the exit
// while a grandchild holds the pipe.
func BenchmarkTrue(b *testing.B) {
	b.Run("raw", func(b *testing.B) {
		measured(b, "", func() {
			if err := exec.Command("true").Run(); err != nil {
				b.Fatalf("exec.Command(true).Run() = %v; want nil", err)
			}
		})
	})
	b.Run("raw-pipe", func(b *testing.B) {
		// os/exec capturing output the way any supervisor must: a pipe and
		// a reader. This is the floor for a library that keeps output.
		buf := make([]byte, 64<<10)
		measured(b, "raw", func() {
			if _, err := rawCapture([]string{"true"}, buf); err != nil {
				b.Fatalf("rawCapture(true) = %v; want nil", err)
			}
		})
	})
	b.Run("raw-async", func(b *testing.B) {
		buf := make([]byte, 64<<10)
		measured(b, "raw", func() {
			if err := <-rawCaptureAsync([]string{"true"}, buf); err != nil {
				b.Fatalf("rawCaptureAsync(true) = %v; want nil", err)
			}
		})
	})
	b.Run("proc", func(b *testing.B) {
		m := steadyManager(b, groupMode)
		measured(b, "raw", func() {
			checkFinal(b, procRun(b, m, proc.StartRequest{Args: []string{"true"}}), 0)
		})
	})
	b.Run("proc-fresh", func(b *testing.B) {
		f := &freshManager{b: b, opts: groupMode}
		measured(b, "raw", func() {
			checkFinal(b, procRun(b, f.get(1), proc.StartRequest{Args: []string{"true"}}), 0)
		})
	})
	b.Run("proc-cgroup", func(b *testing.B) {
		m := steadyManager(b, proc.Options{})
		measured(b, "raw", func() {
			checkFinal(b, procRun(b, m, proc.StartRequest{Args: []string{"true"}}), 0)
		})
	})
	b.Run("gocmd", func(b *testing.B) {
		measured(b, "raw", func() {
			gocmdRun(b, []string{"true"})
		})
	})
}

// groupMode is the Options of the README's `true` row (design section
// 10): group mode, with the host-death watchdog as by default.
var groupMode = proc.Options{Containment: proc.ContainGroup}

// BenchmarkTruePaired measures start to final of `true` (argv form, from
// Start until Done is closed) in a way that a shared machine disturbs less
// than BenchmarkTrue's sub-benchmarks, run one after another for a second
// each, whose ratios move by 10-20% from round to round. Each op is one
// block: every variant in turn makes one untimed run (so that none is
// timed in the state the previous variant left behind) and then
// truePairedRuns timed runs, one after another; the order of the variants
// is reversed on every other block. A block's time is the wall time of a
// variant's timed runs.
//
// Variants: raw, a bare exec.Command("true").Run(); raw-pipe and
// raw-async, os/exec capturing the output as BenchmarkTrue describes;
// group, proc in group mode (the README's row, design section 10: target
// x-async-group <= 1.05); group-nowatch, group mode without the host-death
// watchdog (KeepOnHostExit), so that "x-watchdog" (group over
// group-nowatch) is the watchdog's share; cgroup, proc with the default
// options (cgroup mode where cgroups can be used); gocmd, go-cmd's
// buffered Cmd. The proc variants run on managers in their steady state
// (steadyManager).
//
// Reported, each the median over the blocks of a ratio of two block times
// of the same block: "x-raw-<variant>" over raw, "x-async-<variant>" over
// raw-async, "x-pipe-<variant>" over raw-pipe (for proc's variants),
// "x-watchdog"; and "ns-<variant>", the median time of one run, and
// "cpu-ns-<variant>", this process's CPU time per run over all blocks.
// ns/op is a whole block.
func BenchmarkTruePaired(b *testing.B) {
	args := []string{"true"}
	buf := make([]byte, 64<<10)
	startOn := func(m *proc.Manager) func() {
		return func() { checkFinal(b, procRun(b, m, proc.StartRequest{Args: args}), 0) }
	}
	nowatch := groupMode
	nowatch.KeepOnHostExit = true
	type trueVariant struct {
		name string
		run  func()
	}
	variants := []trueVariant{
		{"raw", func() {
			if err := exec.Command(args[0]).Run(); err != nil {
				b.Fatalf("exec.Command(true).Run() = %v; want nil", err)
			}
		}},
		{"raw-pipe", func() {
			if _, err := rawCapture(args, buf); err != nil {
				b.Fatalf("rawCapture(true) = %v; want nil", err)
			}
		}},
		{"raw-async", func() {
			if err := <-rawCaptureAsync(args, buf); err != nil {
				b.Fatalf("rawCaptureAsync(true) = %v; want nil", err)
			}
		}},
		{"group", startOn(steadyManager(b, groupMode))},
		{"group-nowatch", startOn(steadyManager(b, nowatch))},
		{"cgroup", startOn(steadyManager(b, proc.Options{}))},
		{"gocmd", func() { gocmdRun(b, args) }},
	}
	wall := make([][]float64, len(variants)) // per run, one per block
	cpu := make([]time.Duration, len(variants))
	order := make([]int, len(variants))
	for block := 0; b.Loop(); block++ {
		for i := range order {
			order[i] = i
		}
		if block%2 == 1 {
			slices.Reverse(order)
		}
		for _, i := range order {
			variants[i].run()
			used := readCPU(b)
			start := time.Now()
			for range truePairedRuns {
				variants[i].run()
			}
			d := time.Since(start)
			cpu[i] += readCPU(b).self - used.self
			wall[i] = append(wall[i], float64(d)/truePairedRuns)
		}
	}
	if b.N == 0 {
		return
	}
	index := func(name string) int {
		return slices.IndexFunc(variants, func(v trueVariant) bool { return v.name == name })
	}
	over := func(num, den string) float64 {
		return medianOf(ratios(wall[index(num)], wall[index(den)]))
	}
	for i, v := range variants {
		b.ReportMetric(medianOf(wall[i]), "ns-"+v.name)
		b.ReportMetric(float64(cpu[i])/float64(b.N*truePairedRuns), "cpu-ns-"+v.name)
		if i > 0 {
			b.ReportMetric(over(v.name, "raw"), "x-raw-"+v.name)
		}
	}
	for _, name := range []string{"group", "group-nowatch", "cgroup"} {
		b.ReportMetric(over(name, "raw-async"), "x-async-"+name)
		b.ReportMetric(over(name, "raw-pipe"), "x-pipe-"+name)
	}
	b.ReportMetric(over("group", "group-nowatch"), "x-watchdog")
}

// truePairedRuns is the number of timed runs of each variant in a block of
// BenchmarkTruePaired: at least 100 consecutive starts, so that work done
// off the start path (retention's drops, the cgroup worker) is inside the
// measurement, as it is for a service that starts commands all day.
const truePairedRuns = 100

// grandchildScript leaves a silent background child holding stdout.
const grandchildScript = "sleep 2 & echo hi"

// waitExited blocks until the child pid has exited, without reaping it, so
// that cmd.Wait still collects it.
func waitExited(pid int) error {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err
		}
	}
}

// BenchmarkSilentGrandchild runs `sh -c 'sleep 2 & echo hi'`: the shell
// exits at once, its background child holds stdout for 2 s without
// writing. ns/op is start to final; exit-to-final-ms is from the shell's
// exit to final (proc: Info.ExitedAt, the reap; raw: waitid without
// reaping). Target: proc within DrainQuiet + 25 ms = 75 ms of the exit.
// os/exec's cmd.Output() waits for the grandchild. go-cmd reports no exit
// time of its own; its start to final is the number to read. timer-floor
// is a bare DrainQuiet timer: what the machine's scheduling adds to any
// timer, against which proc's worst case is read.
func BenchmarkSilentGrandchild(b *testing.B) {
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		var exitToFinal time.Duration
		for b.Loop() {
			// cmd.Output(), split so that the exit can be timed.
			cmd := exec.Command("sh", "-c", grandchildScript)
			var out bytes.Buffer
			cmd.Stdout = &out
			if err := cmd.Start(); err != nil {
				b.Fatalf("Start() = %v; want nil", err)
			}
			if err := waitExited(cmd.Process.Pid); err != nil {
				b.Fatalf("waitid(%d) = %v; want nil", cmd.Process.Pid, err)
			}
			exited := time.Now()
			if err := cmd.Wait(); err != nil {
				b.Fatalf("Wait() = %v; want nil", err)
			}
			exitToFinal += time.Since(exited)
			if out.String() != "hi\n" {
				b.Fatalf("Output() = %q; want %q", out.String(), "hi\n")
			}
		}
		b.ReportMetric(float64(exitToFinal.Milliseconds())/float64(b.N), "exit-to-final-ms")
		finish(b, "")
	})
	b.Run("proc", func(b *testing.B) {
		m := proctest.NewManager(b, proc.Options{})
		b.ReportAllocs()
		var exitToFinal, worst time.Duration
		for b.Loop() {
			p := procRun(b, m, proc.StartRequest{Command: grandchildScript})
			final := time.Now()
			checkFinal(b, p, 3)
			d := final.Sub(p.Info().ExitedAt)
			exitToFinal += d
			worst = max(worst, d)
		}
		b.ReportMetric(float64(exitToFinal.Microseconds())/1e3/float64(b.N), "exit-to-final-ms")
		b.ReportMetric(float64(worst.Microseconds())/1e3, "max-exit-to-final-ms")
		finish(b, "raw")
	})
	b.Run("gocmd", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			st := gocmdRun(b, []string{"sh", "-c", grandchildScript})
			if len(st.Stdout) != 1 || st.Stdout[0] != "hi" {
				b.Fatalf("go-cmd Stdout = %q; want [hi]", st.Stdout)
			}
		}
		finish(b, "raw")
	})
	// The floor of the machine: a bare DrainQuiet timer and one wake-up.
	// On a loaded machine its worst case shows how late any timer fires.
	b.Run("timer-floor", func(b *testing.B) {
		b.ReportAllocs()
		var total, worst time.Duration
		for b.Loop() {
			start := time.Now()
			<-time.After(proc.DefaultDrainQuiet)
			d := time.Since(start)
			total += d
			worst = max(worst, d)
		}
		b.ReportMetric(float64(total.Microseconds())/1e3/float64(b.N), "exit-to-final-ms")
		b.ReportMetric(float64(worst.Microseconds())/1e3, "max-exit-to-final-ms")
		finish(b, "")
	})
}

// seqBytes is the length of the output of `seq 1 n`.
func seqBytes(n int) int64 {
	var total int64
	for i := 1; i <= n; i++ {
		total += int64(len(strconv.Itoa(i))) + 1
	}
	return total
}

// BenchmarkSnapshot measures Snapshot() of full default buffers (16 KiB
// head, 16 KiB tail, of `seq 1 200000`), on a final record and on a
// running one that writes nothing meanwhile (both return the kept
// rendering), and Output() of a full default buffer after every 8-byte
// Write (changed: every call renders anew). copy-floor is the least any
// rendering must do: copy the 32 KiB retained into one new string.
// Target: allocs/op <= 4.
func BenchmarkSnapshot(b *testing.B) {
	const lines = 200000
	want := seqBytes(lines)
	b.Run("copy-floor", func(b *testing.B) {
		retained := bytes.Repeat([]byte("1234567\n"), (32<<10)/8)
		b.ReportAllocs()
		var sink string
		for b.Loop() {
			sink = string(retained)
		}
		if len(sink) != len(retained) {
			b.Fatalf("copy has %d bytes; want %d", len(sink), len(retained))
		}
		finish(b, "")
	})
	check := func(b *testing.B, s proc.Snapshot, running bool) {
		b.Helper()
		tr := s.Output.Truncation
		if s.Info.Running != running || tr == nil || tr.OriginalBytes != want || tr.RetainedBytes != 32<<10 {
			b.Fatalf("Snapshot() = running %v, truncation %+v; want running %v, %d bytes of which 32 KiB retained",
				s.Info.Running, tr, running, want)
		}
	}
	// measure takes Snapshot in a loop and checks the last one.
	measure := func(b *testing.B, p *proc.Process, running bool) {
		b.ReportAllocs()
		var s proc.Snapshot
		for b.Loop() {
			s = p.Snapshot()
		}
		check(b, s, running)
		finish(b, "copy-floor")
	}
	b.Run("final", func(b *testing.B) {
		m := proctest.NewManager(b, proc.Options{})
		p := procRun(b, m, proc.StartRequest{Args: []string{"seq", "1", strconv.Itoa(lines)}})
		checkFinal(b, p, want)
		check(b, p.Snapshot(), false)
		measure(b, p, false)
	})
	b.Run("changed", func(b *testing.B) {
		buf := proc.NewHeadTailBuffer(0, 0, 0)
		for i := 1; i <= lines; i++ {
			_, _ = buf.Write(strconv.AppendInt(nil, int64(i), 10))
			_, _ = buf.Write([]byte{'\n'})
		}
		line := []byte("1234567\n")
		b.ReportAllocs()
		var out proc.Output
		for b.Loop() {
			_, _ = buf.Write(line)
			out = buf.Output()
		}
		if tr := out.Truncation; tr == nil || tr.RetainedBytes != 32<<10 {
			b.Fatalf("Output() truncation %+v; want 32 KiB retained", tr)
		}
		finish(b, "copy-floor")
	})
	b.Run("running", func(b *testing.B) {
		m := proctest.NewManager(b, proc.Options{})
		ctx := testkit.Ctx(b, time.Minute)
		p, err := m.Start(proc.StartRequest{Command: fmt.Sprintf("seq 1 %d; exec sleep 60", lines)})
		if err != nil {
			b.Fatalf("Start() = %v; want nil", err)
		}
		for n := p.Info().OutputBytes; n < want; n = p.Info().OutputBytes {
			if err := p.WaitOutput(ctx, n); err != nil {
				b.Fatalf("WaitOutput(%d) = %v; want nil", n, err)
			}
		}
		measure(b, p, true)
		if err := p.Signal(proc.Kill); err != nil {
			b.Fatalf("Signal(kill) = %v; want nil", err)
		}
		<-p.Done()
	})
}

// retainedRecords is the number of final records BenchmarkRetained keeps.
const retainedRecords = 2000

// heapAfterGC returns HeapAlloc after full collections (two, so that
// sync.Pool caches, which are not retained memory, are emptied).
func heapAfterGC() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// BenchmarkRetained keeps 2,000 final records, each of a process that
// printed one short line, and measures the heap per record (HeapAlloc after
// GC, before and after, divided by 2,000; target < 1.5 KiB), which
// includes the records' events in the event log (two each), and List()
// over all of them (ns/op; target < 2 ms). x-copy is List's time over that
// of copying its result (slices.Clone of 2,000 Infos, timed in the same
// iterations outside the measured time): the floor of any List that
// returns a new []Info, so the ratio is List's own cost whatever the
// machine's load.
func BenchmarkRetained(b *testing.B) {
	b.Run("List", func(b *testing.B) {
		m := proctest.NewManager(b, proc.Options{MaxRetained: retainedRecords})
		before := heapAfterGC()
		// Start them a few at a time: the machine has two cores.
		sem := make(chan struct{}, 16)
		var wg sync.WaitGroup
		errs := make(chan error, retainedRecords) // buffered: no sender blocks
		for i := range retainedRecords {
			sem <- struct{}{}
			p, err := m.Start(proc.StartRequest{Args: []string{"echo", "record", strconv.Itoa(i)}})
			if err != nil {
				b.Fatalf("Start(%d) = %v; want nil", i, err)
			}
			wg.Add(1)
			// Ends when p is final.
			go func() {
				defer wg.Done()
				<-p.Done()
				<-sem
				if info := p.Info(); info.ExitCode == nil || *info.ExitCode != 0 {
					errs <- fmt.Errorf("%q: exit code %v; want 0", info.Args, info.ExitCode)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		perRecord := float64(heapAfterGC()-before) / retainedRecords

		b.ReportAllocs()
		var infos, copied []proc.Info
		var copying time.Duration
		for b.Loop() {
			infos = m.List()
			b.StopTimer()
			start := time.Now()
			copied = slices.Clone(infos)
			copying += time.Since(start)
			b.StartTimer()
		}
		if len(infos) != retainedRecords || len(copied) != retainedRecords {
			b.Fatalf("List() has %d records; want %d", len(infos), retainedRecords)
		}
		// After the loop: b.Loop's first call resets reported metrics.
		b.ReportMetric(perRecord, "heap-B/record")
		if copying > 0 {
			b.ReportMetric(float64(b.Elapsed())/float64(copying), "x-copy")
		}
		finish(b, "")
	})
}

// concurrentProcs and concurrentBytes shape BenchmarkConcurrent.
const (
	concurrentProcs = 256
	concurrentBytes = 4 << 20
)

// BenchmarkConcurrent starts 256 processes that each write 4 MiB (`head -c
// 4M /dev/zero`) and waits until all are final: ns/op is the wall time of
// the whole batch, through the manager, through os/exec pipes read raw
// with 64 KiB buffers, and through go-cmd. proc and proc-fresh are as in
// BenchmarkTrue.
func BenchmarkConcurrent(b *testing.B) {
	args := []string{"head", "-c", strconv.Itoa(concurrentBytes), "/dev/zero"}
	total := int64(concurrentProcs * concurrentBytes)
	b.Run("raw", func(b *testing.B) {
		b.SetBytes(total)
		measured(b, "", func() {
			// Started one after another from this goroutine, as the
			// manager's are; each is read by its own goroutine, as the
			// manager's pumps do.
			errs := make(chan error, concurrentProcs) // one send per goroutine
			for range concurrentProcs {
				cmd, out, err := rawStart(args, (*exec.Cmd).StdoutPipe)
				if err != nil {
					b.Fatalf("start %q: %v", args, err)
				}
				// Ends when the child exited and its pipe is drained.
				go func() {
					buf := make([]byte, rawBufSize)
					n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, struct{ io.Reader }{out}, buf)
					if werr := cmd.Wait(); err == nil {
						err = werr
					}
					if err == nil && n != concurrentBytes {
						err = fmt.Errorf("read %d bytes; want %d", n, concurrentBytes)
					}
					errs <- err
				}()
			}
			for range concurrentProcs {
				if err := <-errs; err != nil {
					b.Fatalf("raw %q: %v", args, err)
				}
			}
		})
	})
	run := func(b *testing.B, m *proc.Manager, procs []*proc.Process) {
		for i := range procs {
			p, err := m.Start(proc.StartRequest{Args: args})
			if err != nil {
				b.Fatalf("Start(%q) = %v; want nil", args, err)
			}
			procs[i] = p
		}
		for _, p := range procs {
			<-p.Done()
			checkFinal(b, p, concurrentBytes)
		}
	}
	b.Run("proc", func(b *testing.B) {
		m := steadyManager(b, proc.Options{})
		b.SetBytes(total)
		b.ReportAllocs()
		procs := make([]*proc.Process, concurrentProcs)
		cpu := readCPU(b)
		for b.Loop() {
			run(b, m, procs)
		}
		cpu.report(b)
		finish(b, "raw")
	})
	b.Run("proc-fresh", func(b *testing.B) {
		f := &freshManager{b: b}
		b.SetBytes(total)
		b.ReportAllocs()
		procs := make([]*proc.Process, concurrentProcs)
		cpu := readCPU(b)
		for b.Loop() {
			run(b, f.get(concurrentProcs), procs)
		}
		cpu.report(b)
		finish(b, "raw")
	})
	b.Run("gocmd", func(b *testing.B) {
		b.SetBytes(total)
		measured(b, "raw", func() {
			cmds := make([]<-chan gocmd.Status, concurrentProcs)
			for i := range cmds {
				cmds[i] = gocmd.NewCmd(args[0], args[1:]...).Start()
			}
			for _, c := range cmds {
				if st := <-c; st.Error != nil || st.Exit != 0 {
					b.Fatalf("go-cmd %q: error %v, exit %d; want nil, 0", args, st.Error, st.Exit)
				}
			}
		})
	})
}
