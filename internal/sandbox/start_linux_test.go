//go:build linux

package sandbox

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkRestrict measures, in this thread's CPU time, the steps of a
// sandboxed start that make and enforce its restrictions (the zero
// policy, no terminal), each op on a new thread that ends with it, as a
// start's does. The variants of a step alternate from op to op:
// "kept-write" (writeLayer: a look at /, /dev and the mounts, and a copy
// of the kept write layer) against
// "fresh-write" (newRuleset); "write-first" (enforcing the write layer,
// then the read layer, as start does) against "read-first". The other
// steps: "read" (the kept read layer), "nnp" (no-new-privileges), "caps"
// (dropCapabilities: on a root host, one prctl per capability of the
// bounding set), "filter" (installing the seccomp filter). Reported as
// "cpu-ns-<step>", medians; ns/op is an op.
func BenchmarkRestrict(b *testing.B) {
	sup := support(b)
	sup.Reads = &ReadRules{}
	defer sup.Reads.Close()
	prog, err := filter(Policy{})
	if err != nil {
		b.Fatal(err)
	}
	steps := map[string][]float64{}
	var mu sync.Mutex
	note := func(step string, d int64) {
		mu.Lock()
		steps[step] = append(steps[step], float64(d))
		mu.Unlock()
	}
	op := 0
	for b.Loop() {
		op++
		alt := op%2 == 0
		done := make(chan error, 1)
		onOwnThread(func() {
			done <- func() error {
				t0 := threadCPU()
				read, err := readLayer(Policy{}, sup.Reads)
				if err != nil {
					return err
				}
				defer unix.Close(read)
				t1 := threadCPU()
				var write int
				if alt {
					write, _, err = newRuleset(Policy{}, sup.ABI)
				} else {
					write, err = writeLayer(Policy{}, sup.ABI, sup.Reads)
				}
				if err != nil {
					return err
				}
				defer unix.Close(write)
				t2 := threadCPU()
				if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
					return err
				}
				t3 := threadCPU()
				if err := dropCapabilities(); err != nil {
					return err
				}
				t4 := threadCPU()
				listener, err := installFilter(prog)
				if err != nil {
					return err
				}
				unix.Close(listener)
				t5 := threadCPU()
				layers, order := []int{write, read}, "write-first"
				if alt {
					layers, order = []int{read, write}, "read-first"
				}
				for _, l := range layers {
					if err := restrictSelf(l); err != nil {
						return err
					}
				}
				t6 := threadCPU()
				writeStep := "kept-write"
				if alt {
					writeStep = "fresh-write"
				}
				note("read", t1-t0)
				note(writeStep, t2-t1)
				note("nnp", t3-t2)
				note("caps", t4-t3)
				note("filter", t5-t4)
				note(order, t6-t5)
				return nil
			}()
		})
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	for step, ds := range steps {
		b.ReportMetric(median(ds), "cpu-ns-"+step)
	}
}

// BenchmarkLayers measures, in the calling thread's CPU time, how a
// start gets its two Landlock layers (the zero policy, kept layers) and
// lets them go once enforced, alternating op by op: "lent" (layers, then
// release: the kept layers lent, one hold of the lock each way) against
// "copies" (the same, and a copy of each kept layer for the start,
// closed by it, as a start did before the layers were lent; it also pays
// the give-back's lock round). Reported as "cpu-ns-<way>", medians;
// ns/op is an op.
func BenchmarkLayers(b *testing.B) {
	sup := support(b)
	sup.Reads = &ReadRules{}
	defer sup.Reads.Close()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p := Policy{}
	ways := map[string][]float64{}
	op := 0
	for b.Loop() {
		op++
		way := "lent"
		t0 := threadCPU()
		lay, err := layers(p, sup.ABI, sup.Reads)
		if err != nil {
			b.Fatal(err)
		}
		if op%2 == 0 {
			lay.release()
		} else {
			way = "copies"
			read, err1 := unix.FcntlInt(uintptr(lay.read), unix.F_DUPFD_CLOEXEC, 0)
			write, err2 := unix.FcntlInt(uintptr(lay.write), unix.F_DUPFD_CLOEXEC, 0)
			lay.release()
			if err1 != nil || err2 != nil {
				b.Fatal(err1, err2)
			}
			unix.Close(read)
			unix.Close(write)
		}
		ways[way] = append(ways[way], float64(threadCPU()-t0))
	}
	for way, ds := range ways {
		b.ReportMetric(median(ds), "cpu-ns-"+way)
	}
}

// threadCPU is the calling thread's CPU time, in nanoseconds.
func threadCPU() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return ts.Nano()
}

// TestNoCapabilities: a sandboxed child has no capability in any set, and
// on a root host (which empties the bounding set) none it could gain at
// an exec either.
func TestNoCapabilities(t *testing.T) {
	t.Parallel()
	support(t)
	res := run(testCtx(t), t, exec.Command("grep", "^Cap", "/proc/self/status"), Policy{}, true)
	if !res.state.Success() {
		t.Fatalf("grep ^Cap /proc/self/status: %v %q", res.state, res.out)
	}
	sets := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(res.out), "\n") {
		k, v, _ := strings.Cut(l, ":")
		sets[k] = strings.TrimSpace(v)
	}
	want := []string{"CapInh", "CapPrm", "CapEff", "CapAmb"}
	if os.Geteuid() == 0 {
		want = append(want, "CapBnd")
	}
	for _, k := range want {
		if v, ok := sets[k]; !ok || strings.Trim(v, "0") != "" {
			t.Errorf("the sandboxed child's %s is %q; want none (all: %q)", k, v, res.out)
		}
	}
}
