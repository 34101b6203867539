package procfs

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeProc is a process of a fakeSys.
type fakeProc struct {
	runs    int  // how often it ran: its counters
	state   byte // Stat.State
	waits   bool // a thread waits to read the files asked about
	stable  bool // a read of it can stand (off its CPU, traceable)
	threads int  // 0 counts as 1
	inos    []uint64
	netns   string
}

// fakeHandle is a thread a fakeSys holds: the process it was opened on,
// and its counters then.
type fakeHandle struct {
	p    *fakeProc
	runs int
}

// fakeSys is a kernel a test scripts: a process runs when the test adds
// to its runs, and a PID is reused when the test puts another *fakeProc
// under it. It counts what the Tracker reads.
type fakeSys struct {
	procs   map[int]*fakeProc
	handles map[int]fakeHandle // by fd
	nextFD  int

	reads, sockReads []int // the PIDs read whole, and for sockets alone
	tableReads       int
	unmovedCalls     int
}

func newFakeSys(procs map[int]*fakeProc) *fakeSys {
	return &fakeSys{procs: procs, handles: map[int]fakeHandle{}}
}

func (f *fakeSys) read(pid int, files Files, listeners bool, room int) procRead {
	f.reads = append(f.reads, pid)
	p := f.procs[pid]
	if p == nil {
		return procRead{}
	}
	r := procRead{state: p.state, waits: p.waits && !files.None() && p.state != 'Z'}
	if listeners {
		r.inos, r.netns, r.socksRead = slices.Clone(p.inos), p.netns, true
	}
	if n := max(p.threads, 1); p.stable && p.state != 'Z' && n <= room {
		for range n {
			f.nextFD++
			f.handles[f.nextFD] = fakeHandle{p: p, runs: p.runs}
			r.threads = append(r.threads, heldThread{fd: f.nextFD})
		}
		r.stable = true
	}
	return r
}

func (f *fakeSys) sockets(pid int) ([]uint64, string) {
	f.sockReads = append(f.sockReads, pid)
	if p := f.procs[pid]; p != nil {
		return slices.Clone(p.inos), p.netns
	}
	return nil, ""
}

// tables lists every socket held as a TCP listener on port INODE.
func (f *fakeSys) tables(h holders, ls []Socket) []Socket {
	f.tableReads++
	for ino, pid := range h.socks {
		ls = append(ls, Socket{Network: "tcp", Addr: netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(ino)), PID: pid})
	}
	return ls
}

func (f *fakeSys) unmoved(th *heldThread) bool {
	f.unmovedCalls++
	h, ok := f.handles[th.fd]
	if !ok {
		panic("unmoved on a released thread")
	}
	// The file is the process's it was opened on: gone once its PID
	// names another.
	for _, p := range f.procs {
		if p == h.p {
			return p.runs == h.runs
		}
	}
	return false
}

func (f *fakeSys) release(th *heldThread) {
	if _, ok := f.handles[th.fd]; !ok {
		panic("release twice")
	}
	delete(f.handles, th.fd)
}

// look is one look of tr at pids, reporting what was read whole in it.
func (f *fakeSys) look(tr *Tracker, pids []int, files Files, listeners bool) (waiting bool, socks []Socket, read []int) {
	f.reads = f.reads[:0]
	tr.Begin(false)
	waiting, socks = tr.Look(pids, files, listeners)
	read = slices.Clone(f.reads)
	slices.Sort(read)
	return waiting, socks, read
}

var stdinPipe = Files{PipeIno: 77}

// TestTrackerRereadsWhatRan: the first look reads every process; later
// looks read only those that ran since, and report what they do now.
func TestTrackerRereadsWhatRan(t *testing.T) {
	t.Parallel()
	f := newFakeSys(map[int]*fakeProc{
		10: {state: 'S', stable: true},
		11: {state: 'S', stable: true},
		12: {state: 'S', stable: true, threads: 3},
	})
	tr := Tracker{sys: f}
	pids := []int{10, 11, 12}
	if w, _, read := f.look(&tr, pids, stdinPipe, false); w || !slices.Equal(read, pids) {
		t.Fatalf("first look: waiting %v, read %v; want false, %v", w, read, pids)
	}
	if w, _, read := f.look(&tr, pids, stdinPipe, false); w || len(read) != 0 {
		t.Fatalf("idle look: waiting %v, read %v; want false, nothing", w, read)
	}
	// 11 runs and begins to read its stdin.
	f.procs[11].runs++
	f.procs[11].waits = true
	if w, _, read := f.look(&tr, pids, stdinPipe, false); !w || !slices.Equal(read, []int{11}) {
		t.Fatalf("after 11 ran: waiting %v, read %v; want true, [11]", w, read)
	}
	if w, _, read := f.look(&tr, pids, stdinPipe, false); !w || len(read) != 0 {
		t.Fatalf("11 still reading: waiting %v, read %v; want true, nothing", w, read)
	}
	// The input comes; 11 reads it and sleeps.
	f.procs[11].runs++
	f.procs[11].waits = false
	if w, _, read := f.look(&tr, pids, stdinPipe, false); w || !slices.Equal(read, []int{11}) {
		t.Fatalf("after 11 read its input: waiting %v, read %v; want false, [11]", w, read)
	}
	if len(f.handles) != 5 || tr.held != 5 {
		t.Errorf("threads held: %d (Tracker counts %d); want 5", len(f.handles), tr.held)
	}
	tr.Close()
	if len(f.handles) != 0 || tr.held != 0 {
		t.Errorf("after Close: %d threads held (Tracker counts %d); want none", len(f.handles), tr.held)
	}
}

// TestTrackerReusedPID: a PID that names another process since the last
// look is read afresh, though the new process's counters read what the
// old one's did; the old one's threads are let go.
func TestTrackerReusedPID(t *testing.T) {
	t.Parallel()
	f := newFakeSys(map[int]*fakeProc{20: {state: 'S', stable: true}})
	tr := Tracker{sys: f}
	f.look(&tr, []int{20}, stdinPipe, false)
	f.procs[20] = &fakeProc{state: 'S', stable: true, waits: true}
	if w, _, read := f.look(&tr, []int{20}, stdinPipe, false); !w || !slices.Equal(read, []int{20}) {
		t.Fatalf("after the PID was reused: waiting %v, read %v; want true, [20]", w, read)
	}
	if len(f.handles) != 1 {
		t.Errorf("%d threads held; want 1, the new process's", len(f.handles))
	}
	for _, h := range f.handles {
		if h.p != f.procs[20] {
			t.Errorf("a thread of the old process is still held")
		}
	}
}

// TestTrackerUnstable: a process whose read cannot stand (it ran while
// read, or may not be traced) and a zombie are read at every look, and
// nothing of theirs is held.
func TestTrackerUnstable(t *testing.T) {
	t.Parallel()
	f := newFakeSys(map[int]*fakeProc{
		30: {state: 'R'},
		31: {state: 'Z', stable: true},
		32: {state: 'S', stable: true},
	})
	tr := Tracker{sys: f}
	pids := []int{30, 31, 32}
	f.look(&tr, pids, stdinPipe, true)
	for range 3 {
		if _, _, read := f.look(&tr, pids, stdinPipe, true); !slices.Equal(read, []int{30, 31}) {
			t.Fatalf("read %v; want [30 31] at every look", read)
		}
	}
	if len(f.handles) != 1 {
		t.Errorf("%d threads held; want 1 (32's)", len(f.handles))
	}
}

// TestTrackerLeavers: a process that leaves the set is forgotten and its
// threads let go; one that comes back is read again.
func TestTrackerLeavers(t *testing.T) {
	t.Parallel()
	f := newFakeSys(map[int]*fakeProc{40: {state: 'S', stable: true}, 41: {state: 'S', stable: true}})
	tr := Tracker{sys: f}
	f.look(&tr, []int{40, 41}, stdinPipe, false)
	if _, _, read := f.look(&tr, []int{40}, stdinPipe, false); len(read) != 0 {
		t.Fatalf("read %v; want nothing", read)
	}
	if len(f.handles) != 1 || len(tr.procs) != 1 {
		t.Fatalf("%d threads held, %d processes known; want 1, 1", len(f.handles), len(tr.procs))
	}
	if _, _, read := f.look(&tr, []int{40, 41}, stdinPipe, false); !slices.Equal(read, []int{41}) {
		t.Fatalf("read %v; want [41]", read)
	}
}

// TestTrackerFilesChange: a look for other files reads every process
// again.
func TestTrackerFilesChange(t *testing.T) {
	t.Parallel()
	f := newFakeSys(map[int]*fakeProc{50: {state: 'S', stable: true, waits: true}})
	tr := Tracker{sys: f}
	if w, _, _ := f.look(&tr, []int{50}, Files{}, false); w {
		t.Fatalf("waiting for no file")
	}
	if w, _, read := f.look(&tr, []int{50}, stdinPipe, false); !w || !slices.Equal(read, []int{50}) {
		t.Fatalf("waiting %v, read %v; want true, [50]", w, read)
	}
}

// TestTrackerSocketTables: the socket tables are read again only when a
// process holding a socket ran or left, or one that holds sockets
// appeared; a look without listeners reads no sockets, and the next with
// reads the sockets of the processes read without them.
func TestTrackerSocketTables(t *testing.T) {
	t.Parallel()
	f := newFakeSys(map[int]*fakeProc{
		60: {state: 'S', stable: true, inos: []uint64{600, 601}, netns: "net:[1]"},
		61: {state: 'S', stable: true, inos: []uint64{600}, netns: "net:[1]"},
		62: {state: 'S', stable: true},
	})
	tr := Tracker{sys: f}
	pids := []int{60, 61, 62}
	ports := func(socks []Socket) map[uint16]int {
		m := map[uint16]int{}
		for _, s := range socks {
			m[s.Addr.Port()] = s.PID
		}
		return m
	}
	steps := []struct {
		name      string
		change    func()
		pids      []int
		listeners bool
		tables    int            // table reads so far
		want      map[uint16]int // port: PID
	}{
		{"first", func() {}, pids, true, 1, map[uint16]int{600: 60, 601: 60}},
		{"idle", func() {}, pids, true, 1, map[uint16]int{600: 60, 601: 60}},
		{"non-holder ran", func() { f.procs[62].runs++ }, pids, true, 1, map[uint16]int{600: 60, 601: 60}},
		{"holder ran", func() { f.procs[61].runs++ }, pids, true, 2, map[uint16]int{600: 60, 601: 60}},
		{"holder left", func() {}, []int{61, 62}, true, 3, map[uint16]int{600: 61}},
		{"new holder", func() { f.procs[63] = &fakeProc{state: 'S', stable: true, inos: []uint64{630}} }, []int{61, 62, 63}, true, 4, map[uint16]int{600: 61, 630: 63}},
		{"without listeners", func() { f.procs[62].runs++; f.procs[62].inos = []uint64{620} }, []int{61, 62, 63}, false, 4, nil},
		{"listeners again", func() {}, []int{61, 62, 63}, true, 5, map[uint16]int{600: 61, 620: 62, 630: 63}},
		{"idle again", func() {}, []int{61, 62, 63}, true, 5, map[uint16]int{600: 61, 620: 62, 630: 63}},
	}
	for _, st := range steps {
		st.change()
		f.sockReads = f.sockReads[:0]
		_, socks, _ := f.look(&tr, st.pids, Files{}, st.listeners)
		if got := ports(socks); f.tableReads != st.tables || len(got) != len(st.want) {
			t.Fatalf("%s: tables read %d times, listeners %v; want %d, %v", st.name, f.tableReads, got, st.tables, st.want)
		}
		for port, pid := range st.want {
			if ports(socks)[port] != pid {
				t.Errorf("%s: listeners %v; want %v", st.name, ports(socks), st.want)
			}
		}
		if st.name == "listeners again" && !slices.Equal(f.sockReads, []int{62}) {
			t.Errorf("%s: sockets read of %v; want [62]", st.name, f.sockReads)
		}
	}
}

// TestTrackerKnown: Known gives the state of a process whose read
// stands, checked once a look (Look does not check it again), and
// nothing for one that ran or was never read.
func TestTrackerKnown(t *testing.T) {
	t.Parallel()
	f := newFakeSys(map[int]*fakeProc{70: {state: 'S', stable: true}, 71: {state: 'D', stable: true}})
	tr := Tracker{sys: f}
	tr.Begin(false)
	if _, ok := tr.Known(70); ok {
		t.Fatalf("Known(70) before any read: ok")
	}
	tr.Look([]int{70, 71}, stdinPipe, false)
	f.procs[71].runs++
	tr.Begin(false)
	f.unmovedCalls = 0
	if st, ok := tr.Known(70); !ok || st != 'S' {
		t.Errorf("Known(70) = %c, %v; want S, true", st, ok)
	}
	if _, ok := tr.Known(71); ok {
		t.Errorf("Known(71) after it ran: ok")
	}
	tr.Known(70)
	f.reads = f.reads[:0]
	tr.Look([]int{70, 71}, stdinPipe, false)
	if f.unmovedCalls != 2 || !slices.Equal(f.reads, []int{71}) {
		t.Errorf("counters read %d times, processes read %v; want 2 (once each), [71]", f.unmovedCalls, f.reads)
	}
}

// TestTrackerHeldBound: the threads held stay within maxHeld; a process
// whose threads would not fit is read at every look.
func TestTrackerHeldBound(t *testing.T) {
	t.Parallel()
	per := maxHeld/2 - 1
	f := newFakeSys(map[int]*fakeProc{
		80: {state: 'S', stable: true, threads: per},
		81: {state: 'S', stable: true, threads: per},
		82: {state: 'S', stable: true, threads: per},
	})
	tr := Tracker{sys: f}
	pids := []int{80, 81, 82}
	f.look(&tr, pids, stdinPipe, false)
	for range 2 {
		if _, _, read := f.look(&tr, pids, stdinPipe, false); !slices.Equal(read, []int{82}) {
			t.Fatalf("read %v; want [82], which does not fit", read)
		}
	}
	if len(f.handles) != 2*per || tr.held != 2*per {
		t.Errorf("%d threads held (Tracker counts %d); want %d", len(f.handles), tr.held, 2*per)
	}
}

// TestTrackerKernel runs a Tracker on /proc: a shell reading a pipe
// waits, and looks at it come to read nothing again; once it got its
// line and sleeps, the next looks find it not waiting; once it is gone
// and reaped its held file reads nothing; and Close gives back the room
// its held files took.
func TestTrackerKernel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(r.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", "read x; exec sleep 60")
	cmd.Stdin = r
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	files := Files{PipeIno: st.Ino}
	counting := &countingSys{}
	tr := Tracker{sys: counting}
	room := heldRoom().Load()
	defer tr.Close()
	look := func() bool {
		tr.Begin(false)
		waiting, _ := tr.Look([]int{pid}, files, true)
		return waiting
	}
	for !look() {
		if ctx.Err() != nil {
			t.Fatalf("the shell never waited to read its pipe")
		}
	}
	// The look that saw it waiting may have begun while the shell was
	// still on its way to the read: that read does not stand. The next
	// reads it again, and from then on it stands.
	for {
		counting.reads = 0
		waiting := look()
		if !waiting {
			t.Fatalf("the shell stopped waiting without input")
		}
		if counting.reads == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("every look reads the waiting shell again")
		}
	}
	if _, err := w.WriteString("line\n"); err != nil {
		t.Fatal(err)
	}
	for look() {
		if ctx.Err() != nil {
			t.Fatalf("the shell waits after its line")
		}
	}
	th, ok := tr.procs[pid]
	for !ok || !th.r.stable {
		// The shell may still have been running when read.
		look()
		if th, ok = tr.procs[pid]; ctx.Err() != nil {
			t.Fatalf("the sleep's read never stood: %+v", th)
		}
	}
	held := th.r.threads[0]
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if counting.unmoved(&held) {
		t.Errorf("the held file of a reaped process still reads")
	}
	if heldRoom().Load() >= room {
		t.Errorf("the room for held files did not shrink while the Tracker held one")
	}
	tr.Close()
	if got := heldRoom().Load(); got != room {
		t.Errorf("room for held files after Close: %d; want %d, as before", got, room)
	}
}

// countingSys is the kernel's, counting whole reads.
type countingSys struct {
	kernelSys
	reads int
}

func (c *countingSys) read(pid int, files Files, listeners bool, room int) procRead {
	c.reads++
	return c.kernelSys.read(pid, files, listeners, room)
}

// TestTrackerSparse: a sparse look checks a process whose read stands
// only if it was not checked at the look before, or it waits to read, or
// holds a socket; one that runs meanwhile is read at the second look at
// the latest. A look that is not sparse checks every process.
func TestTrackerSparse(t *testing.T) {
	t.Parallel()
	f := newFakeSys(map[int]*fakeProc{
		90: {state: 'S', stable: true},
		91: {state: 'S', stable: true, inos: []uint64{910}},
		92: {state: 'S', stable: true, waits: true},
		93: {state: 'R'},
	})
	tr := Tracker{sys: f}
	pids := []int{90, 91, 92, 93}
	look := func(sparse bool) (waiting bool, checked int, read []int) {
		t.Helper()
		f.unmovedCalls, f.reads = 0, f.reads[:0]
		tr.Begin(sparse)
		waiting, _ = tr.Look(pids, stdinPipe, true)
		return waiting, f.unmovedCalls, slices.Clone(f.reads)
	}
	look(false)
	if _, checked, read := look(true); checked != 2 || !slices.Equal(read, []int{93}) {
		t.Fatalf("sparse look after a full one: %d checked, read %v; want 2 (91 and 92), [93]", checked, read)
	}
	if _, checked, _ := look(true); checked != 3 {
		t.Fatalf("second sparse look: %d checked; want 3 (90 is due)", checked)
	}
	// 92 stops waiting; 90 begins to, just after it was checked.
	f.procs[92].runs++
	f.procs[92].waits = false
	f.procs[90].runs++
	f.procs[90].waits = true
	if waiting, _, read := look(true); waiting || !slices.Equal(read, []int{92, 93}) {
		t.Fatalf("sparse look: waiting %v, read %v; want false (92 checked, 90 not due), [92 93]", waiting, read)
	}
	if waiting, _, read := look(true); !waiting || !slices.Equal(read, []int{90, 93}) {
		t.Fatalf("next sparse look: waiting %v, read %v; want true, [90 93]", waiting, read)
	}
	look(true)
	if _, checked, _ := look(false); checked != 3 {
		t.Fatalf("a full look after sparse ones: %d checked; want 3", checked)
	}
}
