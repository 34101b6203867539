//go:build linux

package sandbox

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/coder/quartz"
	"golang.org/x/sys/unix"
)

// BenchmarkRoutedChmod measures what a chmod routed to the host costs: a
// child makes a storm of chmodStorm chmods of one file beneath a writable
// root, sandboxed (each routed) and not, in alternating order. Reported:
// "ns-routed" and "ns-plain", the medians per chmod; "ns-extra", their
// difference (the routing's cost); "x-routed", their ratio;
// "cpu-ns-host", the host's CPU per routed chmod (steadier on a shared
// machine). ns/op is a round of both storms.
func BenchmarkRoutedChmod(b *testing.B) {
	support(b)
	const chmodStorm = 2000
	root := b.TempDir()
	f := filepath.Join(root, "f")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		b.Fatal(err)
	}
	arg := "chmod-storm=" + f + ":" + strconv.Itoa(chmodStorm)
	var hostCPU []float64 // the host's CPU per routed chmod
	storm := func(sandboxed bool) float64 {
		cmd := opsCmd(nil, arg)
		cpu := selfCPU(b)
		start := time.Now()
		if sandboxed {
			defer func() { hostCPU = append(hostCPU, float64(selfCPU(b)-cpu)/chmodStorm) }()
		}
		if sandboxed {
			res := run(testCtx(b), b, cmd, Policy{WritableRoots: []string{root}}, true)
			if got := res.line(b, "chmod-storm"); got != "ok" {
				b.Fatalf("routed storm: %s", got)
			}
		} else if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("plain storm: %v %s", err, out)
		}
		return float64(time.Since(start).Nanoseconds()) / chmodStorm
	}
	var routed, plain []float64
	round := 0
	for b.Loop() {
		if round%2 == 0 {
			routed = append(routed, storm(true))
			plain = append(plain, storm(false))
		} else {
			plain = append(plain, storm(false))
			routed = append(routed, storm(true))
		}
		round++
	}
	r, p := median(routed), median(plain)
	b.ReportMetric(r, "ns-routed")
	b.ReportMetric(p, "ns-plain")
	b.ReportMetric(r-p, "ns-extra")
	b.ReportMetric(r/p, "x-routed")
	b.ReportMetric(median(hostCPU), "cpu-ns-host")
}

// selfCPU is this process's CPU time so far, in nanoseconds.
func selfCPU(b *testing.B) int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// TestPace: after a routed call that took d, the notifier waits 3d (at
// most 20 ms) before the next, so that a flooding tree gets about a
// quarter of a host core; Stop ends the wait.
func TestPace(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	for _, tt := range []struct{ spent, pause time.Duration }{
		{time.Millisecond, 3 * time.Millisecond},
		{time.Second, 20 * time.Millisecond},
	} {
		mClock := quartz.NewMock(t)
		trap := mClock.Trap().NewTimer("sandbox", "pace")
		n := &notifier{clock: mClock, stop: make(chan struct{})}
		done := make(chan struct{})
		// Stopped when pace returns (the mock's advance below).
		go func() {
			n.pace(tt.spent)
			close(done)
		}()
		trap.MustWait(ctx).MustRelease(ctx)
		trap.Close()
		mClock.Advance(tt.pause - time.Microsecond).MustWait(ctx)
		select {
		case <-done:
			t.Fatalf("pace(%v) returned before %v", tt.spent, tt.pause)
		default:
		}
		mClock.Advance(time.Microsecond).MustWait(ctx)
		<-done
	}
	// Stop ends the wait at once.
	mClock := quartz.NewMock(t)
	n := &notifier{clock: mClock, stop: make(chan struct{})}
	close(n.stop)
	n.pace(time.Second) // returns without the clock moving
}
