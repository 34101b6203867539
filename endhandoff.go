package proc

import (
	"sync/atomic"
	"time"
)

// Who ends a record with one output pipe (design section 2, I3): the
// record's pump at the end of its pipe, or the Manager's exit watch at
// the child's exit (treeexit_linux.go), whichever claims the end first
// (endHandoff). Process.begin decides whether a record hands its end over
// (handsOver); afterExit, in lifecycle.go, is what the owner then runs.

// handsOver reports whether p's end is handed over (begin): one output
// pipe, no terminal, and an exit watch on this OS.
func (p *Process) handsOver() bool {
	return len(p.pumps) == 1 && p.tty == nil && exitWatchable
}

// endHandoff is how the end of a record with one output pipe is taken
// (begin): by its pump at the end of the pipe, or by an exit goroutine the
// exit watch makes at the child's exit, whichever claims owner first. The
// other then stays out of it: a pump that lost only reports its end on
// pumpDone, as every pump does, for the drain; a watch that lost closes
// exited, which the pump may be waiting for. Exactly one goroutine runs
// afterExit (I3). The zero value is a record not handed over.
type endHandoff struct {
	owner   atomic.Int32
	watched bool // pidfd is in the exit watch's set (exitWatch)
	// pidfd is the child's pidfd: from its fork (askPidfd) until the exit
	// watch takes it (watch), then the set's while watched; -1 where the
	// set holds os.Process's only (osKeepsPidfd).
	pidfd int
	token uint64 // its key in the set
	// pipefd is the pump's read end when the pump has no tee (else -1),
	// for pipeEnded; closed only by the end's owner.
	pipefd int
	exited chan struct{} // closed by the watch at the exit when the pump owns the end
}

// The owners of a handed-over end.
const (
	endOpen int32 = iota // neither came yet
	endByPump
	endByExit
)

// pumpThenEnd runs pu, the record's one pump, and then takes the end if
// the exit watch has not: it waits for the child's exit (at once when the
// child exited with its pipe) and ends the record as the exit goroutine
// would. A child that closed its output and runs on is waited for here.
//
// The child is put in the exit watch's set here, on the pump's goroutine,
// rather than on the caller's, as the exit goroutine made its pidfd. Where
// it cannot be, the record gets its exit goroutine after all.
func (p *Process) pumpThenEnd(pu *pump) {
	if !p.m.trees.exits.watch(p, pu) {
		// Stopped when the child exits and the bounded drain ends;
		// counted in m.exits since the record was registered.
		go p.supervise()
		pu.run()
		return
	}
	pu.run()
	if !p.end.owner.CompareAndSwap(endOpen, endByPump) && p.end.owner.Load() != endByPump {
		return // an exit goroutine owns the end; it has pumpDone
	}
	if !exitsAfterEOF(p.info.PID, p.end.pidfd) {
		<-p.end.exited
	}
	p.afterExit()
}

// exitsAfterEOF reports whether the child of pidfd has exited, or exits
// within exitAfterEOF. The kernel closes a dying child's descriptors
// before its exit can be waited for, so the pipe's end usually comes a
// moment before the exit: the pump waits that moment in the kernel, which
// wakes its thread directly (as exec.Cmd's Wait is woken), rather than
// through the exit watch and the runtime's poller. A thread blocked so
// long loses its P, and the runtime may make a thread for the others: at
// most maxExitWaits pumps wait so at once (a Close that ends 1,000
// children makes their pumps end together), the others through the
// watch. A child that closed its output and runs on costs the moment
// once.
//
// pidfd is the child's pidfd, or -1 where the exit watch's set holds only
// os.Process's (osKeepsPidfd): one is opened for the wait.
func exitsAfterEOF(pid, pidfd int) bool {
	if exitedNow(pid) {
		return true
	}
	defer exitWaits.Add(-1)
	if exitWaits.Add(1) > maxExitWaits {
		return false
	}
	return exitsWithin(pid, pidfd, exitAfterEOF)
}

// exitWaits counts the pumps in exitsAfterEOF's wait.
var exitWaits atomic.Int32

const (
	// exitAfterEOF bounds exitsAfterEOF's wait.
	exitAfterEOF = 2 * time.Millisecond
	// maxExitWaits bounds how many pumps wait in it at once.
	maxExitWaits = 2
)

// exitWatched is called by the exit watch once the child of a handed-over
// record exited: it makes the exit goroutine, unless the pump took the end
// first, which it then wakes.
func (p *Process) exitWatched() {
	// A pipe at its end with no tee to write: the pump's next read is its
	// EOF, and the record is final as soon (within the followers' bounded
	// settle, settleFollowers) as an exit goroutine's drain would make it.
	// The end is left to the pump, which the scheduler may be running
	// on another P right now: no goroutine is made.
	if p.end.owner.Load() == endOpen && p.end.pipeEnded() && p.end.owner.CompareAndSwap(endOpen, endByPump) {
		close(p.end.exited)
		return
	}
	if p.end.owner.CompareAndSwap(endOpen, endByExit) {
		// Stopped when the bounded drain ends; counted in m.exits since
		// the record was registered (launchRegistered).
		go p.afterExit()
		return
	}
	close(p.end.exited)
}
