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
// root, sandboxed (each routed) and not, in alternating order. The storm
// stays within the host's pacing budget (a quarter of a core over 100
// ms), so this is a call's own cost; a longer flood is paced to the
// budget by design. Reported:
// "ns-routed" and "ns-plain", the medians per chmod; "ns-extra", their
// difference (the routing's cost); "x-routed", their ratio;
// "cpu-ns-host", the host's CPU per routed chmod (steadier on a shared
// machine). ns/op is a round of both storms.
func BenchmarkRoutedChmod(b *testing.B) {
	support(b)
	const chmodStorm = 200
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

// TestPace: routed calls run at once while a tree has spent less than a
// quarter of a window (100 ms) on them; the call that spends the budget
// waits out the rest of the window, and the next window starts afresh.
// Stop ends the wait.
func TestPace(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	mClock := quartz.NewMock(t)
	trap := mClock.Trap().NewTimer("sandbox", "pace")
	n := &notifier{clock: mClock, stop: make(chan struct{})}
	n.pace(10 * time.Millisecond) // within the budget: no wait
	n.pace(10 * time.Millisecond)
	mClock.Advance(40 * time.Millisecond).MustWait(ctx)
	done := make(chan struct{})
	// Stopped when pace returns (the mock's advance below).
	go func() {
		n.pace(10 * time.Millisecond) // 30 ms spent: wait to the window's end
		close(done)
	}()
	call := trap.MustWait(ctx)
	if call.Duration != 60*time.Millisecond {
		t.Errorf("the pause is %v; want the rest of the window, 60ms", call.Duration)
	}
	call.MustRelease(ctx)
	trap.Close()
	mClock.Advance(60*time.Millisecond - time.Microsecond).MustWait(ctx)
	select {
	case <-done:
		t.Fatal("pace returned before the window's end")
	default:
	}
	mClock.Advance(time.Microsecond).MustWait(ctx)
	<-done
	n.pace(20 * time.Millisecond) // a new window: no wait
	// Stop ends a wait at once.
	close(n.stop)
	n.pace(10 * time.Millisecond) // spends the budget; returns without the clock moving
}

// TestAllowedByObject: the host decides by the object a routed call opened,
// not by the name the kernel gives it: an object in a detached mount
// (open_tree) is named from that mount's root, so a file outside the
// roots can carry a root's name. allowed refuses it, and allows the same
// name reached from the host's root.
func TestAllowedByObject(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("open_tree needs CAP_SYS_ADMIN (CI runs as root)")
	}
	root := sharedDir(t)
	outside := sharedDir(t)
	mirror := filepath.Join(outside, root) // outside/<root's path>
	if err := os.MkdirAll(mirror, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{filepath.Join(mirror, "victim"), filepath.Join(root, "victim")} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tree, err := unix.OpenTree(unix.AT_FDCWD, outside, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		t.Skipf("open_tree: %v", err)
	}
	defer unix.Close(tree)
	n := &notifier{roots: []string{root}}
	for _, tt := range []struct {
		dir  int
		want bool
	}{{tree, false}, {unix.AT_FDCWD, true}} {
		path := filepath.Join(root, "victim")
		if tt.dir == tree {
			path = path[1:] // relative to the detached mount's root
		}
		obj, err := unix.Openat(tt.dir, path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := n.allowed(obj, false); got != tt.want {
			name, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(obj))
			t.Errorf("allowed(%s, named %q) = %v; want %v", path, name, got, tt.want)
		}
		unix.Close(obj)
	}
}

// BenchmarkNotifier measures what serving a tree that routes no call
// costs the host: a listener (a pipe's read end, which hangs up as a
// listener does once no task uses its filter) "served" by a notifier of
// its own from the start, or "watched" by a Manager's watch until a call
// comes (none does), until it hangs up, against "closed" at once (what a
// start without the service would do), the three alternating block by
// block. As in a stream of starts, four trees live at once: each new
// one hangs up the oldest (its pipe's write end closed). Reported as "cpu-ns-<way>", this process's CPU per tree (medians
// over blocks of 100), and "cpu-ns-extra-<way>", the difference to
// "closed"; ns/op is a block.
func BenchmarkNotifier(b *testing.B) {
	const block, alive = 100, 4
	var w listeners
	defer w.close()
	member := func(int, int) bool { return false }
	ways := []string{"served", "watched", "closed"}
	cpu := map[string][]float64{}
	op := 0
	for b.Loop() {
		way := ways[op%len(ways)]
		op++
		t0 := selfCPU(b)
		var live []*notifier
		var writers []int
		for i := range block + alive {
			if i < block {
				var p [2]int
				if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
					b.Fatal(err)
				}
				if way == "closed" {
					unix.Close(p[0])
					unix.Close(p[1])
					continue
				}
				watch := &w
				if way == "served" {
					watch = nil
				}
				n, err := newNotifier(p[0], nil, member, watch)
				if err != nil {
					b.Fatal(err)
				}
				live, writers = append(live, n), append(writers, p[1])
			}
			if len(live) > alive || i >= block && len(live) > 0 {
				unix.Close(writers[0])
				<-live[0].done
				live, writers = live[1:], writers[1:]
			}
		}
		cpu[way] = append(cpu[way], float64(selfCPU(b)-t0)/block)
	}
	for _, way := range ways {
		if len(cpu[way]) == 0 {
			return
		}
		b.ReportMetric(median(cpu[way]), "cpu-ns-"+way)
		if way != "closed" && len(cpu["closed"]) > 0 {
			b.ReportMetric(median(cpu[way])-median(cpu["closed"]), "cpu-ns-extra-"+way)
		}
	}
}
