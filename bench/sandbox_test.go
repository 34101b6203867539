//go:build linux

package bench

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/procvisor/proc"
)

// The sandbox benchmark (issue 20): what a sandboxed start costs against
// an unsandboxed one in the same containment.

// sandboxBlock is the number of starts in one timed block of a variant,
// sandboxWorkers the goroutines that make them at once.
const (
	sandboxBlock   = 100
	sandboxWorkers = 4
)

// BenchmarkSandbox measures start to final of `true`, sandboxed (read-only,
// no network) and not, in group and cgroup mode. Each op is one round in
// which every variant, in an order that alternates from round to round,
// runs one untimed warm-up start and then a timed block of sandboxBlock
// starts made by sandboxWorkers goroutines at once (sustained load: what a
// start leaves to do off its path is measured too).
//
// Reported: "x-sandbox-<mode>", the median over the rounds of the
// sandboxed block's time over the unsandboxed one's in the same round;
// "cpu-x-sandbox-<mode>", the same for this process's CPU time (the host's
// cost, steadier on a shared machine); "ns-<variant>" and
// "cpu-ns-<variant>", the medians per start; "cpu-ns-sandbox-extra-<mode>",
// the host CPU a sandboxed start adds. ns/op is a round.
func BenchmarkSandbox(b *testing.B) {
	type variant struct {
		name string
		m    *proc.Manager
		sb   *proc.Sandbox
	}
	var variants []variant
	for _, mode := range []proc.Containment{proc.ContainGroup, proc.ContainCgroup} {
		m := containManager(b, mode)
		fillManager(b, m)
		p, err := m.Start(proc.StartRequest{Args: []string{"true"}, Sandbox: &proc.Sandbox{}})
		if errors.Is(err, proc.ErrUnsupported) {
			b.Skipf("the sandbox cannot run here (CI runs it): %v", err)
		}
		if err != nil {
			b.Fatalf("sandboxed Start(true) = %v", err)
		}
		<-p.Done()
		checkFinal(b, p, 0)
		variants = append(variants,
			variant{string(mode), m, nil},
			variant{"sandbox-" + string(mode), m, &proc.Sandbox{}})
	}
	run := func(v variant) {
		checkFinal(b, procRun(b, v.m, proc.StartRequest{Args: []string{"true"}, Sandbox: v.sb}), 0)
	}
	wall, self := map[string][]float64{}, map[string][]float64{}
	xWall, xSelf := map[string][]float64{}, map[string][]float64{}
	b.ReportAllocs()
	round := 0
	for b.Loop() {
		order := variants
		if round%2 == 1 {
			order = []variant{variants[3], variants[2], variants[1], variants[0]}
		}
		round++
		for _, v := range order {
			run(v)
			cpu := readCPU(b)
			start := time.Now()
			var wg sync.WaitGroup
			for range sandboxWorkers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range sandboxBlock / sandboxWorkers {
						run(v)
					}
				}()
			}
			wg.Wait()
			d := time.Since(start)
			used := readCPU(b)
			wall[v.name] = append(wall[v.name], float64(d)/sandboxBlock)
			self[v.name] = append(self[v.name], float64(used.self-cpu.self)/sandboxBlock)
		}
		for _, mode := range []string{"group", "cgroup"} {
			last := func(m map[string][]float64, name string) float64 { return m[name][len(m[name])-1] }
			xWall[mode] = append(xWall[mode], last(wall, "sandbox-"+mode)/last(wall, mode))
			xSelf[mode] = append(xSelf[mode], last(self, "sandbox-"+mode)/last(self, mode))
		}
	}
	for _, v := range variants {
		b.ReportMetric(medianOf(wall[v.name]), "ns-"+v.name)
		b.ReportMetric(medianOf(self[v.name]), "cpu-ns-"+v.name)
	}
	for _, mode := range []string{"group", "cgroup"} {
		b.ReportMetric(medianOf(xWall[mode]), "x-sandbox-"+mode)
		b.ReportMetric(medianOf(xSelf[mode]), "cpu-x-sandbox-"+mode)
		b.ReportMetric(medianOf(self["sandbox-"+mode])-medianOf(self[mode]), fmt.Sprintf("cpu-ns-sandbox-extra-%s", mode))
	}
}
