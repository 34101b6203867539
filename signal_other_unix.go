//go:build unix && (!linux || proc_otherunix)

package proc

import (
	"os"
	"syscall"
)

// waitExited: without pidfds, cmd.Wait does all the waiting.
func waitExited(int) {}

// exitsSoon cannot tell here without reaping; the exit goroutine decides.
func exitsSoon(int) bool { return false }

// haltChild cannot stop and look without reaping here: the child counts as
// alive, and the exit goroutine's ordering decides (a child that exits in
// the instant of its deadline may be reported as timed out).
func haltChild(int) bool { return false }

func resumeHalted(int) {}

// termPending cannot be read here.
func termPending(int) bool { return false }

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
