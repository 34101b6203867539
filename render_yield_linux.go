//go:build linux && !proc_otherunix

package proc

import "golang.org/x/sys/unix"

// yieldThread offers the caller's CPU to another thread waiting for it
// (sched_yield): a tight poller's thread then steps aside for the child
// or the pump's thread when they want its CPU, and returns at once when
// nobody does.
func yieldThread() { _, _, _ = unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
