//go:build linux

package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/procvisor/proc/internal/testkit"
)

// benchHelperEnv names the helper mode when the test binary runs as a
// child of a benchmark.
const benchHelperEnv = "PROC_BENCH_HELPER"

// benchHelpers are the modes the test binary can run as a child, by name;
// the return value is the exit code.
var benchHelpers = map[string]func(args []string) int{
	"paced":       pacedWriter,
	"log-lines":   logLinesWriter,
	"short-lines": shortLinesWriter,
	"zeros":       zerosWriter,
}

func TestMain(m *testing.M) {
	if mode := os.Getenv(benchHelperEnv); mode != "" {
		os.Exit(testkit.RunHelper(benchHelpers, mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// pacedArgs returns the argv and environment of a child that writes total
// bytes in writes of size bytes at about rate bytes per second.
func pacedArgs(total, size, rate int64) ([]string, map[string]string) {
	return []string{os.Args[0], strconv.FormatInt(total, 10), strconv.FormatInt(size, 10), strconv.FormatInt(rate, 10)},
		map[string]string{benchHelperEnv: "paced"}
}

// pacedWriter writes args[0] bytes to stdout in writes of args[1] bytes,
// each no earlier than its share of args[2] bytes per second allows: a
// bursty producer (a compiler, a test runner) at a steady average rate.
func pacedWriter(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "paced: want TOTAL SIZE RATE")
		return 2
	}
	var v [3]int64
	for i, a := range args {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "paced: bad argument %q\n", a)
			return 2
		}
		v[i] = n
	}
	total, size, rate := v[0], v[1], v[2]
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte('a' + i%26)
	}
	start := time.Now()
	for written := int64(0); written < total; {
		due := start.Add(time.Duration(float64(written) / float64(rate) * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		n := min(size, total-written)
		if _, err := os.Stdout.Write(buf[:n]); err != nil {
			fmt.Fprintln(os.Stderr, "paced:", err)
			return 1
		}
		written += n
	}
	return 0
}

// zerosArgs returns the argv and environment of a child that writes total
// zero bytes as fast as it can, in 8 KiB writes as `head -c` does, and then
// its schedstat (schedStat) into the file stat.
func zerosArgs(total int64, stat string) ([]string, map[string]string) {
	return []string{os.Args[0], strconv.FormatInt(total, 10), stat}, map[string]string{benchHelperEnv: "zeros"}
}

// writeBlocks writes total bytes of block to stdout, block after block
// (the last one cut short).
func writeBlocks(block []byte, total int64) error {
	for written := int64(0); written < total; {
		n := min(int64(len(block)), total-written)
		if _, err := os.Stdout.Write(block[:n]); err != nil {
			return err
		}
		written += n
	}
	return nil
}

// zerosWriter is the child of zerosArgs.
func zerosWriter(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "zeros: want TOTAL STATFILE")
		return 2
	}
	total, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || total < 0 {
		fmt.Fprintf(os.Stderr, "zeros: bad total %q\n", args[0])
		return 2
	}
	start := time.Now()
	buf := make([]byte, 8<<10)
	if err := writeBlocks(buf, total); err != nil {
		fmt.Fprintln(os.Stderr, "zeros:", err)
		return 1
	}
	wall := time.Since(start)
	// cpu_ns run_delay_ns slices (Documentation/scheduler/sched-stats).
	stat, err := os.ReadFile("/proc/self/schedstat")
	if err != nil {
		fmt.Fprintln(os.Stderr, "zeros:", err)
		return 1
	}
	line := strings.TrimSpace(string(stat)) + " " + strconv.FormatInt(wall.Nanoseconds(), 10) + "\n"
	if err := os.WriteFile(args[1], []byte(line), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "zeros:", err)
		return 1
	}
	return 0
}

// schedStat is where a child's time went while it wrote: on a CPU, waiting
// for one (run queue), and the rest, blocked (a full pipe: held by its
// reader).
type schedStat struct{ cpu, runDelay, wall time.Duration }

// blocked is the child's time neither running nor runnable.
func (s schedStat) blocked() time.Duration { return max(s.wall-s.cpu-s.runDelay, 0) }

// readSchedStat reads what zerosWriter wrote into path.
func readSchedStat(path string) (schedStat, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return schedStat{}, err
	}
	var s schedStat
	var slices int64
	if _, err := fmt.Sscan(string(data), &s.cpu, &s.runDelay, &slices, &s.wall); err != nil {
		return schedStat{}, fmt.Errorf("%s: %q: %w", path, data, err)
	}
	return s, nil
}
