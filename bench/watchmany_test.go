//go:build linux

package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/procvisor/proc"
	"github.com/procvisor/proc/proctest"
)

// shortBytes is what the child writes in BenchmarkWatchMany.
const shortBytes = 32 << 20

// shortBlock is 64 KiB of short lines ("n0001234\n"): digits, but not
// only digits, so that a pattern like ^\d+$ looks at every line and
// matches none.
var shortBlock = func() []byte {
	var b []byte
	for i := 0; len(b) < 64<<10; i++ {
		b = fmt.Appendf(b, "n%07d\n", i)
	}
	return b[:64<<10]
}()

// shortLinesWriter writes args[0] bytes of shortBlock to stdout in 64 KiB
// writes, and then the nanoseconds the writes took into the file args[1]:
// the child's own time, which a pump that keeps pace does not lengthen.
func shortLinesWriter(args []string) int {
	total, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "short-lines:", err)
		return 2
	}
	start := time.Now()
	if err := writeBlocks(shortBlock, total); err != nil {
		fmt.Fprintln(os.Stderr, "short-lines:", err)
		return 1
	}
	took := time.Since(start)
	if err := os.WriteFile(args[1], []byte(strconv.FormatInt(int64(took), 10)), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "short-lines:", err)
		return 1
	}
	return 0
}

// BenchmarkWatchMany captures 32 MiB of short lines without watches
// ("alone"), with 64 watches whose pattern has no literal ("nolit-64",
// ^\d+$: each looks at every line and matches none; they are matched
// beside the pump and skip when they fall a backlog behind), and with 64
// watches of rare literals ("rare-64", "job N (done|failed)": matched on
// the pump's path). Targets: nolit-64 within 1.3× of alone, rare-64
// within 1.05×, in the child's own time (what it took to write
// everything: the watches must not hold it). Each op is one round: one
// capture of each, in an order that turns from round to round; run it
// with -benchtime=Nx for N rounds.
//
// Reported: "x-alone-<variant>", the median over the rounds of the
// child's time with the watches over alone's in the same round;
// "final-x-alone-<variant>", the same of the wall time from Start to
// final (with nolit-64, final waits up to DrainTimeout for the matcher
// beside, then skips); "skipped-lines/op", the lines each nolit-64 watch
// skipped per capture, and "skipped-share", that over the lines written.
func BenchmarkWatchMany(b *testing.B) {
	dir := b.TempDir()
	stat := filepath.Join(dir, "took")
	args := []string{os.Args[0], strconv.Itoa(shortBytes), stat}
	env := map[string]string{benchHelperEnv: "short-lines"}
	nolit := make([]proc.Watch, 64)
	rare := make([]proc.Watch, 64)
	for i := range 64 {
		nolit[i] = proc.Watch{Name: fmt.Sprint("d", i), Pattern: `^\d+$`}
		rare[i] = proc.Watch{Name: fmt.Sprint("j", i), Pattern: fmt.Sprintf("job %d (done|failed)", i)}
	}
	m := proctest.NewManager(b, proc.Options{EventHistory: 1 << 16})
	variants := []struct {
		name string
		req  proc.StartRequest
	}{
		{"alone", proc.StartRequest{Args: args, Env: env}},
		{"nolit-64", proc.StartRequest{Args: args, Env: env, Watch: nolit}},
		{"rare-64", proc.StartRequest{Args: args, Env: env, Watch: rare}},
	}
	var cursor int64
	// capture runs variant v once; it returns the child's time, the wall
	// time to final, and the lines one watch skipped.
	capture := func(v int) (child, wall time.Duration, skipped int64) {
		start := time.Now()
		p := procRun(b, m, variants[v].req)
		wall = time.Since(start)
		checkFinal(b, p, shortBytes)
		took, err := os.ReadFile(stat)
		if err != nil {
			b.Fatal(err)
		}
		ns, err := strconv.ParseInt(string(took), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		evs, next, lost := m.Events(cursor, 0)
		cursor = next
		if lost > 0 {
			b.Fatalf("%d events lost; raise EventHistory", lost)
		}
		for _, ev := range evs {
			switch {
			case ev.Kind == proc.EventMatched:
				b.Fatalf("%s: event %+v; want no match", variants[v].name, ev)
			case ev.Kind == proc.EventSkipped && ev.Watch == "d0":
				skipped += ev.Skipped
			}
		}
		return time.Duration(ns), wall, skipped
	}
	for v := range variants {
		capture(v) // warm the buffers and the page cache
	}
	childNs := make([][]float64, len(variants))
	childX := make([][]float64, len(variants))
	wallX := make([][]float64, len(variants))
	var skipped []float64
	b.SetBytes(int64(len(variants)) * shortBytes)
	rounds := 0
	for b.Loop() {
		var child, wall [3]time.Duration
		for k := range variants {
			v := (k + rounds) % len(variants)
			var s int64
			child[v], wall[v], s = capture(v)
			if v == 1 {
				skipped = append(skipped, float64(s))
			}
		}
		rounds++
		for v := range variants {
			childNs[v] = append(childNs[v], float64(child[v]))
		}
		for v := 1; v < len(variants); v++ {
			childX[v] = append(childX[v], float64(child[v])/float64(child[0]))
			wallX[v] = append(wallX[v], float64(wall[v])/float64(wall[0]))
		}
	}
	b.StopTimer()
	for v := range variants {
		b.ReportMetric(medianOf(childNs[v]), "child-ns-"+variants[v].name)
	}
	for v := 1; v < len(variants); v++ {
		b.ReportMetric(medianOf(childX[v]), "x-alone-"+variants[v].name)
		b.ReportMetric(medianOf(wallX[v]), "final-x-alone-"+variants[v].name)
	}
	lines := float64(shortBytes / 9)
	b.ReportMetric(medianOf(skipped), "skipped-lines/op")
	b.ReportMetric(medianOf(skipped)/lines, "skipped-share")
}
