//go:build unix && (!linux || proc_otherunix)

package proc

import (
	"os"
	"syscall"
	"time"
)

// waitExited: without pidfds, cmd.Wait does all the waiting.
func waitExited(int) {}

// childState is what a look at a child not yet reaped found (lookChild).
type childState int

const (
	childRunning childState = iota
	childStopped
	childExited // a zombie, or reaped already
)

// exitsSoon reports whether the child pid has exited, or is reaped within
// exitSoonWait: a program often closes its stdin on its way out, and a
// write in that moment meets EPIPE. Without pidfds the exit goroutine's
// reap (reaped closes) is the event waited on; cmd.Wait takes the exit as
// soon as the kernel reports it. A child that closed its stdin and lives on
// is told apart only by outliving the wait, a safety bound on an OS event,
// not a policy timer.
func exitsSoon(pid int, reaped <-chan struct{}) bool {
	if st, ok := lookChild(pid); ok && st == childExited {
		return true
	}
	t := time.NewTimer(exitSoonWait)
	defer t.Stop()
	select {
	case <-reaped:
		return true
	case <-t.C:
		return false
	}
}

// haltChild stops the child pid (SIGSTOP) and looks, without reaping it,
// until it is stopped or has exited; it reports whether it exited. A
// stopped process cannot begin to exit on its own, so a child found
// stopped was alive at its deadline, and one found exited (a zombie, or
// reaped) beat it by itself (design section 6). Where the OS gives no look
// (lookChild's ok is false) the child is not stopped and counts as alive.
//
// A SIGCONT from elsewhere discards a pending stop, so the stop is sent
// again at every look, and the wait is bounded by haltWait: a child that
// cannot be held still counts as alive. The looks are a bounded safety net
// on an OS state, not a policy timer, so they do not use the Manager's
// clock.
func haltChild(pid int) (exited bool) {
	if !canLookChild {
		return false
	}
	pause := 20 * time.Microsecond
	for waited := time.Duration(0); waited < haltWait; waited += pause {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return true // reaped already: our unreaped child always exists
		}
		// A failed look is retried: the child may have been reaped in
		// between, which the next kill tells.
		switch st, ok := lookChild(pid); {
		case ok && st == childStopped:
			return false
		case ok && st == childExited:
			return true
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Millisecond)
	}
	return false
}

// haltWait bounds haltChild.
const haltWait = 100 * time.Millisecond

// resumeHalted continues the child pid that haltChild stopped.
func resumeHalted(pid int) {
	if canLookChild {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
}

// openPidfd: no pidfds here.
func openPidfd(int) *os.File { return nil }

// pidfdExited is not reached where openPidfd returns nil.
func pidfdExited(*os.File) bool { return false }

// rawPipe returns a pipe, both ends close-on-exec, the parent's end
// non-blocking and the child's blocking (newPipe).
func rawPipe(parentReads bool) (parent, child int, err error) {
	var p [2]int
	// As os.Pipe does where there is no pipe2: hold ForkLock so that no
	// child is started between pipe and close-on-exec.
	syscall.ForkLock.RLock()
	err = syscall.Pipe(p[:])
	if err == nil {
		syscall.CloseOnExec(p[0])
		syscall.CloseOnExec(p[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return -1, -1, err
	}
	parent, child = p[0], p[1]
	if !parentReads {
		parent, child = p[1], p[0]
	}
	if err := syscall.SetNonblock(parent, true); err != nil {
		_ = syscall.Close(parent)
		_ = syscall.Close(child)
		return -1, -1, err
	}
	return parent, child, nil
}
