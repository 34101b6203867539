package procfs

import (
	"bytes"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// A Tracker looks at a set of processes again and again, and reads again
// only the processes that ran since it last read them. What the kernel
// shows of a process (the system call each thread is blocked in and what
// it waits on, its descriptors, its state, its network namespace)
// changes only while one of its threads runs, and each switch of a
// thread onto a CPU adds one to a counter the kernel keeps for it
// (/proc/PID/task/TID/schedstat: the time it ran, the time it waited to
// run, and that count). So a read holds each thread's schedstat file
// open, and the next look reads those first: if none moved, no thread
// was switched in since, and the read still stands.
//
// A read stands only if it was made while every thread was off its CPU:
// the kernel shows a thread's system call only when it is (its syscall
// file reads "running" otherwise), and the counters were taken before.
// A thread that was on its CPU when they were taken moves them when it
// leaves (its run time grows), so it is read again at the next look. A
// process can gain a thread only by running one it has, so the read also
// stands for the threads it lists. A held file stays with the thread it
// was opened on: once that is gone, the file reads nothing, however soon
// its PID names another process, which is read afresh.
//
// What is read of a process again at each look is then one read of a
// held file for each of its threads, a few microseconds, against some
// 80 for a whole read of a process with stdin looked at and its
// descriptors listed. A process that runs, one the caller may not trace
// (its syscall file is closed to it), one in the kernel's zombie state,
// one on a kernel without these counters, and threads beyond the files a
// Tracker may hold (maxHeld, heldRoom) are read whole at every look, as
// without a Tracker.
//
// The socket tables are read again only when a process that holds a
// socket was read again, or one with sockets left the set: a socket
// listens or binds only when a process that holds it asks, and a
// process that asks runs. A process outside the set that shares a socket
// with one in it is not seen changing that socket until one in the set
// runs.
//
// The zero value is ready to use; Close lets go of what it holds. It is
// used by one goroutine at a time.
type Tracker struct {
	sys    trackSys // nil: the kernel's (*kernelSys)
	procs  map[int]*tracked
	files  Files // what the reads looked for
	look   uint64
	sparse bool // the look is sparse (Begin)
	held   int  // threads held, at most maxHeld

	// The listeners the socket tables gave at the last look that read
	// them, and whether they still stand.
	socks      []Socket
	socksValid bool
}

// maxHeld bounds the schedstat files a Tracker holds open: a set of more
// threads than that is read whole, beyond them, at every look.
const maxHeld = 1024

// heldRoom is how many more schedstat files all Trackers together may
// hold open: a quarter of the descriptors the process may open
// (RLIMIT_NOFILE, as the Go runtime raised it) at first, so that looks at
// many wide trees never take the descriptors a host needs to start
// processes. Beyond it, threads are read whole at every look.
var heldRoom = sync.OnceValue(func() *atomic.Int64 {
	room := new(atomic.Int64)
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil {
		room.Store(int64(min(lim.Cur, 1<<30) / 4))
	}
	return room
})

// tracked is what a Tracker knows of one process.
type tracked struct {
	r       procRead
	checked uint64 // the look that last found its counters unmoved
	seen    uint64 // the last look whose set held it
}

// procRead is what one whole read of a process found.
type procRead struct {
	state byte // its state (Stat.State); 0 for a process that was gone
	// threads are its threads' held counters when the read stands until
	// they move (stable); nil otherwise.
	threads []heldThread
	stable  bool
	waits   bool // a thread waits to read one of the files asked about

	socksRead bool     // inos and netns were read
	inos      []uint64 // the sockets it holds
	netns     string   // its network namespace, if it holds a socket
}

// heldThread is a thread's schedstat file, held open, and what it read.
type heldThread struct {
	fd  int
	n   uint8
	run [64]byte
}

// trackSys is what a Tracker reads: the kernel's /proc (kernelSys), or a
// test's stand-in.
type trackSys interface {
	// read reads process pid whole: whether it waits to read one of
	// files, its sockets if listeners is set, and, if it may hold that
	// many more, its threads' counters, taken first.
	read(pid int, files Files, listeners bool, room int) procRead
	// sockets reads the sockets process pid holds, and its network
	// namespace if it holds any.
	sockets(pid int) ([]uint64, string)
	// tables returns the listeners among the sockets h holds, appended to
	// ls.
	tables(h holders, ls []Socket) []Socket
	// unmoved reports whether a held thread's counters read what they
	// read when it was taken (false once the thread is gone).
	unmoved(th *heldThread) bool
	// release closes a held thread's file.
	release(th *heldThread)
}

// Begin starts a look: every process is checked again, once, by the
// first [Tracker.Known], [Tracker.AllKnown] or [Tracker.Look] that asks
// for it. In a sparse look, a process whose read stands and was checked
// at the look before is not checked, unless it waits to read or holds a
// socket: each is checked at least every second look, and what a sparse
// look reports was true at the look before or since. Pollers use it; a
// look asked for by a caller, which reads the OS at the call, does not.
func (t *Tracker) Begin(sparse bool) {
	t.look++
	t.sparse = sparse
}

// Known reports the state (Stat.State) of process pid as the last read
// of it found it, if that read still stands (ok); the check is made once
// a look and Look uses it. Call it after Begin.
func (t *Tracker) Known(pid int) (state byte, ok bool) {
	if e := t.check(pid); e != nil {
		return e.r.state, true
	}
	return 0, false
}

// AllKnown reports whether the last reads of the processes pids all
// still stand (see [Tracker.Known]).
func (t *Tracker) AllKnown(pids []int) bool {
	for _, pid := range pids {
		if t.check(pid) == nil {
			return false
		}
	}
	return true
}

// Look is one look at the processes pids, after Begin: whether one of
// them waits to read one of files (see [Scanner.WaitsToRead]), and, if
// listeners is set, the sockets they listen on (see [Scanner.Listeners]);
// the slice is valid until the next Look. A process whose last read still
// stands is not read again; what the Tracker knows of processes not in
// pids is forgotten.
func (t *Tracker) Look(pids []int, files Files, listeners bool) (waiting bool, socks []Socket) {
	if t.procs == nil {
		t.procs = make(map[int]*tracked, len(pids))
	}
	if files != t.files {
		t.forget()
		t.files = files
	}
	sys := t.kernel()
	for _, pid := range pids {
		e := t.check(pid)
		switch {
		case e == nil:
			e = &tracked{r: sys.read(pid, files, listeners, maxHeld-t.held), checked: t.look}
			t.held += len(e.r.threads)
			t.procs[pid] = e
			if len(e.r.inos) > 0 {
				t.socksValid = false
			}
		case listeners && !e.r.socksRead:
			e.r.inos, e.r.netns = sys.sockets(pid)
			e.r.socksRead = true
			if len(e.r.inos) > 0 {
				t.socksValid = false
			}
		}
		e.seen = t.look
		waiting = waiting || e.r.waits
	}
	for pid, e := range t.procs {
		if e.seen != t.look {
			t.drop(pid, e)
		}
	}
	if listeners && !t.socksValid {
		var h holders
		for _, pid := range pids {
			if e := t.procs[pid]; e != nil {
				h.add(pid, e.r.inos, e.r.netns)
			}
		}
		t.socks = sys.tables(h, t.socks[:0])
		t.socksValid = true
	}
	if !listeners {
		return waiting, nil
	}
	return waiting, t.socks
}

// Close forgets every process and closes the files held. The Tracker
// can be used again.
func (t *Tracker) Close() {
	t.forget()
	t.files = Files{}
}

// forget forgets every process.
func (t *Tracker) forget() {
	for pid, e := range t.procs {
		t.drop(pid, e)
	}
	t.socks, t.socksValid = nil, false
}

// check returns what is known of process pid if its last read still
// stands, checked once a look (or, in a sparse look, not checked if it
// was at the look before; see Begin); otherwise it forgets the process
// and returns nil.
func (t *Tracker) check(pid int) *tracked {
	e := t.procs[pid]
	if e == nil || e.checked == t.look {
		return e
	}
	if t.sparse && e.r.stable && e.checked+1 == t.look && !e.r.waits && len(e.r.inos) == 0 {
		return e // checked at the look before, and at the next
	}
	ok := e.r.stable
	for i := 0; ok && i < len(e.r.threads); i++ {
		ok = t.kernel().unmoved(&e.r.threads[i])
	}
	if !ok {
		t.drop(pid, e)
		return nil
	}
	e.checked = t.look
	return e
}

// drop forgets process pid.
func (t *Tracker) drop(pid int, e *tracked) {
	if len(e.r.inos) > 0 {
		t.socksValid = false
	}
	sys := t.kernel()
	for i := range e.r.threads {
		sys.release(&e.r.threads[i])
	}
	t.held -= len(e.r.threads)
	delete(t.procs, pid)
}

func (t *Tracker) kernel() trackSys {
	if t.sys == nil {
		t.sys = &kernelSys{}
	}
	return t.sys
}

// kernelSys reads /proc for a Tracker.
type kernelSys struct {
	s Scanner
}

// read reads process pid whole, in an order that lets the read stand: the
// main thread's counters first, then its stat line (the number of
// threads), the other threads' counters, each thread's system call, which
// shows the thread off its CPU, and then its descriptors. A process of
// several threads is counted again at the end: a thread that another
// started after the list was read would not be held.
func (k *kernelSys) read(pid int, files Files, listeners bool, room int) (r procRead) {
	s := &k.s
	tid := strconv.Itoa(pid)
	var threads []heldThread
	stable := room > 0
	if stable {
		th, ok := k.hold(tid, tid)
		if stable = ok; ok {
			threads = append(threads, th)
		}
	}
	st, ok := s.begin(pid, files)
	switch {
	case !ok:
		k.releaseAll(threads)
		return procRead{}
	case st.State == 'Z' || st.State == 'X':
		// Not waiting (WaitsToRead); listed as Listeners lists it.
		k.releaseAll(threads)
		r = procRead{state: st.State}
		if listeners {
			r.inos, r.netns = s.sockets(pid, nil)
			r.socksRead = true
		}
		return r
	}
	r.state = st.State
	dir := "/proc/" + tid
	if st.Threads <= 1 {
		if stable || !files.None() {
			waits, blocked := s.threadCall(dir)
			r.waits, stable = waits, stable && blocked
		}
	} else {
		tasks, err := readDirNames(dir + "/task")
		if err != nil {
			stable = false
		}
		for _, task := range tasks {
			if stable && task != tid {
				if len(threads) >= room {
					stable = false
				} else {
					th, ok := k.hold(tid, task)
					if stable = ok; ok {
						threads = append(threads, th)
					}
				}
			}
			if !stable && (r.waits || files.None()) {
				continue // nothing more to learn (WaitsToRead stops at the first)
			}
			waits, blocked := s.threadCall(dir + "/task/" + task)
			r.waits = r.waits || waits
			stable = stable && blocked
		}
	}
	if listeners {
		r.inos, r.netns = s.sockets(pid, nil)
		r.socksRead = true
	}
	if stable && st.Threads > 1 {
		again, ok := s.begin(pid, files)
		stable = ok && again.Threads == len(threads) && again.State != 'Z' && again.State != 'X'
	}
	if !stable {
		k.releaseAll(threads)
		return r
	}
	r.threads, r.stable = threads, true
	return r
}

// hold opens thread tid of process pid's schedstat file and reads it.
// ok is false, and nothing is held, when it cannot be opened or read, or
// the kernel keeps no counters (it reads zeros: every thread has been
// switched in at least once).
func (k *kernelSys) hold(pid, tid string) (th heldThread, ok bool) {
	room := heldRoom()
	if room.Add(-1) < 0 {
		room.Add(1)
		return heldThread{fd: -1}, false
	}
	fd, err := unix.Open("/proc/"+pid+"/task/"+tid+"/schedstat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		room.Add(1)
		return heldThread{fd: -1}, false
	}
	th.fd = fd
	n, ok := readHeld(fd, th.run[:])
	if !ok || !counted(th.run[:n]) {
		unix.Close(fd)
		room.Add(1)
		return heldThread{fd: -1}, false
	}
	th.n = uint8(n)
	return th, true
}

// counted reports whether a schedstat line "RUN WAIT COUNT" counts the
// thread's switches: COUNT is not 0.
func counted(line []byte) bool {
	line = bytes.TrimRight(line, "\n")
	i := bytes.LastIndexByte(line, ' ')
	if i < 0 {
		return false
	}
	n, err := strconv.ParseUint(string(line[i+1:]), 10, 64)
	return err == nil && n > 0
}

// readHeld reads a held kernel file again from its start into b (a
// seq_file makes its text again for a read at offset 0). ok is false for
// an error, such as the process being gone, or a text that fills b.
func readHeld(fd int, b []byte) (int, bool) {
	for {
		n, err := unix.Pread(fd, b, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return n, err == nil && n > 0 && n < len(b)
	}
}

func (k *kernelSys) unmoved(th *heldThread) bool {
	var b [64]byte
	n, ok := readHeld(th.fd, b[:])
	return ok && bytes.Equal(b[:n], th.run[:th.n])
}

func (k *kernelSys) release(th *heldThread) {
	if th.fd >= 0 {
		unix.Close(th.fd)
		th.fd = -1
		heldRoom().Add(1)
	}
}

func (k *kernelSys) releaseAll(threads []heldThread) {
	for i := range threads {
		k.release(&threads[i])
	}
}

func (k *kernelSys) sockets(pid int) ([]uint64, string) {
	return k.s.sockets(pid, nil)
}

func (k *kernelSys) tables(h holders, ls []Socket) []Socket {
	return k.s.tables(h, ls)
}
