//go:build linux

package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

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
	if err := writeBlocks(logBlock, total); err != nil {
		fmt.Fprintln(os.Stderr, "log-lines:", err)
		return 1
	}
	return 0
}

// BenchmarkWatch captures 512 MiB of log lines (one "error" line in 650)
// without watches ("alone") and with three ("watch-3"): one that matches
// those lines, and two that never match (one of them an alternation).
// Target: watch-3 within 1.05× of alone, in wall time from Start to
// final. Each op is one round: one capture of each, in an order that
// alternates from round to round, so that the load of a shared machine
// falls on both alike; run it with -benchtime=Nx for N rounds (20 or
// more: one round moves by ±20% on a busy two-core machine).
//
// Reported: "x-alone", the median over the rounds of watch-3's time over
// alone's in the same round, and "x-alone-total", the sum of watch-3's
// times over the sum of alone's; "cpu-x-alone", the median ratio of this
// process's CPU time (the pump's and the scan's; steadier, and it shows
// what the scan costs whether or not a core was idle); "ns-<variant>" and
// "cpu-ns-<variant>", medians per capture; "matched/op", the matched
// events of a watch-3 capture. ns/op is a round.
func BenchmarkWatch(b *testing.B) {
	args := []string{os.Args[0], strconv.Itoa(watchBytes)}
	env := map[string]string{benchHelperEnv: "log-lines"}
	watches := []proc.Watch{
		{Name: "error", Pattern: `\berror\b`},
		{Name: "ready", Pattern: `listening on port (\d+)`},
		{Name: "done", Pattern: `^(PASS|FAIL)\b`},
	}
	m := proctest.NewManager(b, proc.Options{})
	variants := []struct {
		name string
		req  proc.StartRequest
	}{
		{"alone", proc.StartRequest{Args: args, Env: env}},
		{"watch-3", proc.StartRequest{Args: args, Env: env, Watch: watches}},
	}
	wantMatched := int64(watchBytes / len(logBlock)) // one line per block
	// lastSeq is the Seq of m's newest event. It copies the whole history:
	// called outside the timed captures only.
	lastSeq := func() int64 {
		_, next, _ := m.Events(0, 0)
		return next
	}
	// capture runs variant v once; it returns its wall and CPU time.
	capture := func(v int) (wall, cpu time.Duration) {
		cpu0 := readCPU(b)
		start := time.Now()
		p := procRun(b, m, variants[v].req)
		wall = time.Since(start)
		cpu = readCPU(b).self - cpu0.self
		checkFinal(b, p, watchBytes)
		return wall, cpu
	}
	// One untimed capture of each: the buffers and the page cache warm,
	// and the matched events counted.
	for v := range variants {
		before := lastSeq()
		capture(v)
		if got := lastSeq() - before - 2; got != int64(v)*wantMatched { // less started and final
			b.Fatalf("%s: %d matched events; want %d", variants[v].name, got, int64(v)*wantMatched)
		}
	}
	seq0 := lastSeq()
	wall := make([][]float64, len(variants))
	cpu := make([][]float64, len(variants))
	var ratios, cpuRatios []float64
	var total [2]time.Duration
	b.SetBytes(2 * watchBytes)
	rounds := 0
	for b.Loop() {
		var w, c [2]time.Duration
		for k := range variants {
			v := k ^ rounds&1 // alone first in even rounds, watch-3 in odd
			w[v], c[v] = capture(v)
		}
		rounds++
		for v := range variants {
			wall[v] = append(wall[v], float64(w[v]))
			cpu[v] = append(cpu[v], float64(c[v]))
			total[v] += w[v]
		}
		ratios = append(ratios, float64(w[1])/float64(w[0]))
		cpuRatios = append(cpuRatios, float64(c[1])/float64(c[0]))
	}
	b.StopTimer()
	// Each round appends started and final of both captures and the
	// matched events of watch-3.
	matched := (lastSeq() - seq0 - 4*int64(rounds)) / int64(rounds)
	if matched != wantMatched {
		b.Fatalf("%d matched events per watch-3 capture; want %d", matched, wantMatched)
	}
	b.ReportMetric(medianOf(ratios), "x-alone")
	b.ReportMetric(float64(total[1])/float64(total[0]), "x-alone-total")
	b.ReportMetric(medianOf(cpuRatios), "cpu-x-alone")
	for v := range variants {
		b.ReportMetric(medianOf(wall[v]), "ns-"+variants[v].name)
		b.ReportMetric(medianOf(cpu[v]), "cpu-ns-"+variants[v].name)
	}
	b.ReportMetric(float64(matched), "matched/op")
}
