//go:build linux

package bench

import (
	"testing"

	"github.com/procvisor/proc"
	"github.com/procvisor/proc/proctest"
)

// BenchmarkFollowFloor is the floor of BenchmarkFollowCost's followers
// that read every byte: the CPU a follower must spend, with no hand-off
// at all. It captures 64 MiB of zeros (zerosArgs) alone, and while one
// or two goroutines each copy 64 MiB in 64 KiB pieces out of a 1 MiB
// ring (as a follower copies out of the follow window) without touching
// the record, interleaved in one run. x-copy1 is the floor of
// BenchmarkFollowCost's x-64KiB, x-copy2 of the 64 KiB and 256 KiB pair
// in its x-mixed: on two CPUs that the capture alone keeps busy, a
// follower's copy takes time from the child however it is handed over.
func BenchmarkFollowFloor(b *testing.B) {
	m := proctest.NewManager(b, proc.Options{})
	src := make([]byte, followWindowBytes)
	capture := func(name string, copiers int) variant {
		dsts := make([][]byte, copiers)
		for i := range dsts {
			dsts[i] = make([]byte, 64<<10)
		}
		return variant{name, func(stat string) {
			var req proc.StartRequest
			req.Args, req.Env = zerosArgs(followCostBytes, stat)
			p, err := m.Start(req)
			if err != nil {
				b.Fatalf("Start(%q) = %v; want nil", req.Args, err)
			}
			done := make(chan struct{}, copiers)
			for _, dst := range dsts {
				// Ends after its 64 MiB; joined below.
				go func() {
					for off := 0; off < followCostBytes; off += len(dst) {
						copy(dst, src[off%len(src):])
					}
					done <- struct{}{}
				}()
			}
			for range copiers {
				<-done
			}
			<-p.Done()
			checkFinal(b, p, followCostBytes)
		}}
	}
	interleaved(b, []variant{capture("alone", 0), capture("copy1", 1), capture("copy2", 2)})
}

// followWindowBytes is the follow window's size (proc.DefaultFollowWindow),
// the ring BenchmarkFollowFloor's copiers read.
const followWindowBytes = 1 << 20
