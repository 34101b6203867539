//go:build linux

package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/procvisor/proc"
	"github.com/procvisor/proc/proctest"
)

// watchBytes is what the child writes in BenchmarkWatch.
const watchBytes = 512 << 20

// logBlock is 64 KiB of log lines, about 100 bytes each, one of which
// holds the word "error": what a busy server prints.
var logBlock = func() []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < 64<<10; i++ {
		level, msg := "INFO", "served"
		if i == 300 {
			level, msg = "WARN", "error"
		}
		fmt.Fprintf(&b, "2026-11-25T14:%02d:%02d.%03dZ %s http: GET /api/v1/items/%05d 200 %s in 1.%03dms\n",
			i/60%60, i%60, i%1000, level, i, msg, i%1000)
	}
	return b.Bytes()[:64<<10]
}()

// logLinesWriter writes args[0] bytes of logBlock, over and over, to
// stdout in 64 KiB writes.
func logLinesWriter(args []string) int {
	total, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "log-lines:", err)
		return 2
	}
	for written := int64(0); written < total; {
		n := min(int64(len(logBlock)), total-written)
		if _, err := os.Stdout.Write(logBlock[:n]); err != nil {
			fmt.Fprintln(os.Stderr, "log-lines:", err)
			return 1
		}
		written += n
	}
	return 0
}

// BenchmarkWatch captures 512 MiB of log lines (one "error" line in 650)
// alone and with three watches: one that matches those lines, and two
// that never match (one of them an alternation). Target: watch-3 within
// 1.05× of alone (x-alone). matched/op counts the matched events.
func BenchmarkWatch(b *testing.B) {
	args := []string{os.Args[0], strconv.Itoa(watchBytes)}
	env := map[string]string{benchHelperEnv: "log-lines"}
	watches := []proc.Watch{
		{Name: "error", Pattern: `\berror\b`},
		{Name: "ready", Pattern: `listening on port (\d+)`},
		{Name: "done", Pattern: `^(PASS|FAIL)\b`},
	}
	for _, n := range []int{0, len(watches)} {
		name := "alone"
		if n > 0 {
			name = fmt.Sprintf("watch-%d", n)
		}
		b.Run(name, func(b *testing.B) {
			m := proctest.NewManager(b, proc.Options{})
			req := proc.StartRequest{Args: args, Env: env, Watch: watches[:n]}
			b.SetBytes(watchBytes)
			var matched int64
			measured(b, "alone", func() {
				_, before, _ := m.Events(0, 0)
				p := procRun(b, m, req)
				checkFinal(b, p, watchBytes)
				_, after, _ := m.Events(0, 0)
				matched += after - before - 2 // less started and final
			})
			b.ReportMetric(float64(matched)/float64(b.N), "matched/op")
			if want := int64(n/len(watches)) * watchBytes / int64(len(logBlock)); matched/int64(b.N) != want {
				b.Fatalf("%d matched events per capture; want %d", matched/int64(b.N), want)
			}
		})
	}
}
