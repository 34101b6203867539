//go:build linux && !proc_otherunix

package proc_test

import (
	"testing"

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
