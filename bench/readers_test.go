//go:build linux

package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/procvisor/proc"
	"github.com/procvisor/proc/proctest"

	"github.com/procvisor/proc/internal/testkit"
)

// pollBytes is what the child writes in BenchmarkPolled.
const pollBytes = 512 << 20

// interleaved runs the variants of one benchmark in turn, one op of each
// per iteration (starting with a different one each iteration, so that
// none always follows another), so that they see the same machine load,
// and reports each variant's total time as a multiple of the first's
// ("x-<name>", the ratio of the totals over all iterations) and the
// median over iterations of its op's time as a multiple of the first
// variant's op in the same iteration ("med-x-<name>", medianOf: the upper
// of the two middle ones for an even count), which one slow op, a burst
// of another engineer's load, moves less than it moves the totals.
// Every op is a sustained load of its own (hundreds of milliseconds of
// capture). A variant whose child is zerosArgs's also
// reports, per op, where the child's time went (childReport) and this
// process's CPU time ("self-ms-<name>": pump, readers and pollers).
// It returns, per variant, its op's time over the first's, per iteration.
func interleaved(b *testing.B, variants []variant) [][]float64 {
	b.Helper()
	spent := make([]time.Duration, len(variants))
	self := make([]time.Duration, len(variants))
	child := make([]schedStat, len(variants))
	// took is this iteration's op time of each variant; ratios[k] holds
	// variant k's against the first's, one per iteration.
	took := make([]time.Duration, len(variants))
	ratios := make([][]float64, len(variants))
	stat := b.TempDir() + "/schedstat"
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		for j := range variants {
			k := (i + j) % len(variants)
			_ = os.Remove(stat)
			cpu := readCPU(b)
			start := time.Now()
			variants[k].op(stat)
			took[k] = time.Since(start)
			spent[k] += took[k]
			self[k] += readCPU(b).self - cpu.self
			if s, err := readSchedStat(stat); err == nil {
				child[k].cpu += s.cpu
				child[k].runDelay += s.runDelay
				child[k].wall += s.wall
			}
		}
		for k := range variants {
			ratios[k] = append(ratios[k], float64(took[k])/float64(took[0]))
		}
	}
	perOp := func(d time.Duration) float64 { return float64(d.Milliseconds()) / float64(b.N) }
	for i, v := range variants {
		if i > 0 {
			b.ReportMetric(float64(spent[i])/float64(spent[0]), "x-"+v.name)
			b.ReportMetric(medianOf(ratios[i]), "med-x-"+v.name)
		}
		b.ReportMetric(perOp(self[i]), "self-ms-"+v.name)
		if child[i].wall > 0 {
			b.ReportMetric(perOp(child[i].cpu), "child-cpu-ms-"+v.name)
			b.ReportMetric(perOp(child[i].runDelay), "child-runq-ms-"+v.name)
			b.ReportMetric(perOp(child[i].blocked()), "child-held-ms-"+v.name)
		}
	}
	b.ReportMetric(float64(spent[0].Nanoseconds())/float64(b.N), "ns-"+variants[0].name)
	return ratios
}

// variant is one workload of an interleaved benchmark. op is given the
// path a zerosArgs child writes its schedstat to.
type variant struct {
	name string
	op   func(stat string)
}

// BenchmarkPolled captures 512 MiB of zeros (zerosArgs) alone, while four
// goroutines call Snapshot() of the same record in a tight loop until it
// is final (a transport that busy-polls one record), and while they poll
// another, final record instead. Target: x-same and x-other <= 1.2 (the
// capture's time against alone, interleaved in one run). snapshots/op
// counts the pollers' calls per capture.
func BenchmarkPolled(b *testing.B) {
	m := proctest.NewManager(b, proc.Options{})
	other := procRun(b, m, proc.StartRequest{Args: []string{"echo", "a final record"}})
	var calls, captures atomic.Int64
	capture := func(polled func(p *proc.Process) *proc.Process) func(string) {
		return func(stat string) {
			var req proc.StartRequest
			req.Args, req.Env = zerosArgs(pollBytes, stat)
			p, err := m.Start(req)
			if err != nil {
				b.Fatalf("Start(%q) = %v; want nil", req.Args, err)
			}
			var wg sync.WaitGroup
			for range 4 {
				if polled == nil {
					break
				}
				target := polled(p)
				wg.Add(1)
				// Ends when p is final.
				go func() {
					defer wg.Done()
					pollSnapshots(p.Done(), target, &calls, 0)
				}()
			}
			<-p.Done()
			wg.Wait()
			checkFinal(b, p, pollBytes)
			if polled != nil {
				captures.Add(1)
			}
		}
	}
	interleaved(b, []variant{
		{"alone", capture(nil)},
		{"same", capture(func(p *proc.Process) *proc.Process { return p })},
		{"other", capture(func(*proc.Process) *proc.Process { return other })},
	})
	b.ReportMetric(float64(calls.Load())/float64(max(captures.Load(), 1)), "snapshots/op")
	b.ReportMetric(float64(pollBytes)/1e6/(b.Elapsed().Seconds()/float64(3*b.N)), "MB/s-mean")
}

// followResult is what a follower saw of a stream.
type followResult struct {
	got, lost int64
	reads     int
}

// followAll follows p's output from 0 until EOF in a WaitOutput /
// ReadSinceInto loop through buf, as a streaming transport does.
func followAll(ctx context.Context, p *proc.Process, buf []byte) (followResult, error) {
	var r followResult
	for cursor := int64(0); ; {
		c := p.ReadSinceInto(cursor, buf)
		r.got += int64(len(c.Data))
		r.lost += c.Lost
		r.reads++
		cursor = c.Next
		if c.EOF {
			return r, nil
		}
		if c.Next >= c.End {
			if err := p.WaitOutput(ctx, cursor); err != nil {
				return r, err
			}
		}
	}
}

// followCase is one workload of BenchmarkFollow.
type followCase struct {
	name  string
	tail  int   // StartRequest.TailBytes; 0: default
	total int64 // bytes the child writes
	rate  int64 // bytes per second; 0: as fast as head -c can
}

// BenchmarkFollow follows a child's output from the start until EOF in a
// WaitOutput / ReadSinceInto loop, with default buffers and with a 1 MiB
// tail, and reports the share of the stream the follower never saw
// (lost-%) and the rate the child wrote at (MB/s). The paced children
// write 64 MiB in 64 KiB writes at the rate named; "max" is `head -c
// /dev/zero`, as fast as the pipe goes. Target: lost-% = 0 for the
// default buffers at 50 MB/s.
func BenchmarkFollow(b *testing.B) {
	var cases []followCase
	for _, tail := range []int{0, 1 << 20} {
		tailName := "tail-16KiB"
		if tail > 0 {
			tailName = "tail-1MiB"
		}
		for _, rate := range []int64{50, 100, 200, 400} {
			cases = append(cases, followCase{fmt.Sprintf("%s/%dMBps", tailName, rate), tail, 64 << 20, rate * 1e6})
		}
		cases = append(cases, followCase{tailName + "/max", tail, 256 << 20, 0})
	}
	for _, fc := range cases {
		b.Run(fc.name, func(b *testing.B) {
			m := proctest.NewManager(b, proc.Options{})
			req := proc.StartRequest{Args: []string{"head", "-c", strconv.FormatInt(fc.total, 10), "/dev/zero"}, TailBytes: fc.tail}
			if fc.rate > 0 {
				req.Args, req.Env = pacedArgs(fc.total, 64<<10, fc.rate)
			}
			ctx := testkit.Ctx(b, 5*time.Minute)
			buf := make([]byte, 256<<10)
			b.SetBytes(fc.total)
			b.ReportAllocs()
			var lost int64
			var reads int
			for b.Loop() {
				p, err := m.Start(req)
				if err != nil {
					b.Fatalf("Start() = %v; want nil", err)
				}
				r, err := followAll(ctx, p, buf)
				if err != nil {
					b.Fatalf("follow: %v", err)
				}
				checkFinal(b, p, fc.total)
				if r.got+r.lost != fc.total {
					b.Fatalf("follower saw %d + lost %d bytes; want %d in all", r.got, r.lost, fc.total)
				}
				lost += r.lost
				reads += r.reads
			}
			b.ReportMetric(100*float64(lost)/float64(fc.total)/float64(b.N), "lost-%")
			b.ReportMetric(float64(lost)/float64(b.N), "lost-B/op")
			b.ReportMetric(float64(reads)/float64(b.N), "reads/op")
			finish(b, "")
		})
	}
}

// followCostBytes is what the child writes in BenchmarkFollowCost.
const followCostBytes = 64 << 20

// BenchmarkFollowCost captures 64 MiB of zeros (zerosArgs) alone, followed
// from the start by a WaitOutput / ReadSinceInto loop that reads 10 bytes
// a call, by one that reads up to 64 KiB a call, by two at once that read
// 64 KiB and 256 KiB a call ("pair"), and by four at once that read 10
// bytes, 4 KiB, 64 KiB and 256 KiB a call ("mixed"), interleaved in one
// run. These loops are pollers (design section 20): the library never
// waits for them; BenchmarkFollower measures registered Followers.
// Target: x-10B, x-64KiB and x-mixed <= 1.1. lost-%-<name> is the share
// of the stream a follower never saw, on average over the followers that
// read 64 KiB or more a call (the 10 B follower's alone): a full-speed
// child outruns the smaller ones.
func BenchmarkFollowCost(b *testing.B) {
	fc := newFollowCost(b)
	interleaved(b, []variant{fc.variant("alone"), fc.variant("10B", 10), fc.variant("64KiB", 64<<10),
		fc.variant("pair", 64<<10, 256<<10), fc.variant("mixed", 10, 4<<10, 64<<10, 256<<10)})
	fc.reportLost("10B", "64KiB", "pair", "mixed")
}

// followCost makes BenchmarkFollowCost's workloads: a zerosArgs child of
// followCostBytes captured by the library, alone or followed from the
// start by followAll loops, adding up what the followers lost.
type followCost struct {
	b   *testing.B
	m   *proc.Manager
	ctx context.Context
	// lost and streams add up, per variant, the bytes the followers
	// counted in reportLost never saw and how many streams they followed.
	lost    map[string]int64
	streams map[string]int64
}

// newFollowCost returns a followCost with a Manager of its own; its
// followers give up 5 minutes after it is made.
func newFollowCost(b *testing.B) *followCost {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	b.Cleanup(cancel)
	return &followCost{b: b, m: proctest.NewManager(b, proc.Options{}), ctx: ctx,
		lost: map[string]int64{}, streams: map[string]int64{}}
}

// variant captures the child, followed by one followAll loop per size, each
// reading up to that many bytes a call (none: the capture alone). What a
// follower of 64 KiB or more a call lost (a lone follower's, whatever its
// size) is counted for reportLost.
func (fc *followCost) variant(name string, sizes ...int) variant {
	b := fc.b
	bufs := make([][]byte, len(sizes))
	for i, size := range sizes {
		bufs[i] = make([]byte, size)
	}
	return variant{name, func(stat string) {
		var req proc.StartRequest
		req.Args, req.Env = zerosArgs(followCostBytes, stat)
		p, err := fc.m.Start(req)
		if err != nil {
			b.Fatalf("Start(%q) = %v; want nil", req.Args, err)
		}
		results := make([]followResult, len(bufs))
		errs := make(chan error, len(bufs))
		for i, buf := range bufs {
			// Ends at EOF, or when ctx does; joined below.
			go func() {
				var err error
				results[i], err = followAll(fc.ctx, p, buf)
				errs <- err
			}()
		}
		for range bufs {
			if err := <-errs; err != nil {
				b.Fatalf("follow: %v", err)
			}
		}
		for i, r := range results {
			if len(bufs[i]) >= 64<<10 || len(bufs) == 1 {
				fc.lost[name] += r.lost
				fc.streams[name]++
			}
		}
		<-p.Done()
		checkFinal(b, p, followCostBytes)
	}}
}

// reportLost reports lost-%-<name> for each variant named: the share of
// the stream its counted followers never saw, on average over them.
func (fc *followCost) reportLost(names ...string) {
	for _, name := range names {
		fc.b.ReportMetric(100*float64(fc.lost[name])/followCostBytes/float64(fc.streams[name]), "lost-%-"+name)
	}
}

// BenchmarkFollowMemory follows `head -c 1G /dev/zero` until EOF and
// reports the heap allocated in all (garbage included) per GiB followed.
// Target: < 64 MiB per GiB.
func BenchmarkFollowMemory(b *testing.B) {
	const size = 1 << 30
	args := []string{"head", "-c", strconv.Itoa(size), "/dev/zero"}
	m := proctest.NewManager(b, proc.Options{})
	ctx := testkit.Ctx(b, 5*time.Minute)
	buf := make([]byte, 64<<10)
	b.SetBytes(size)
	b.ReportAllocs()
	var uses []heapUse
	for b.Loop() {
		uses = append(uses, measureHeap(func() any {
			p, err := m.Start(proc.StartRequest{Args: args})
			if err != nil {
				b.Fatalf("Start() = %v; want nil", err)
			}
			if _, err := followAll(ctx, p, buf); err != nil {
				b.Fatalf("follow: %v", err)
			}
			checkFinal(b, p, size)
			return p
		}))
	}
	reportHeap(b, uses)
	finish(b, "")
}

// teeBytes is what the child writes in BenchmarkTee.
const teeBytes = 512 << 20

// BenchmarkTee captures `head -c 512M /dev/zero` alone and with an
// OutputTee into io.Discard. Target: tee within 1.05× of alone.
func BenchmarkTee(b *testing.B) {
	args := []string{"head", "-c", strconv.Itoa(teeBytes), "/dev/zero"}
	for _, tee := range []bool{false, true} {
		name := "alone"
		if tee {
			name = "tee-discard"
		}
		b.Run(name, func(b *testing.B) {
			m := proctest.NewManager(b, proc.Options{})
			req := proc.StartRequest{Args: args}
			if tee {
				// Hide io.Discard's own methods: the tee is any writer.
				req.OutputTee = struct{ io.Writer }{io.Discard}
			}
			b.SetBytes(teeBytes)
			measured(b, "alone", func() {
				p := procRun(b, m, req)
				checkFinal(b, p, teeBytes)
				if info := p.Info(); info.TeeError != "" {
					b.Fatalf("TeeError = %q; want none", info.TeeError)
				}
			})
		})
	}
}

// stdinBytes and stdinWrite shape BenchmarkStdin.
const (
	stdinBytes = 64 << 20
	stdinWrite = 4 << 10
)

// BenchmarkStdin feeds 64 MiB in 4 KiB writes to `cat >/dev/null`: through
// an os/exec stdin pipe written raw, and through Process.Write. ns/op is
// from the first write until the child has read everything and exited.
// Target: proc within 1.5× of raw.
func BenchmarkStdin(b *testing.B) {
	chunk := make([]byte, stdinWrite)
	args := []string{"sh", "-c", "exec cat >/dev/null"}
	// feed writes stdinBytes to w in stdinWrite chunks, then closes stdin.
	feed := func(b *testing.B, w io.Writer, closeStdin func() error) {
		for range stdinBytes / stdinWrite {
			if _, err := w.Write(chunk); err != nil {
				b.Fatalf("Write() = %v; want nil", err)
			}
		}
		if err := closeStdin(); err != nil {
			b.Fatalf("closing stdin: %v; want nil", err)
		}
	}
	b.Run("raw", func(b *testing.B) {
		b.SetBytes(stdinBytes)
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			cmd, w, err := rawStart(args, (*exec.Cmd).StdinPipe)
			if err != nil {
				b.Fatalf("start %q: %v", args, err)
			}
			b.StartTimer()
			feed(b, w, w.Close)
			if err := cmd.Wait(); err != nil {
				b.Fatalf("Wait() = %v; want nil", err)
			}
		}
		finish(b, "")
	})
	b.Run("proc", func(b *testing.B) {
		m := proctest.NewManager(b, proc.Options{})
		b.SetBytes(stdinBytes)
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			p, err := m.Start(proc.StartRequest{Args: args, Stdin: true})
			if err != nil {
				b.Fatalf("Start() = %v; want nil", err)
			}
			b.StartTimer()
			feed(b, p, p.CloseStdin)
			<-p.Done()
			checkFinal(b, p, 0)
		}
		finish(b, "raw")
	})
}

// pollSnapshots is a tight poller: it takes snapshots of target until done
// closes, and then adds its count, from first, to calls.
func pollSnapshots(done <-chan struct{}, target *proc.Process, calls *atomic.Int64, first int64) {
	for n := first; ; n++ {
		select {
		case <-done:
			calls.Add(n)
			return
		default:
		}
		_ = target.Snapshot()
	}
}
