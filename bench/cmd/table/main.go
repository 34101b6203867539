// Command table runs the comparison benchmarks of this module several times
// and prints the medians and ratios side by side as a markdown table, with
// each target of the design and whether it is met.
//
// Run it from the bench directory:
//
//	go run ./cmd/table -rounds 5 -capture 1GiB
//
// Each round runs the whole suite once (-test.count=1), so proc and its
// baselines alternate over the rounds and see the same machine load; a
// ratio is taken within each round, then the median over rounds is shown.
// With -in it reads benchmark output saved earlier instead (any -count;
// the k-th result of one sub-benchmark is paired with the k-th of another).
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

func main() {
	rounds := flag.Int("rounds", 5, "times to run the suite")
	capture := flag.String("capture", "1GiB", "bytes written by the child in BenchmarkCapture")
	bench := flag.String("bench", ".", "benchmarks to run (-test.bench)")
	benchtime := flag.String("benchtime", "1s", "-test.benchtime of each round")
	dir := flag.String("dir", ".", "directory of the bench module")
	in := flag.String("in", "", "read benchmark output from this file (- for stdin) instead of running")
	raw := flag.String("raw", "", "also save the raw benchmark output to this file")
	flag.Parse()

	var out bytes.Buffer
	if *in != "" {
		var r io.Reader = os.Stdin
		if *in != "-" {
			f, err := os.Open(*in)
			if err != nil {
				fatal(err)
			}
			defer f.Close()
			r = f
		}
		if _, err := io.Copy(&out, r); err != nil {
			fatal(err)
		}
	} else {
		if err := runRounds(&out, *dir, *rounds, *bench, *benchtime, *capture); err != nil {
			fatal(err)
		}
	}
	if *raw != "" {
		if err := os.WriteFile(*raw, out.Bytes(), 0o644); err != nil {
			fatal(err)
		}
	}
	res := parse(&out)
	if len(res) == 0 {
		fatal(fmt.Errorf("no benchmark results found"))
	}
	printTable(os.Stdout, res)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "table:", err)
	os.Exit(1)
}

// runRounds builds the test binary once and runs it rounds times, copying
// its output to out and, as progress, to stderr.
func runRounds(out io.Writer, dir string, rounds int, bench, benchtime, capture string) error {
	tmp, err := os.MkdirTemp("", "proc-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "bench.test")
	build := exec.Command("go", "test", "-c", "-o", bin, ".")
	build.Dir = dir
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build the test binary: %w", err)
	}
	for i := range rounds {
		fmt.Fprintf(os.Stderr, "round %d of %d\n", i+1, rounds)
		cmd := exec.Command(bin,
			"-test.run", "^$",
			"-test.bench", bench,
			"-test.benchmem",
			"-test.count", "1",
			"-test.benchtime", benchtime,
			"-capture", capture)
		cmd.Dir = dir
		cmd.Stdout = io.MultiWriter(out, os.Stderr)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("round %d: %w", i+1, err)
		}
	}
	return nil
}

// results holds, for each benchmark name (without the GOMAXPROCS suffix)
// and unit, the values in the order they were printed.
type results map[string]map[string][]float64

func parse(r io.Reader) results {
	res := results{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		if res[name] == nil {
			res[name] = map[string][]float64{}
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			res[name][f[i+1]] = append(res[name][f[i+1]], v)
		}
	}
	return res
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// med is the median of name's unit; NaN if there is none.
func (r results) med(name, unit string) float64 { return median(r[name][unit]) }

// max is the largest of name's unit; NaN if there is none.
func (r results) max(name, unit string) float64 {
	v := r[name][unit]
	if len(v) == 0 {
		return math.NaN()
	}
	return slices.Max(v)
}

// ratio is the median over rounds of a's unit divided by b's unit.
func (r results) ratio(a, b, unit string) float64 {
	va, vb := r[a][unit], r[b][unit]
	var q []float64
	for i := range min(len(va), len(vb)) {
		if vb[i] != 0 {
			q = append(q, va[i]/vb[i])
		}
	}
	return median(q)
}

func fmtDur(ns float64) string {
	switch {
	case math.IsNaN(ns):
		return "—"
	case ns >= 1e9:
		return fmt.Sprintf("%.2f s", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.1f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.1f µs", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}

func fmtBytes(n float64) string {
	switch {
	case math.IsNaN(n):
		return "—"
	case math.Abs(n) >= 1<<30:
		return fmt.Sprintf("%.2f GiB", n/(1<<30))
	case math.Abs(n) >= 1<<20:
		return fmt.Sprintf("%.1f MiB", n/(1<<20))
	case math.Abs(n) >= 1<<10:
		return fmt.Sprintf("%.1f KiB", n/(1<<10))
	}
	return fmt.Sprintf("%.0f B", n)
}

func fmtRatio(x float64, of string) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.3f× %s", x, of)
}

func fmtNum(x float64, unit string) string {
	if math.IsNaN(x) {
		return "—"
	}
	return fmt.Sprintf("%.0f %s", x, unit)
}

func met(ok bool, known bool) string {
	switch {
	case !known:
		return "—"
	case ok:
		return "yes"
	}
	return "**no**"
}

func known(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) {
			return false
		}
	}
	return true
}

// sizeOf recovers the bytes per op of a benchmark from MB/s and ns/op.
func (r results) sizeOf(name string) string {
	mbps, ns := r.med(name, "MB/s"), r.med(name, "ns/op")
	if !known(mbps, ns) {
		return "SIZE"
	}
	n := mbps * ns / 1e3
	for _, unit := range []struct {
		size float64
		name string
	}{{1 << 30, "G"}, {1 << 20, "M"}, {1 << 10, "K"}} {
		if n >= unit.size*0.95 {
			return fmt.Sprintf("%.0f%s", math.Round(n/unit.size), unit.name)
		}
	}
	return fmt.Sprintf("%.0f", n)
}

func printTable(w io.Writer, r results) {
	const mib = 1 << 20
	rows := [][]string{}
	add := func(cells ...string) { rows = append(rows, cells) }

	// Capture throughput.
	c := "BenchmarkCapture/"
	x := r.ratio(c+"proc", c+"raw", "ns/op")
	add(fmt.Sprintf("Capture `head -c %s /dev/zero`, start to final (throughput)", r.sizeOf(c+"proc")),
		fmtNum(r.med(c+"proc", "MB/s"), "MB/s"), fmtNum(r.med(c+"raw", "MB/s"), "MB/s"), fmtNum(r.med(c+"gocmd", "MB/s"), "MB/s"),
		fmtRatio(x, "raw time"), "≤ 1.10× raw", met(x <= 1.10, known(x)))

	// Memory while capturing.
	m := "BenchmarkCaptureMemory/"
	p64, p1g := r.max(m+"64MiB/proc", "peak-heap-B"), r.max(m+"1GiB/proc", "peak-heap-B")
	for _, size := range []string{"64MiB", "1GiB"} {
		pp, pg := r.max(m+size+"/proc", "peak-heap-B"), r.max(m+size+"/gocmd", "peak-heap-B")
		add("Peak heap growth capturing "+size+" (worst round)",
			fmtBytes(pp), "—", fmtBytes(pg),
			fmtRatio(pp/pg, "go-cmd"), "< 1 MiB, independent of size",
			met(pp < mib && p1g <= p64+64<<10, known(pp, p64, p1g)))
	}
	for _, size := range []string{"64MiB", "1GiB"} {
		pa, ga := r.max(m+size+"/proc", "alloc-heap-B"), r.max(m+size+"/gocmd", "alloc-heap-B")
		add("Heap allocated in all, capturing "+size+" (GC-independent bound)",
			fmtBytes(pa), "—", fmtBytes(ga), fmtRatio(pa/ga, "go-cmd"), "< 1 MiB", met(pa < mib, known(pa)))
	}

	// Start to final of true, from BenchmarkTruePaired, where the variants
	// alternate in short blocks (BenchmarkTrue gives the CPU time below).
	t, tp := "BenchmarkTrue/", "BenchmarkTruePaired"
	for _, v := range []struct{ sub, label string }{
		{"proc", "manager in steady state (holds MaxRetained records)"},
		{"proc-fresh", "fresh manager (never dropped a record)"},
	} {
		x = r.med(tp, "x-raw-"+v.sub)
		add("Start to final of `true`, "+v.label,
			fmtDur(r.med(tp, "ns-"+v.sub)), fmtDur(r.med(tp, "ns-raw")), fmtDur(r.med(tp, "ns-gocmd")),
			fmtRatio(x, "raw")+"; "+fmtRatio(x/r.med(tp, "x-raw-raw-async"), "raw-async"),
			"≤ 1.10× raw", met(x <= 1.10, known(x)))
	}
	// The floors: os/exec capturing the output, blocking and asynchronous.
	for _, v := range []struct{ sub, label string }{
		{"raw-pipe", "os/exec reading a pipe on the caller's goroutine"},
		{"raw-async", "os/exec read by a goroutine, the caller waiting on a channel"},
		{"gocmd", "go-cmd"},
	} {
		add("Start to final of `true`, "+v.label+" (a baseline, not a target)",
			"—", fmtDur(r.med(tp, "ns-"+v.sub)), "—", fmtRatio(r.med(tp, "x-raw-"+v.sub), "raw"), "—", "—")
	}

	// Containment (issue 10): a cgroup per record against a session per
	// record, from BenchmarkTrueContain (paired blocks, like TruePaired),
	// and the kill of a 200-member tree from BenchmarkKillTree.
	tc := "BenchmarkTrueContain"
	x = r.med(tc, "x-group-cgroup")
	add("Start to final of `true` in cgroup mode vs group mode (steady-state managers, paired blocks of 100 starts)",
		fmtDur(r.med(tc, "ns-cgroup")), "group mode: "+fmtDur(r.med(tc, "ns-group"))+"; bare Run(): "+fmtDur(r.med(tc, "ns-raw")), "—",
		fmt.Sprintf("%s; CPU: %s, children's CPU: %s; group mode %s", fmtRatio(x, "group"),
			fmtRatio(r.med(tc, "cpu-x-group-cgroup"), "group"), fmtRatio(r.med(tc, "child-cpu-x-group-cgroup"), "group"),
			fmtRatio(r.med(tc, "x-raw-group"), "raw")),
		"≤ 1.05× group", met(x <= 1.05, known(x)))
	for _, mode := range []string{"cgroup", "group"} {
		metric := "x-watchdog"
		if mode == "cgroup" {
			metric = "x-watchdog-cgroup"
		}
		xw := r.med(tc, metric)
		add(fmt.Sprintf("Start to final of `true` with the host-death watchdog vs without (%s mode, KeepOnHostExit)", mode),
			fmtDur(r.med(tc, "ns-"+mode)), "without: "+fmtDur(r.med(tc, "ns-"+mode+"-nowatch")), "—",
			fmtRatio(xw, "without"), "≤ 1.02× without", met(xw <= 1.02, known(xw)))
	}
	// Containment under sustained load (issue 22): the spawn rate of 8
	// goroutines (blocks of 200 starts), and 1,000 concurrent starts of
	// `sleep` and the Close that stops them, cgroup mode against group mode.
	sc := "BenchmarkSpawnContain"
	x = r.med(sc, "x-group-cgroup")
	add("Spawn rate of `true` from 8 goroutines (blocks of 200 starts), cgroup mode vs group mode",
		fmtDur(r.med(sc, "ms-cgroup")*1e6)+" a block", "group mode: "+fmtDur(r.med(sc, "ms-group")*1e6), "—",
		fmt.Sprintf("%s; CPU: %s", fmtRatio(x, "group"), fmtRatio(r.med(sc, "cpu-x-group-cgroup"), "group")),
		"≤ 1.05× group", met(x <= 1.05, known(x)))
	th := "BenchmarkThousandContain"
	for _, v := range []struct {
		step, label string
		goal        float64
	}{
		{"start", "1,000 concurrent starts of `sleep`", 1.05},
		{"close", "Close of those 1,000 running records", 1.10},
	} {
		x = r.med(th, "x-group-cgroup-"+v.step)
		add(v.label+", cgroup mode vs group mode",
			fmtDur(r.med(th, "ms-cgroup-"+v.step)*1e6), "group mode: "+fmtDur(r.med(th, "ms-group-"+v.step)*1e6), "—",
			fmtRatio(x, "group"), fmt.Sprintf("≤ %.2f× group", v.goal), met(x <= v.goal, known(x)))
	}
	kt := "BenchmarkKillTree"
	for _, mode := range []string{"cgroup", "group"} {
		empty, worst := r.med(kt, "ms-"+mode+"-empty"), r.max(kt, "max-ms-"+mode+"-empty")
		goal, ok, vs := "—", "—", "a baseline, not a target"
		if mode == "cgroup" {
			goal, ok = "≤ 10 ms", met(empty <= 10, known(empty))
			vs = fmtRatio(r.med(kt, "x-group-cgroup"), "group mode")
		}
		add(fmt.Sprintf("Signal(Kill) of a tree of `sh` and 200 `sleep`s until known empty, %s mode: median (worst); Signal returns, Done closes", mode),
			fmt.Sprintf("%s (%s); %s, %s", fmtDur(empty*1e6), fmtDur(worst*1e6),
				fmtDur(r.med(kt, "ms-"+mode+"-signal")*1e6), fmtDur(r.med(kt, "ms-"+mode+"-done")*1e6)),
			"—", "—", vs, goal, ok)
	}

	// The sandbox (issue 20): a sandboxed start against an unsandboxed one
	// in the same mode, blocks of 100 starts by 4 goroutines. No target:
	// the cost is reported.
	sb := "BenchmarkSandbox"
	for _, mode := range []string{"cgroup", "group"} {
		add("Start to final of `true`, sandboxed vs not, "+mode+" mode (blocks of 100 starts by 4 goroutines)",
			fmtDur(r.med(sb, "ns-sandbox-"+mode)), "not sandboxed: "+fmtDur(r.med(sb, "ns-"+mode)), "—",
			fmt.Sprintf("%s; host CPU: %s (+%s per start)", fmtRatio(r.med(sb, "x-sandbox-"+mode), "unsandboxed"),
				fmtRatio(r.med(sb, "cpu-x-sandbox-"+mode), "unsandboxed"), fmtDur(r.med(sb, "cpu-ns-sandbox-extra-"+mode))),
			"—", "—")
	}

	// Events (design section 19): 512 MiB of log lines captured with three watches
	// against the same capture alone.
	wa := "BenchmarkWatch/"
	x = r.med(wa+"watch-3", "x-alone")
	add("Capture 512 MiB of log lines with three watches",
		fmtNum(r.med(wa+"watch-3", "MB/s"), "MB/s"), fmtNum(r.med(wa+"alone", "MB/s"), "MB/s")+" (alone)", "—",
		fmt.Sprintf("%s; CPU: %s", fmtRatio(x, "alone"), fmtRatio(r.ratio(wa+"watch-3", wa+"alone", "cpu-ms/op"), "alone")),
		"≤ 1.05× alone", met(x <= 1.05, known(x)))

	// Silent grandchild.
	g := "BenchmarkSilentGrandchild/"
	worst := r.max(g+"proc", "max-exit-to-final-ms")
	typical := r.med(g+"proc", "exit-to-final-ms")
	floorWorst := r.max(g+"timer-floor", "max-exit-to-final-ms")
	add("Silent grandchild holds stdout: shell exit to final, mean (worst)",
		fmt.Sprintf("%s (%s)", fmtDur(typical*1e6), fmtDur(worst*1e6)),
		fmtDur(r.med(g+"raw", "exit-to-final-ms")*1e6),
		fmtDur(r.med(g+"gocmd", "ns/op"))+" start to final",
		fmt.Sprintf("%s; bare 50 ms timer: %s (%s)", fmtRatio(r.ratio(g+"proc", g+"raw", "ns/op"), "raw"),
			fmtDur(r.med(g+"timer-floor", "exit-to-final-ms")*1e6), fmtDur(floorWorst*1e6)),
		"≤ DrainQuiet + 25 ms = 75 ms",
		metGrandchild(typical, worst, floorWorst))

	// Snapshot.
	s := "BenchmarkSnapshot/"
	for _, state := range []string{"final", "running"} {
		allocs := r.max(s+state, "allocs/op")
		add("Snapshot() of full default buffers, "+state,
			fmt.Sprintf("%s, %.0f allocs", fmtDur(r.med(s+state, "ns/op")), allocs),
			fmt.Sprintf("%s, %.0f alloc (copy floor)", fmtDur(r.med(s+"copy-floor", "ns/op")), r.max(s+"copy-floor", "allocs/op")),
			"—", fmtRatio(r.ratio(s+state, s+"copy-floor", "ns/op"), "copy floor"), "≤ 4 allocs, µs",
			met(allocs <= 4, known(allocs)))
	}

	// Retained records.
	l := "BenchmarkRetained/List"
	per := r.max(l, "heap-B/record")
	add("Heap per retained final record (2,000 records, worst)", fmtBytes(per), "—", "—", "—", "< 1.5 KiB", met(per < 1536, known(per)))
	list := r.med(l, "ns/op")
	add("List() of 2,000 retained records", fmtDur(list), "—", "—", "—", "< 2 ms", met(list < 2e6, known(list)))

	// Concurrency.
	k := "BenchmarkConcurrent/"
	for _, v := range []struct{ sub, label string }{
		{"proc", "steady-state manager"},
		{"proc-fresh", "fresh manager"},
	} {
		x = r.ratio(k+v.sub, k+"raw", "ns/op")
		add("256 processes × 4 MiB at once, wall time until all final, "+v.label,
			fmtDur(r.med(k+v.sub, "ns/op")), fmtDur(r.med(k+"raw", "ns/op")), fmtDur(r.med(k+"gocmd", "ns/op")),
			fmtRatio(x, "raw"), "≤ 1.2× raw", met(x <= 1.2, known(x)))
	}

	// Readers (issue 16): polling, following, the tee, stdin.
	pl := "BenchmarkPolled"
	for _, v := range []struct{ metric, label string }{
		{"x-same", "the same record"},
		{"x-other", "another, final record"},
	} {
		x = r.med(pl, v.metric)
		add("Capture 512 MiB with 4 goroutines calling Snapshot() of "+v.label+" in a tight loop",
			"—", fmtDur(r.med(pl, "ns-alone"))+" (alone)", "—",
			fmtRatio(x, "alone"), "≤ 1.2× alone", met(x <= 1.2, known(x)))
	}
	fc := "BenchmarkFollowCost"
	for _, v := range []struct{ name, label string }{
		{"10B", "10 bytes"},
		{"64KiB", "64 KiB"},
	} {
		x = r.med(fc, "x-"+v.name)
		add("Capture 64 MiB followed by a reader of "+v.label+" a call",
			fmt.Sprintf("%.2f%% lost", r.max(fc, "lost-%-"+v.name)), fmtDur(r.med(fc, "ns-alone"))+" (alone)", "—",
			fmtRatio(x, "alone"), "≤ 1.1× alone", met(x <= 1.1, known(x)))
	}
	fl := "BenchmarkFollow/"
	for _, v := range []string{"tail-16KiB/50MBps", "tail-16KiB/400MBps", "tail-16KiB/max", "tail-1MiB/400MBps", "tail-1MiB/max"} {
		lost := r.max(fl+v, "lost-%")
		goal, ok := "—", "—"
		if v == "tail-16KiB/50MBps" {
			goal, ok = "0 bytes lost", met(lost == 0, known(lost))
		}
		add("Follower (WaitOutput/ReadSinceInto) of 64 KiB writes, "+v+", share lost (worst round)",
			fmt.Sprintf("%.2f%% at %s", lost, fmtNum(r.med(fl+v, "MB/s"), "MB/s")), "—", "—", "—", goal, ok)
	}
	fm := r.max("BenchmarkFollowMemory", "alloc-heap-B")
	add("Heap allocated following 1 GiB (worst round)", fmtBytes(fm), "—", "—", "—", "< 64 MiB", met(fm < 64*mib, known(fm)))
	te := "BenchmarkTee/"
	x = r.ratio(te+"tee-discard", te+"alone", "ns/op")
	add("Capture 512 MiB with OutputTee into io.Discard", fmtNum(r.med(te+"tee-discard", "MB/s"), "MB/s"),
		fmtNum(r.med(te+"alone", "MB/s"), "MB/s")+" (alone)", "—", fmtRatio(x, "alone"), "≤ 1.05× alone", met(x <= 1.05, known(x)))
	st := "BenchmarkStdin/"
	x = r.ratio(st+"proc", st+"raw", "ns/op")
	add("64 MiB to `cat` in 4 KiB writes", fmtNum(r.med(st+"proc", "MB/s"), "MB/s"), fmtNum(r.med(st+"raw", "MB/s"), "MB/s"), "—",
		fmtRatio(x, "raw pipe"), "≤ 1.5× raw", met(x <= 1.5, known(x)))

	rounds := len(r[t+"proc"]["ns/op"])
	fmt.Fprintf(w, "Medians of %d rounds; ratios are taken within each round (for `true`, within each block of BenchmarkTruePaired). proc: this library; raw: os/exec; go-cmd: github.com/go-cmd/cmd.\n\n", rounds)
	fmt.Fprintln(w, "| Target | proc | os/exec (raw) | go-cmd | proc vs baseline | Goal | Met |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, row := range rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}

	// CPU time: steadier than wall time on a shared machine, and it tells
	// the supervisor's own cost from the children's.
	fmt.Fprintln(w, "\nCPU time per op of the supervising process (its children's in parentheses).")
	fmt.Fprintln(w, "")
	fmt.Fprintln(w, "| Benchmark | proc | proc, fresh manager | os/exec (raw) | go-cmd | proc vs raw |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, name := range []string{"BenchmarkCapture", "BenchmarkTrue", "BenchmarkConcurrent"} {
		cell := func(sub string) string {
			self, child := r.med(name+"/"+sub, "cpu-ms/op"), r.med(name+"/"+sub, "child-cpu-ms/op")
			if !known(self) {
				return "—"
			}
			return fmt.Sprintf("%s (%s)", fmtDur(self*1e6), fmtDur(child*1e6))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", strings.TrimPrefix(name, "Benchmark"),
			cell("proc"), cell("proc-fresh"), cell("raw"), cell("gocmd"),
			fmtRatio(r.ratio(name+"/proc", name+"/raw", "cpu-ms/op"), "raw"))
	}
}

// metGrandchild judges the drain target: the typical case must be within
// 75 ms, and so must the worst unless a bare timer was as late on the same
// machine (then the lateness is the machine's, reported as such).
func metGrandchild(typical, worst, floorWorst float64) string {
	switch {
	case !known(typical, worst):
		return "—"
	case typical > 75:
		return "**no**"
	case worst <= 75:
		return "yes"
	case known(floorWorst) && worst <= floorWorst+25:
		return "yes (worst case is machine scheduling: see bare timer)"
	}
	return "**no** (worst case)"
}
