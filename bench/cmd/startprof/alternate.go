//go:build linux

package main

import (
	"fmt"
	"slices"
	"syscall"
	"time"
)

// alternateStreams runs rounds of a stream of n starts of `true` from g
// goroutines in each of modes (exec first), in turn in this one process,
// the order rotated every round so that no mode always follows the same
// one, and prints each mode's median (and range) over the rounds of its
// wall and host CPU over exec's in the same round: the "in one run"
// figure of `true` from g goroutines.
func alternateStreams(modes []string, rounds, n, g, warm int, sandboxed bool) {
	runs := map[string]func() error{}
	for _, mode := range modes {
		run, closeRun := runner(mode, sandboxed)
		defer closeRun()
		streamOf(run, warm, g)
		runs[mode] = run
	}
	wall, cpu := map[string][]float64{}, map[string][]float64{}
	for r := range rounds {
		for i := range modes {
			mode := modes[(i+r)%len(modes)]
			used := hostCPU()
			t0 := time.Now()
			streamOf(runs[mode], n, g)
			wall[mode] = append(wall[mode], float64(time.Since(t0)))
			cpu[mode] = append(cpu[mode], float64(hostCPU()-used))
		}
	}
	for _, mode := range modes {
		var xw, xc []float64
		for i := range wall[mode] {
			xw = append(xw, wall[mode][i]/wall["exec"][i])
			xc = append(xc, cpu[mode][i]/cpu["exec"][i])
		}
		fmt.Printf("mode=%s starts=%d goroutines=%d rounds=%d x-exec-wall=%.3f (%.3f-%.3f) x-exec-cpu=%.3f (%.3f-%.3f)\n",
			mode, n/g*g, g, rounds, median(xw), slices.Min(xw), slices.Max(xw), median(xc), slices.Min(xc), slices.Max(xc))
	}
}

// hostCPU is this process's CPU time so far, user and system.
func hostCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
