//go:build linux

// Command startprof runs a sustained stream of starts of `true` and says
// what each start costs: heap allocations, goroutines created, and
// optionally a CPU and a heap profile of the stream. It is the tool
// behind docs/start-path.md; run it under `strace -f -c` to count the
// system calls of a start (subtract two runs of different -n to cancel
// the program's own start-up).
//
// Run it from the bench directory:
//
//	go run ./cmd/startprof -mode group -n 2000 -g 8 -cpuprofile cpu.out
//
// With -sleepers it runs instead rounds of that many concurrent `sleep`
// starts and their stop, os/exec and the library alternating in one
// process, and prints each mode's median ratio to os/exec (thousand.go):
//
//	go run ./cmd/startprof -sleepers 1000 -modes exec,group -rounds 6
//
// With -alternate it runs that many rounds of the stream in each of
// -modes in turn, in one process, and prints each mode's median ratio of
// wall and host CPU to os/exec's in the same round (alternate.go):
//
//	go run ./cmd/startprof -alternate 8 -modes exec,group -n 3000 -g 8
//
// Modes: "group" and "cgroup" start through a proc.Manager of that
// containment and wait for the final record (sandboxed with -sandbox);
// "exec" is os/exec doing the same (pipes through a buffer, Setsid, Run).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/procvisor/proc"
)

func main() {
	mode := flag.String("mode", "group", "group, cgroup or exec")
	n := flag.Int("n", 1000, "timed starts (in total, over all goroutines)")
	g := flag.Int("g", 8, "goroutines starting at once")
	sandboxed := flag.Bool("sandbox", false, "start each child sandboxed (the zero proc.Sandbox: read-only, no network); group and cgroup only")
	warm := flag.Int("warm", 100, "untimed starts before the timed ones")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the timed starts here")
	memProfile := flag.String("memprofile", "", "write a heap profile (alloc_space) of the timed starts here")
	sleepers := flag.Int("sleepers", 0, "instead: rounds of this many concurrent `sleep` starts and their stop, exec and -modes alternating (thousand.go)")
	modes := flag.String("modes", "exec,group", "with -sleepers or -alternate: the modes, exec first")
	rounds := flag.Int("rounds", 6, "with -sleepers: the rounds")
	alternate := flag.Int("alternate", 0, "instead: this many rounds of a stream of -n starts in each of -modes, in turn in one process (alternate.go)")
	flag.Parse()
	if *sleepers > 0 {
		thousand(strings.Split(*modes, ","), *rounds, *sleepers)
		return
	}

	if *alternate > 0 {
		alternateStreams(strings.Split(*modes, ","), *alternate, *n, *g, *warm, *sandboxed)
		return
	}
	run, closeRun := runner(*mode, *sandboxed)
	defer closeRun()
	stream := func(total int) { streamOf(run, total, *g) }
	stream(*warm)

	if *memProfile != "" {
		// Finer samples of a few small allocations per start; it costs CPU,
		// so a CPU profile is better taken in a run without -memprofile.
		runtime.MemProfileRate = 4096
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
	}
	samples := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	metrics.Read(samples)
	created := samples[0].Value.Uint64()
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	start := time.Now()
	stream(*n)
	wall := time.Since(start)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	metrics.Read(samples)
	runtime.ReadMemStats(&after)
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if *memProfile != "" {
		f, err := os.Create(*memProfile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			log.Fatal(err)
		}
		_ = f.Close()
	}
	done := float64(*n / *g * *g)
	cpu := time.Duration(ru1.Utime.Nano() - ru0.Utime.Nano() + ru1.Stime.Nano() - ru0.Stime.Nano())
	if *sandboxed {
		*mode += "+sandbox"
	}
	fmt.Printf("mode=%s starts=%.0f goroutines=%d wall/start=%v host-cpu/start=%v allocs/start=%.1f bytes/start=%.0f goroutines-created/start=%.2f\n",
		*mode, done, *g, wall/time.Duration(done), cpu/time.Duration(done),
		float64(after.Mallocs-before.Mallocs)/done, float64(after.TotalAlloc-before.TotalAlloc)/done,
		float64(samples[0].Value.Uint64()-created)/done)
}

// runner returns one start of `true` to its end in mode (os/exec, or a
// Manager of that containment, sandboxed with sandboxed), and what to
// call once done with it.
func runner(mode string, sandboxed bool) (run func() error, closeRun func()) {
	switch mode {
	case "exec":
		return func() error {
			var buf bytes.Buffer
			cmd := exec.Command("true")
			cmd.Stdout, cmd.Stderr = &buf, &buf
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			return cmd.Run()
		}, func() {}
	case "group", "cgroup":
		m := proc.NewManager(proc.Options{Containment: proc.Containment(mode)})
		var sb *proc.Sandbox
		if sandboxed {
			sb = &proc.Sandbox{}
		}
		return func() error {
			p, err := m.Start(proc.StartRequest{Args: []string{"true"}, Sandbox: sb})
			if err != nil {
				return err
			}
			<-p.Done()
			if info := p.Info(); info.ExitCode == nil || *info.ExitCode != 0 || info.Containment != mode {
				return fmt.Errorf("true: exit %v in %q; want 0 in %q", info.ExitCode, info.Containment, mode)
			}
			return nil
		}, func() { _ = m.Close() }
	}
	log.Fatalf("-mode %q: want group, cgroup or exec", mode)
	return nil, nil
}

// streamOf runs total starts (run) from g goroutines at once, and
// returns when all ended; a failure ends the program.
func streamOf(run func() error, total, g int) {
	var wg sync.WaitGroup
	per := total / g
	for range g {
		wg.Add(1)
		// Ends after per starts; a failure ends the program.
		go func() {
			defer wg.Done()
			for range per {
				if err := run(); err != nil {
					log.Fatal(err)
				}
			}
		}()
	}
	wg.Wait()
}
