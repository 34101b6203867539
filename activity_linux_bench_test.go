//go:build linux && !proc_otherunix

package proc_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/procvisor/proc"
)

// BenchmarkActivity is one Activity() of a ten-member tree with stdin (a
// shell waiting for nine sleeps), so that every member's blocked system
// call is looked at, in each process-tree mode. With "-listener" one member
// also listens on a TCP port, so the socket tables are read too.
func BenchmarkActivity(b *testing.B) {
	for _, mode := range treeModes {
		for _, listener := range []bool{false, true} {
			name := mode.name
			command := "for i in 1 2 3 4 5 6 7 8 9; do sleep 60 & done; wait"
			if listener {
				name += "-listener"
				command = "for i in 1 2 3 4 5 6 7 8; do sleep 60 & done; \"$0\" tcp4 127.0.0.1:0 & wait"
			}
			b.Run(name, func(b *testing.B) {
				ctx := testCtx(b)
				m := newManager(b, treeOptions(b, mode))
				req := helperReq("activity-listen")
				req.Args = []string{"sh", "-c", command, req.Args[0]}
				req.Stdin = true
				p := mustStart(b, m, req)
				waitActivity(ctx, b, p, "10 members", func(a proc.Activity) bool {
					return a.Members == 10 && (len(a.Listeners) == 1) == listener
				})
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if _, err := p.Activity(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// wideCommand is a shell that starts n-1 sleeps in the background and
// waits for them: a tree of n members, none of which does anything.
func wideCommand(n int) string {
	return fmt.Sprintf(`i=1; while [ $i -lt %d ]; do sleep 600 & i=$((i+1)); done; wait`, n)
}

// startWide starts a record of wideCommand(members) with stdin (so that
// every member's blocked system call is looked at) in a Manager of mode,
// and waits until Activity sees all its members; the Manager's Close
// kills them when the benchmark ends.
func startWide(b *testing.B, mode treeMode, members int, watch bool) *proc.Process {
	b.Helper()
	ctx := testCtx(b, 2*time.Minute)
	m := newManager(b, treeOptions(b, mode))
	p := mustStart(b, m, proc.StartRequest{Command: wideCommand(members), Stdin: true, WatchActivity: watch})
	waitActivity(ctx, b, p, fmt.Sprintf("%d members", members), func(a proc.Activity) bool {
		return a.Members == members && !a.WaitingForInput
	})
	return p
}

// BenchmarkActivityWide is one Activity() of an idle 500-member tree
// with stdin, in each process-tree mode: the looks an agent makes of a
// wide build or test run. It also reports the CPU time per look
// (cpu-us/op), which is what a poller pays. "warm" looks again and again,
// as callers and pollers do; "afresh" forgets what earlier looks kept
// before each, as the first look at a tree. Run it with -benchtime=100x
// or more, so that each figure is a block of looks. Target (design
// section 15): under 5 ms a look.
func BenchmarkActivityWide(b *testing.B) {
	for _, mode := range treeModes {
		b.Run(mode.name, func(b *testing.B) {
			p := startWide(b, mode, 500, false)
			for _, afresh := range []bool{false, true} {
				name, activity := "warm", p.Activity
				if afresh {
					name, activity = "afresh", func() (proc.Activity, error) { return proc.ActivityAfresh(p) }
				}
				b.Run(name, func(b *testing.B) {
					b.ReportAllocs()
					cpu := proc.HostCPU(b)
					for b.Loop() {
						a, err := activity()
						if err != nil || a.Members != 500 {
							b.Fatalf("Activity() = %+v, %v; want 500 members", a, err)
						}
					}
					b.ReportMetric(float64((proc.HostCPU(b)-cpu).Microseconds())/float64(b.N), "cpu-us/op")
				})
			}
		})
	}
}

// BenchmarkWatchActivityIdle is the CPU cost of WatchActivity on an idle
// 500-member tree, in each process-tree mode: the process's CPU time
// (getrusage, every goroutine) over b.N periods of the real poll interval
// (100 ms, one look each), reported as the share of one core the process
// used meanwhile (core-%). Nothing else runs in the process then, so it
// is the poller's. Run it with -benchtime=100x or more: each op is a poll
// period. Target (design section 15): under 2% of one core.
func BenchmarkWatchActivityIdle(b *testing.B) {
	const period = 100 * time.Millisecond // activity.go's inputPoll
	for _, mode := range treeModes {
		b.Run(mode.name, func(b *testing.B) {
			startWide(b, mode, 500, true)
			tick := time.NewTicker(period)
			defer tick.Stop()
			<-tick.C
			start, cpu := time.Now(), proc.HostCPU(b)
			for b.Loop() {
				<-tick.C
			}
			used, wall := proc.HostCPU(b)-cpu, time.Since(start)
			b.ReportMetric(100*used.Seconds()/wall.Seconds(), "core-%")
		})
	}
}
