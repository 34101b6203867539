//go:build linux

package main

import (
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"time"

	"github.com/procvisor/proc"
)

// thousand runs rounds of n concurrent `sleep 600` starts and their stop
// in each of modes, alternating within one process (the order rotating
// each round), and prints the median over the rounds of each mode's start
// and stop time over os/exec's ("exec") in the same round: the stream of
// BenchmarkThousandVsExec's group row, in a process of its own. "exec" is
// os/exec with a pipe for stdout and stderr, Setsid and a goroutine that
// reads to EOF and reaps; "group" and "cgroup" a fresh Manager of that
// containment, warmed by one `true`, then its Close.
func thousand(modes []string, rounds, n int) {
	starts := map[string][]float64{}
	stops := map[string][]float64{}
	for r := range rounds {
		for i := range modes {
			mode := modes[(i+r)%len(modes)]
			var start, stop time.Duration
			if mode == "exec" {
				start, stop = thousandExec(n)
			} else {
				start, stop = thousandProc(proc.Containment(mode), n)
			}
			starts[mode] = append(starts[mode], float64(start))
			stops[mode] = append(stops[mode], float64(stop))
		}
	}
	for _, mode := range modes {
		var rs, rc []float64
		for i := range starts[mode] {
			rs = append(rs, starts[mode][i]/starts["exec"][i])
			rc = append(rc, stops[mode][i]/stops["exec"][i])
		}
		fmt.Printf("mode=%s sleepers=%d rounds=%d start=%.0fms x-exec-start=%.3f stop=%.0fms x-exec-stop=%.3f\n",
			mode, n, rounds, median(starts[mode])/1e6, median(rs), median(stops[mode])/1e6, median(rc))
	}
}

func thousandExec(n int) (start, stop time.Duration) {
	ended := make(chan error, n)
	cmds := make([]*exec.Cmd, 0, n)
	t0 := time.Now()
	for range n {
		cmd := exec.Command("sleep", "600")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		r, w, err := os.Pipe()
		if err != nil {
			log.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = w, w
		err = cmd.Start()
		_ = w.Close()
		if err != nil {
			log.Fatal(err)
		}
		cmds = append(cmds, cmd)
		// Ends at the pipe's EOF and the reap.
		go func() {
			buf := make([]byte, 512)
			_, _ = io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, buf)
			_ = r.Close()
			ended <- cmd.Wait()
		}()
	}
	start = time.Since(t0)
	t1 := time.Now()
	for _, cmd := range cmds {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	for range cmds {
		<-ended
	}
	return start, time.Since(t1)
}

func thousandProc(mode proc.Containment, n int) (start, stop time.Duration) {
	m := proc.NewManager(proc.Options{Containment: mode, KillGrace: 10 * time.Second})
	p, err := m.Start(proc.StartRequest{Args: []string{"true"}})
	if err != nil {
		log.Fatal(err)
	}
	<-p.Done()
	t0 := time.Now()
	for range n {
		if _, err := m.Start(proc.StartRequest{Args: []string{"sleep", "600"}}); err != nil {
			log.Fatal(err)
		}
	}
	start = time.Since(t0)
	t1 := time.Now()
	if err := m.Close(); err != nil {
		log.Fatal(err)
	}
	return start, time.Since(t1)
}

func median(x []float64) float64 {
	y := slices.Clone(x)
	slices.Sort(y)
	return y[len(y)/2]
}
