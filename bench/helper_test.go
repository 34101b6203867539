//go:build linux

package bench

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
)

// benchHelperEnv names the helper mode when the test binary runs as a
// child of a benchmark.
const benchHelperEnv = "PROC_BENCH_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(benchHelperEnv) {
	case "paced":
		os.Exit(pacedWriter(os.Args[1:]))
	case "log-lines":
		os.Exit(logLinesWriter(os.Args[1:]))
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
