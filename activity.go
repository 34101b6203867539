package proc

import (
	"context"
	"time"

	"golang.org/x/xerrors"
)

// Activity (design section 15): what a running process tree is doing, as
// the kernel sees it. Is a member blocked reading the stdin pipe or the
// terminal proc gave the record (a prompt)? Which ports do its members
// listen on? The portable API is here; activity_linux.go decides what to
// look for, internal/procfs reads /proc, and every other OS answers
// ErrUnsupported.

// Activity is what a process tree was doing at one moment; see
// [Process.Activity].
type Activity struct {
	// Members counts the live processes of the tree, as the tree's owner
	// lists them: the record's cgroup, or its session's process group.
	Members int `json:"members"`
	// WaitingForInput is true when a member was blocked reading the stdin
	// pipe or the terminal that proc gave the record (StartRequest.Stdin or
	// TTY): a read of it, or a poll, select or epoll wait that includes
	// it. It is always false for a record started with neither.
	WaitingForInput bool `json:"waiting_for_input"`
	// Listeners are the listening TCP sockets and the bound, unconnected
	// UDP sockets of the members, IPv4 and IPv6, sorted by port, then
	// network, then address. A socket that several members hold is listed
	// once, with the lowest PID.
	Listeners []Listener `json:"listeners,omitempty"`
}

// Listener is a socket a member of a tree listens on.
type Listener struct {
	// Network is "tcp", "tcp6", "udp" or "udp6": the socket's family and
	// protocol. An IPv6 socket bound to an IPv4-mapped address is "tcp6".
	Network string `json:"network"`
	// Address is the local address as host:port, such as
	// "127.0.0.1:8080", "0.0.0.0:53" or "[::]:3000".
	Address string `json:"address"`
	Port    int    `json:"port"`
	// PID is the member that holds the socket.
	PID int `json:"pid"`
}

// inputPoll is how often WaitInput (and WatchActivity's poller) looks.
// A poller's look is sparse (procfs.Tracker.Begin): it checks a member
// that did not change at every second look, and one that waits to read or
// holds a socket at every look, so that polling an idle tree costs half
// as much; a tree that starts to wait is noticed within two periods and a
// look, inside the 250 ms the design promises.
const inputPoll = 100 * time.Millisecond

// Activity reports what the process tree is doing now, read from the OS at
// the call: how many members it has, whether one of them is blocked waiting
// for input on the stdin pipe or terminal the record was given, and the
// sockets its members listen on. It is safe for concurrent use and starts
// no goroutine; a ten-member tree costs about a millisecond or less.
//
// Looks at a record (Activity, WaitInput, WatchActivity's) share what they
// read: a member whose threads were not switched onto a CPU since it was
// last read is not read again, for it cannot have changed. Telling costs
// one read of a descriptor held open for each of its threads, a few
// microseconds, so a look at an idle 500-member tree costs about a
// millisecond. The descriptors are released when the record is final;
// there are at most 1,024 a record, and a quarter of RLIMIT_NOFILE for
// all, beyond which members are read whole at each look, as is a member
// that runs. A socket a member shares with a process outside the tree is
// seen to begin listening once a member that holds it runs.
//
// Once the record is final it returns an error wrapping ErrNotRunning.
// Between the child's exit and the final record the tree may still have
// members (a background child), and they are reported.
//
// Activity works on Linux only, and elsewhere returns an error wrapping
// ErrUnsupported. It reads /proc: the blocked system call of each thread
// (/proc/PID/syscall), the descriptors it waits on (their /proc/PID/fd
// links, epoll's /proc/PID/fdinfo, and poll and select sets read from the
// waiting process's memory), and /proc/PID/net for sockets. The host needs
// the right to trace a member (the same user, or root): a member it may
// not trace, such as a setuid program run by another user, is counted
// but never seen waiting, nor its sockets listed. Output is never looked
// at. A member that reads in another way (io_uring, a 32-bit program on a
// 64-bit kernel, on architectures other than amd64 and arm64 the older
// poll, select and epoll_wait calls) is not seen waiting.
func (p *Process) Activity() (Activity, error) {
	return p.lookAt("activity", true, false)
}

// WaitInput blocks until a member of the tree waits for input, as
// [Process.Activity] tells it (nil); until the record becomes final (an
// error wrapping ErrNotRunning); or until ctx ends (an error wrapping
// ctx.Err()). It looks at once, then every 100 ms on Options.Clock (a
// ticker tagged "activity", "poll"), so a tree that starts to wait is
// noticed within 250 ms. It starts no goroutine, and is safe for
// concurrent use. Without Stdin or TTY nothing can be waited for, and it
// returns only at the final record or with ctx. Linux only; elsewhere it
// returns an error wrapping ErrUnsupported at once.
func (p *Process) WaitInput(ctx context.Context) error {
	const op = "wait input"
	a, err := p.lookAt(op, false, false)
	if err != nil || a.WaitingForInput {
		return err
	}
	ticker := p.m.clock.NewTicker(inputPoll, "activity", "poll")
	defer ticker.Stop("activity", "poll")
	for {
		select {
		case <-p.done:
			return xerrors.Errorf("%s of %q: %w", op, p.info.ID, ErrNotRunning)
		case <-ctx.Done():
			return xerrors.Errorf("%s of %q: %w", op, p.info.ID, ctx.Err())
		case <-ticker.C:
		}
		a, err := p.look(op, false)
		if err != nil || a.WaitingForInput {
			return err
		}
	}
}

// look is a poller's look at the tree (WaitInput's at its ticks,
// WatchActivity's): sparse, so that what it reports was true at its look
// before or since, which is within the 250 ms pollers promise.
func (p *Process) look(op string, listeners bool) (Activity, error) {
	return p.lookAt(op, listeners, true)
}

// lookAt reads the tree's activity; the listeners only if listeners is
// set; sparsely if sparse is set (see procfs.Tracker.Begin). Looks at one
// record share what they read (activityLooks), one at a time.
func (p *Process) lookAt(op string, listeners, sparse bool) (Activity, error) {
	if !activitySupported {
		return Activity{}, xerrors.Errorf("%s of %q: Linux only: %w", op, p.info.ID, ErrUnsupported)
	}
	if p.isFinal() {
		return Activity{}, xerrors.Errorf("%s of %q: %w", op, p.info.ID, ErrNotRunning)
	}
	var input inputID
	if p.input != nil {
		input = *p.input
	}
	a, listed := p.looksOf().look(p.tree(), input, listeners, sparse)
	if !listed {
		return Activity{}, xerrors.Errorf("%s of %q: the tree's members cannot be listed here: %w", op, p.info.ID, ErrUnsupported)
	}
	if a.WaitingForInput && input.pipeIno != 0 && inputPending(p.in.w) {
		// A reader blocked a moment ago has bytes to read: it is about to
		// return, not waiting for an answer.
		a.WaitingForInput = false
	}
	// What was read may belong to a record that became final meanwhile.
	if p.isFinal() {
		p.dropLooks()
		return Activity{}, xerrors.Errorf("%s of %q: %w", op, p.info.ID, ErrNotRunning)
	}
	return a, nil
}

// looksOf returns what the looks at p's tree keep, made at the first. A
// look that began before the record became final may make it after
// finish dropped it: it drops it again itself (lookAt sees the record
// final at its end).
func (p *Process) looksOf() *activityLooks {
	if l := p.looks.Load(); l != nil {
		return l
	}
	l := &activityLooks{}
	if p.looks.CompareAndSwap(nil, l) {
		return l
	}
	if cur := p.looks.Load(); cur != nil {
		return cur
	}
	l.close() // dropped meanwhile: this look keeps nothing
	return l
}

// dropLooks closes what the looks at p's tree keep (descriptors held
// open), once the record is final: finish calls it once done is closed,
// and so does a look that began before. A look under way closes it when
// it ends.
func (p *Process) dropLooks() {
	if l := p.looks.Swap(nil); l != nil {
		l.close()
	}
}
