//go:build linux && !proc_otherunix

package proc

import (
	"context"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkWatchdogShare measures what the host-death watchdog adds to a
// group-mode start (design section 10: no more than 2%), in host CPU,
// the figure a stream of starts pays. Each round alternates two blocks
// of 100 operations by 4 goroutines: starts of `true` to their final
// record through a Manager with its watchdog, and the watchdog's own
// part of as many starts done alone on that Manager's watchdog (the
// liveness look, the pending mark with its clock read, the group's
// registration into the mark's slot, and the blank at the end). It
// reports "cpu-share", the median over the rounds of the second block's
// CPU over the first's, and both per operation. The share is measured
// warm (the watchdog's steps in a tight loop), so it is its least.
func BenchmarkWatchdogShare(b *testing.B) {
	m := NewManager(Options{Containment: ContainGroup})
	b.Cleanup(func() { _ = m.Close() })
	if _, err := m.Run(context.Background(), StartRequest{Args: []string{"true"}}); err != nil {
		b.Fatalf("Run(true): %v", err)
	}
	m.trees.contain.mu.Lock()
	d := m.trees.contain.guard
	m.trees.contain.mu.Unlock()
	if d == nil {
		b.Fatal("no watchdog after a group-mode start")
	}
	const block, workers = 100, 4
	// The group registered again and again: a sleeping session leader of
	// this benchmark's, killed with it.
	member := exec.Command("sleep", "600")
	member.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := member.Start(); err != nil {
		b.Fatalf("start sleep: %v", err)
	}
	b.Cleanup(func() {
		_ = member.Process.Kill()
		_ = member.Wait()
	})
	pgid := member.Process.Pid
	blocks := map[string]func() error{
		"start": func() error {
			_, err := m.Run(context.Background(), StartRequest{Args: []string{"true"}})
			return err
		},
		"watchdog": func() error {
			_ = d.lost()
			s := &treeSetup{guard: d, pending: -1}
			if err := s.markPending(false); err != nil {
				return err
			}
			slot, err := d.guard(pgid, s.pending)
			if err != nil {
				return err
			}
			d.forget(slot)
			return nil
		},
	}
	cpu := map[string][]float64{}
	order := []string{"start", "watchdog"}
	for round := 0; b.Loop(); round++ {
		slices.Reverse(order)
		for _, name := range order {
			before := hostCPU(b)
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range block / workers {
						if err := blocks[name](); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			if err := <-errs; err != nil {
				b.Fatalf("%s: %v", name, err)
			}
			cpu[name] = append(cpu[name], float64(hostCPU(b)-before)/block)
		}
	}
	if len(cpu["start"]) == 0 {
		return
	}
	share := make([]float64, len(cpu["start"]))
	for i := range share {
		share[i] = cpu["watchdog"][i] / cpu["start"][i]
	}
	b.ReportMetric(medianOf(share), "cpu-share")
	b.ReportMetric(medianOf(cpu["start"])/1e3, "cpu-us-start")
	b.ReportMetric(medianOf(cpu["watchdog"])/1e3, "cpu-us-watchdog")
}

// medianOf is the median of xs (not empty); xs is left as it was.
func medianOf(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// hostCPU is this process's CPU time so far (user and system).
func hostCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
