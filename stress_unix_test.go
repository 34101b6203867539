//go:build unix

package proc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/procvisor/proc"
)

// The stress test: many processes of every kind at once, with concurrent
// readers, signallers and a scope being closed, then Close; every process
// must end with the result its kind calls for, and nothing may be left.

const (
	stressProcs        = 1000 // processes of the main mix
	stressParallel     = 32   // of them running at once
	stressVictimRound  = 16   // rounds of a scope closed under load ...
	stressVictimProcs  = 6    // ... each with this many processes
	stressKillGrace    = 200 * time.Millisecond
	stressTimeoutAfter = 150 * time.Millisecond
	stressDrainQuiet   = 20 * time.Millisecond
	stressMaxRetained  = 300 // less than the processes: records are dropped under load
	stressMainOwner    = "main"
	stressVictimOwner  = "victim"
)

type stressKind int

const (
	stressExit              stressKind = iota // exit N → N
	stressKill                                // killed after "ready" → 137
	stressTimeout                             // timed out → 124, SIGTERM
	stressTimeoutIgnoreTerm                   // timed out, SIGTERM ignored → 124, SIGKILL
	stressGrandchild                          // leaves "sleep 5" holding the pipe → 0, "x"
	stressTTY                                 // under a terminal → 0, "tty-i\r\n"
	stressStdin                               // cat of what was written → 0, the input
)

var stressKindNames = [...]string{"exit", "kill", "timeout", "timeout-ignore-term", "grandchild", "tty", "stdin"}

func (k stressKind) String() string { return stressKindNames[k] }

// stressMix is the kind of process i: stressMix[i%len(stressMix)].
var stressMix = []stressKind{
	stressExit, stressKill, stressTimeout, stressGrandchild,
	stressExit, stressTTY, stressStdin, stressTimeoutIgnoreTerm,
}

var stressReady = regexp.MustCompile(`^ready$`)

// stressProc is a started process and what it should end as.
type stressProc struct {
	p      *proc.Process
	kind   stressKind
	victim bool
}

type stressRun struct {
	t    *testing.T
	ctx  context.Context
	m    *proc.Manager
	main *proc.Scope

	mu    sync.Mutex
	procs []stressProc // every process started, for the chaos goroutines
	// chaosKilled holds the IDs of kill-kind processes that a chaos
	// goroutine signalled (stored before the signal is sent).
	chaosKilled sync.Map
	ticks       []chan struct{} // one per chaos goroutine: a process ended
	killers     sync.WaitGroup

	// Figures for the report.
	started, victims, kills, chaosSignals, chaosRefused      atomic.Int64
	termIgnored, timeouts, grandchildren, scopeCloses, lists atomic.Int64
	snapshots, gets                                          atomic.Int64
}

// TestStress runs stressProcs processes, stressParallel at a time, mixing
// exit codes, kills, timeouts (some ignoring SIGTERM), grandchildren that
// hold the output pipe, terminals and stdin, while other goroutines List,
// Snapshot, Get and Signal, and a dedicated owner's scope is started and
// closed again and again. Every process must end final with its kind's
// result; after Close no descriptor, goroutine or live member of any
// process group may remain (I4). It runs isolated (isolated), so
// that the descriptor and goroutine counts are its own. It runs once per
// containment mode (treeModes). Where the kernel can, a third of the main
// mix is sandboxed (read-only, no network).
func TestStress(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("stress: 10 to 40 s under -race on two cores; skipped with -short")
	}
	for _, mode := range treeModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			stress(t, mode)
		})
	}
}

func stress(t *testing.T, mode treeMode) {
	needProcFS(t)
	ctx := testCtx(t, 4*time.Minute)
	if !isolated(ctx, t) {
		return
	}
	begin := time.Now()
	opts := treeOptions(t, mode)

	// Warm up, so that what the runtime opens once (the network poller,
	// the first terminal) is in the baseline.
	warm := proc.NewManager(opts)
	for _, req := range []proc.StartRequest{
		{Command: "echo warm"},
		{Args: []string{"cat"}, Stdin: true},
		{Command: "echo warm", TTY: true},
	} {
		p := mustStart(t, warm, req)
		if req.Stdin {
			if err := p.CloseStdin(); err != nil {
				t.Fatalf("warm-up CloseStdin() = %v", err)
			}
		}
		waitFinal(ctx, t, p)
	}
	if err := warm.Close(); err != nil {
		t.Fatalf("warm-up Close() = %v", err)
	}
	goroutinesBefore := runtime.NumGoroutine()
	fds := len(openFDs(t))
	checkLeaks := noLeaks(t)

	opts.KillGrace = stressKillGrace
	opts.MaxRetained = stressMaxRetained
	m := proc.NewManager(opts)
	t.Cleanup(func() { _ = m.Close() }) // on failure paths; Close is idempotent
	r := &stressRun{t: t, ctx: ctx, m: m, main: m.Scope(stressMainOwner)}

	// Chaos: readers and signallers, paced by the ends of processes.
	stop := make(chan struct{})
	var chaos sync.WaitGroup
	for i, loop := range []func(rng *rand.Rand){r.lister, r.snapshotter, r.signaller} {
		tick := make(chan struct{}, 1)
		r.ticks = append(r.ticks, tick)
		chaos.Add(1)
		go func() {
			defer chaos.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			for {
				select {
				case <-stop:
					return
				case <-tick:
					loop(rng)
				}
			}
		}()
	}
	// A dedicated owner whose scope is closed under load.
	victimDone := make(chan struct{})
	go func() {
		defer close(victimDone)
		for round := range stressVictimRound {
			if ctx.Err() != nil {
				return
			}
			r.victimRound(round)
		}
	}()

	// The main mix: stressParallel workers take the indices in turn, until
	// the deadline.
	var next atomic.Int64
	var workers sync.WaitGroup
	for range stressParallel {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for i := int(next.Add(1) - 1); i < stressProcs && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				r.one(i)
			}
		}()
	}
	workers.Wait()
	if ctx.Err() != nil {
		t.Errorf("stress: deadline after %d processes of %d: %v", r.started.Load()-r.victims.Load(), stressProcs, ctx.Err())
	}
	r.killers.Wait()
	<-victimDone // bounded by ctx: every wait in a round is
	close(stop)
	chaos.Wait()
	mixDone := time.Since(begin)

	retained := len(m.List())
	closeBegin := time.Now()
	if err := m.Close(); err != nil {
		t.Errorf("Close() = %v; want nil", err)
	}
	closeTook := time.Since(closeBegin)

	// I4: nothing is left.
	var groups []int
	for _, sp := range r.procs {
		if !isDone(sp.p) {
			t.Errorf("%s (%s): not final after Close", sp.p.ID(), sp.kind)
		}
		groups = append(groups, sp.p.Info().PID)
	}
	if live := liveMembers(t, groups...); len(live) != 0 {
		t.Errorf("after Close, %d live members of the processes' groups: %v; want none", len(live), live)
	}
	checkLeaks("after Close")
	goroutinesAfter := runtime.NumGoroutine()
	if goroutinesAfter > goroutinesBefore {
		t.Errorf("runtime.NumGoroutine() after Close = %d; want at most %d as before", goroutinesAfter, goroutinesBefore)
	}

	t.Logf("stress: %d processes (%d main, %d in %d closed scopes), %d at a time, in %v; Close took %v; %d records retained of MaxRetained %d",
		r.started.Load(), r.started.Load()-r.victims.Load(), r.victims.Load(), r.scopeCloses.Load(),
		stressParallel, mixDone.Round(time.Millisecond), closeTook.Round(time.Millisecond), retained, stressMaxRetained)
	t.Logf("stress: faults: %d kills after ready, %d timeouts (%d with SIGTERM ignored), %d grandchildren holding the pipe, %d chaos signals delivered (%d refused: group gone or record dropped), %d scope closes",
		r.kills.Load(), r.timeouts.Load(), r.termIgnored.Load(), r.grandchildren.Load(), r.chaosSignals.Load(), r.chaosRefused.Load(), r.scopeCloses.Load())
	t.Logf("stress: concurrent reads: %d List rounds, %d snapshots, %d gets; descriptors %d before and after; goroutines %d before, %d after",
		r.lists.Load(), r.snapshots.Load(), r.gets.Load(), fds, goroutinesBefore, goroutinesAfter)
}

// record adds a started process for the chaos goroutines.
func (r *stressRun) record(p *proc.Process, kind stressKind, victim bool) {
	r.mu.Lock()
	r.procs = append(r.procs, stressProc{p: p, kind: kind, victim: victim})
	r.mu.Unlock()
	r.started.Add(1)
	if victim {
		r.victims.Add(1)
	}
}

// pick returns a random process among the last recent started (all of
// them if recent <= 0): recent ones are more likely to be running.
func (r *stressRun) pick(rng *rand.Rand, recent int) (stressProc, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	procs := r.procs
	if recent > 0 && len(procs) > recent {
		procs = procs[len(procs)-recent:]
	}
	if len(procs) == 0 {
		return stressProc{}, false
	}
	return procs[rng.IntN(len(procs))], true
}

// tick tells each chaos goroutine that a process ended; it never blocks.
func (r *stressRun) tick() {
	for _, tick := range r.ticks {
		select {
		case tick <- struct{}{}:
		default:
		}
	}
}

// one runs process i of the main mix to its end and checks the result.
func (r *stressRun) one(i int) {
	t := r.t
	kind := stressMix[i%len(stressMix)]
	req := proc.StartRequest{ID: fmt.Sprintf("%s-%d", kind, i)}
	switch kind {
	case stressExit:
		req.Command = fmt.Sprintf("echo out-%d; exit %d", i, stressExitCode(i))
	case stressKill:
		req.Command = "echo ready; exec sleep 30"
	case stressTimeout:
		req.Command = "exec sleep 30"
		req.Timeout = stressTimeoutAfter
	case stressTimeoutIgnoreTerm:
		req.Command = "trap '' TERM; echo ready; exec sleep 30"
		req.Timeout = stressTimeoutAfter
	case stressGrandchild:
		req.Command = "sleep 5 & echo x"
		req.DrainQuiet = stressDrainQuiet
	case stressTTY:
		req.Command = fmt.Sprintf("echo tty-%d", i)
		req.TTY = true
	case stressStdin:
		req.Args = []string{"cat"}
		req.Stdin = true
	}
	if i%3 == 0 && stressSandboxed() {
		// A third of the starts are sandboxed (read-only, no network):
		// every kind must end exactly as without it.
		req.Sandbox = &proc.Sandbox{}
	}
	var p *proc.Process
	var err error
	if i%2 == 0 {
		req.Owner = stressMainOwner
		p, err = r.m.Start(req)
	} else {
		p, err = r.main.Start(req)
	}
	if err != nil {
		t.Errorf("Start(%s: %q %q) = %v; want a process", req.ID, req.Command, req.Args, err)
		return
	}
	r.record(p, kind, false)

	switch kind {
	case stressKill:
		r.killers.Add(1)
		go r.killWhenReady(p, i)
	case stressStdin:
		in := fmt.Sprintf("in-%d\n", i)
		if n, err := p.WriteContext(r.ctx, []byte(in)); n != len(in) || err != nil {
			t.Errorf("%s: WriteContext(%q) = %d, %v; want %d, nil", p.ID(), in, n, err, len(in))
		}
		if err := p.CloseStdin(); err != nil {
			t.Errorf("%s: CloseStdin() = %v; want nil", p.ID(), err)
		}
	}
	if err := p.Wait(r.ctx); err != nil {
		t.Errorf("%s: Wait() = %v; output so far %q", p.ID(), err, p.Output().Text)
		return
	}
	r.check(p, kind, i)
	if sandboxed := p.Info().Sandbox != ""; sandboxed != (req.Sandbox != nil) {
		t.Errorf("%s: Info.Sandbox %q for Sandbox %v", p.ID(), p.Info().Sandbox, req.Sandbox)
	}
	r.tick()
}

func stressExitCode(i int) int { return i * 37 % 256 }

// killWhenReady kills p from another goroutine once it printed "ready".
func (r *stressRun) killWhenReady(p *proc.Process, i int) {
	defer r.killers.Done()
	id := p.ID()
	_, err := p.WaitFor(r.ctx, stressReady, true)
	if err != nil {
		if _, hit := r.chaosKilled.Load(id); hit && errors.Is(err, proc.ErrNotRunning) {
			return // a chaos goroutine killed it before it was ready
		}
		r.t.Errorf("%s: WaitFor(ready) = %v", id, err)
		return
	}
	switch i % 3 {
	case 0:
		err = p.Signal(proc.Kill)
	case 1:
		err = r.m.Signal(id, proc.Kill)
	default:
		err = r.main.Signal(id, proc.Kill)
	}
	if err == nil {
		r.kills.Add(1)
		return
	}
	if _, hit := r.chaosKilled.Load(id); hit && (errors.Is(err, proc.ErrNotRunning) || errors.Is(err, proc.ErrNotFound)) {
		return
	}
	r.t.Errorf("%s: Signal(Kill) after ready = %v; want nil", id, err)
}

// check compares a final process with what its kind calls for.
func (r *stressRun) check(p *proc.Process, kind stressKind, i int) {
	t := r.t
	snap := p.Snapshot()
	info := snap.Info
	if info.Running || info.ExitCode == nil || info.ExitedAt.IsZero() {
		t.Errorf("%s: after Wait, running %v, exit code %v, exited at %v; want final", p.ID(), info.Running, info.ExitCode, info.ExitedAt)
		return
	}
	code, sig, out := *info.ExitCode, info.Signal, snap.Output.Text
	type result struct {
		code     int
		sig      string
		timedOut bool
		out      string
	}
	got := result{code, sig, info.TimedOut, out}
	var want result
	switch kind {
	case stressExit:
		want = result{code: stressExitCode(i), out: fmt.Sprintf("out-%d\n", i)}
	case stressKill:
		want = result{code: 137, sig: "SIGKILL", out: "ready\n"}
		if _, hit := r.chaosKilled.Load(p.ID()); hit && out == "" {
			want.out = "" // killed by chaos before it was ready
		}
	case stressTimeout:
		want = result{code: proc.ExitTimedOut, sig: "SIGTERM", timedOut: true}
		r.timeouts.Add(1)
	case stressTimeoutIgnoreTerm:
		r.timeouts.Add(1)
		if out == "ready\n" {
			// The trap was set: only the kill after KillGrace ended it.
			want = result{code: proc.ExitTimedOut, sig: "SIGKILL", timedOut: true, out: "ready\n"}
			r.termIgnored.Add(1)
		} else {
			// The timeout came before the shell set its trap.
			want = result{code: proc.ExitTimedOut, sig: "SIGTERM", timedOut: true}
		}
	case stressGrandchild:
		want = result{out: "x\n"}
		r.grandchildren.Add(1)
	case stressTTY:
		want = result{out: fmt.Sprintf("tty-%d\r\n", i)}
	case stressStdin:
		want = result{out: fmt.Sprintf("in-%d\n", i)}
	}
	if got != want {
		t.Errorf("%s: final (code, signal, timed out, output) = %+v; want %+v", p.ID(), got, want)
	}
	if info.OutputBytes != int64(len(out)) || snap.Output.Truncation != nil {
		t.Errorf("%s: OutputBytes = %d, truncation %+v for output %q; want %d, nil", p.ID(), info.OutputBytes, snap.Output.Truncation, out, len(out))
	}
}

// victimRound starts processes through a fresh scope of the victim owner,
// waits until each is ready, and closes the scope while the main mix runs:
// plain children end by SIGTERM, TERM-ignoring ones by SIGKILL after the
// grace, and the scope refuses further starts.
func (r *stressRun) victimRound(round int) {
	t := r.t
	s := r.m.Scope(stressVictimOwner)
	kinds := []struct {
		command string
		code    int
		sig     string
	}{
		{"echo ready; exec sleep 30", 143, "SIGTERM"},
		{"trap '' TERM; echo ready; exec sleep 30", 137, "SIGKILL"},
		{"sleep 30 & echo ready; wait", 143, "SIGTERM"},
	}
	type victim struct {
		p    *proc.Process
		code int
		sig  string
	}
	var vs []victim
	for j := range stressVictimProcs {
		k := kinds[j%len(kinds)]
		p, err := s.Start(proc.StartRequest{ID: fmt.Sprintf("victim-%d-%d", round, j), Command: k.command})
		if err != nil {
			t.Errorf("victim scope Start = %v; want a process", err)
			continue
		}
		r.record(p, stressExit, true)
		vs = append(vs, victim{p, k.code, k.sig})
	}
	for _, v := range vs {
		if _, err := v.p.WaitFor(r.ctx, stressReady, true); err != nil {
			t.Errorf("%s: WaitFor(ready) = %v", v.p.ID(), err)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("victim Scope.Close() = %v; want nil", err)
	}
	r.scopeCloses.Add(1)
	for _, v := range vs {
		if !isDone(v.p) {
			t.Errorf("%s: not final after Scope.Close returned", v.p.ID())
			continue
		}
		info := v.p.Info()
		if code := exitCode(t, info); code != v.code || info.Signal != v.sig || info.TimedOut {
			t.Errorf("%s: after Scope.Close, exit %d %q timed out %v; want %d %q false", v.p.ID(), code, info.Signal, info.TimedOut, v.code, v.sig)
		}
	}
	if p, err := s.Start(proc.StartRequest{Command: "true"}); !errors.Is(err, proc.ErrClosed) {
		t.Errorf("Start through a closed Scope = %v, %v; want ErrClosed", p, err)
	}
}

// lister checks List: running records first, then newest first; a status
// is final exactly when it has an exit code; a scope sees only its owner.
func (r *stressRun) lister(*rand.Rand) {
	t := r.t
	infos := r.m.List()
	for i, info := range infos {
		if info.Running != (info.ExitCode == nil) {
			t.Errorf("List(): %s running %v with exit code %v", info.ID, info.Running, info.ExitCode)
		}
		if i == 0 {
			continue
		}
		prev := infos[i-1]
		if !prev.Running && info.Running {
			t.Errorf("List(): running %s after final %s; want running records first", info.ID, prev.ID)
		}
		if prev.Running == info.Running && prev.StartedAt.Before(info.StartedAt) {
			t.Errorf("List(): %s (started %v) before %s (started %v); want newest first", prev.ID, prev.StartedAt, info.ID, info.StartedAt)
		}
	}
	for _, info := range r.main.List() {
		if info.Owner != stressMainOwner {
			t.Errorf("Scope(%q).List() holds %s of owner %q", stressMainOwner, info.ID, info.Owner)
		}
	}
	r.lists.Add(1)
}

// snapshotter checks I1 and I2 on a random process, and Get.
func (r *stressRun) snapshotter(rng *rand.Rand) {
	t := r.t
	sp, ok := r.pick(rng, 0)
	if !ok {
		return
	}
	p := sp.p
	snap := p.Snapshot()
	if snap.Info.Running {
		// I2: the output is read after the status, so it holds at least
		// the bytes the status counted.
		if snap.Info.ExitCode != nil || int64(len(snap.Output.Text)) < snap.Info.OutputBytes {
			t.Errorf("%s: running snapshot with exit code %v, %d bytes of output for OutputBytes %d",
				p.ID(), snap.Info.ExitCode, len(snap.Output.Text), snap.Info.OutputBytes)
		}
	} else if got := p.Output(); snap.Info.ExitCode == nil || got.Text != snap.Output.Text ||
		int64(len(got.Text)) != snap.Info.OutputBytes {
		// I1: once final, the output never changes.
		t.Errorf("%s: final snapshot (exit code %v) output %q, OutputBytes %d; later Output() %q",
			p.ID(), snap.Info.ExitCode, snap.Output.Text, snap.Info.OutputBytes, got.Text)
	}
	r.snapshots.Add(1)
	got, err := r.m.Get(p.ID())
	switch {
	case err == nil && got != p:
		t.Errorf("Get(%s) returned another record", p.ID())
	case errors.Is(err, proc.ErrNotFound) && !isDone(p):
		// Only final records are dropped.
		t.Errorf("Get(%s) = %v for a record that is not final", p.ID(), err)
	case err != nil && !errors.Is(err, proc.ErrNotFound):
		t.Errorf("Get(%s) = %v; want the record or ErrNotFound", p.ID(), err)
	}
	r.gets.Add(1)
}

// signaller sends signals that cannot change an expected result: Kill to
// kill-kind processes (they end by SIGKILL anyway), and any signal to
// records already final (their result is fixed; what is left of their
// group, such as a grandchild, may go).
func (r *stressRun) signaller(rng *rand.Rand) {
	for range 4 {
		r.signalOne(rng)
	}
}

func (r *stressRun) signalOne(rng *rand.Rand) {
	t := r.t
	sp, ok := r.pick(rng, 2*stressParallel)
	if !ok || sp.victim {
		return
	}
	p, id := sp.p, sp.p.ID()
	sig := proc.Kill
	switch {
	case sp.kind == stressKill:
		r.chaosKilled.Store(id, true)
	case isDone(p):
		sig = []proc.Signal{proc.Interrupt, proc.Terminate, proc.Kill}[rng.IntN(3)]
	default:
		return
	}
	var err error
	if rng.IntN(2) == 0 {
		err = p.Signal(sig)
	} else {
		err = r.m.Signal(id, sig)
	}
	switch {
	case err == nil:
		r.chaosSignals.Add(1)
	case errors.Is(err, proc.ErrNotRunning), errors.Is(err, proc.ErrNotFound):
		r.chaosRefused.Add(1)
	default:
		t.Errorf("Signal(%s, %s) = %v; want nil, ErrNotRunning or ErrNotFound", id, sig, err)
	}
}

// The observed flood (issue 22): a child writing as fast as it can,
// followed by readers of every read size and hammered by tight Snapshot
// callers, must still run to its end, and every reader's account of the
// stream must be exact.

const (
	// observedFloodBytes is what the child writes, a multiple of
	// faultFloodLine: 100 MB, also under -race (6 to 8 s alone on two
	// cores).
	observedFloodBytes = 100_000_000
	observedSnapshots  = 8 // goroutines calling Snapshot in a tight loop
	// observedDeadline bounds the whole run: a liveness check (a run that
	// holds the child forever fails), not a performance target, which
	// lives in the bench module.
	observedDeadline = 2 * time.Minute
)

// observedReader is one follower of the observed flood: how it reads
// (size bytes a call; into a reused buffer or not) and what it got.
type observedReader struct {
	// size is the bytes a read asks for. 0 is ReadSince's max of 0, "no
	// limit" (all the stored bytes from the cursor on); ReadSinceInto
	// with an empty buffer reads no bytes at all (it only skips lost
	// ones), so a follower cannot use it, and none here does.
	size int
	into bool // ReadSinceInto with a reused buffer of size bytes

	read, lost       int64 // bytes of Data, and Lost, summed
	next             int64 // the cursor after the last read
	reads, waits     int64
	eof              bool
	err              error // WaitOutput's, if it failed
	mismatchAt       int64 // stream offset of the first wrong byte; -1: none
	mismatch, wanted []byte
}

func (r *observedReader) String() string {
	how := "ReadSince"
	if r.into {
		how = "ReadSinceInto"
	}
	return fmt.Sprintf("%s(%d)", how, r.size)
}

// TestStressObservedFlood is issue 22's hostile case: a child writes
// observedFloodBytes as fast as it can while eight followers (WaitOutput,
// then ReadSince or ReadSinceInto until Next reaches End) read it in
// pieces of 0 (ReadSince's "no limit") to 64 KiB bytes, 1 and 10 bytes
// included, and observedSnapshots goroutines call Snapshot without pause.
// Observing must not hold the child for good (design section 10): the
// record must be final, exit 0, within observedDeadline. Each follower
// must reach EOF at the stream's end with read + Lost equal to what was
// written, every byte it read the flood's byte at that offset (the flood's
// lines number themselves, so a misplaced byte shows), and the final
// Snapshot must be exactly the flood's head and tail around the marker.
func TestStressObservedFlood(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("stress: a 100 MB flood, 1 s (6 to 8 s under -race) alone on two cores; skipped with -short")
	}
	const total = observedFloodBytes
	ctx := testCtx(t, observedDeadline)
	m := newManager(t, proc.Options{})
	readers := []*observedReader{
		{size: 0}, {size: 1}, {size: 10, into: true}, {size: 100},
		{size: 1000, into: true}, {size: 16 << 10}, {size: 32<<10 + 1, into: true}, {size: 64 << 10, into: true},
	}
	begin := time.Now()
	p := mustStart(t, m, helperReq("fault-flood", strconv.FormatInt(total, 10)))

	var wg sync.WaitGroup
	// Each follower stops at EOF, or when WaitOutput fails (ctx ended).
	for _, r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.follow(ctx, p)
		}()
	}
	// Each Snapshot caller stops once the record is final; what it saw
	// last must then be the final snapshot (I1).
	lastSeen := make([]proc.Snapshot, observedSnapshots)
	var snapshots atomic.Int64
	var snapErr sync.Once
	for i := range lastSeen {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				done := isDone(p)
				snap := p.Snapshot()
				snapshots.Add(1)
				if msg := observedSnapshotWrong(snap); msg != "" {
					snapErr.Do(func() { t.Errorf("Snapshot() during the flood: %s", msg) })
				}
				if done {
					lastSeen[i] = snap
					return
				}
			}
		}()
	}

	err := p.Wait(ctx)
	ran := time.Since(begin)
	wg.Wait() // bounded by ctx: every loop above ends with it
	for _, r := range readers {
		t.Logf("follower %-20v read %10d bytes, lost %10d, in %8d reads and %6d waits", r, r.read, r.lost, r.reads, r.waits)
	}
	t.Logf("flood of %d bytes: Wait returned after %v, under %d snapshots", total, ran.Round(time.Millisecond), snapshots.Load())
	if err != nil {
		t.Fatalf("Wait() = %v after %v; want final within %v (observing holds the child); OutputBytes %d of %d",
			err, ran.Round(time.Millisecond), observedDeadline, p.Info().OutputBytes, total)
	}
	snap := p.Snapshot()
	if code := exitCode(t, snap.Info); code != 0 || snap.Info.OutputBytes != total {
		t.Fatalf("flood: exit %d, OutputBytes %d; want 0, %d", code, snap.Info.OutputBytes, total)
	}

	// The rendering: head, marker, tail.
	head, tail := int64(proc.DefaultHeadBytes), int64(proc.DefaultTailBytes)
	wantHead, wantTail := faultFloodBytes(0, head), faultFloodBytes(total-tail, tail)
	want := string(wantHead) + fmt.Sprintf("\n... [omitted %d bytes] ...\n", total-head-tail) + string(wantTail)
	wantTrunc := proc.Truncation{OriginalBytes: total, RetainedBytes: head + tail, OmittedBytes: total - head - tail, Strategy: "head_tail"}
	if snap.Output.Text != want {
		t.Errorf("final Snapshot().Output.Text: %d bytes; want the flood's head and tail, %d bytes (first difference at %d)",
			len(snap.Output.Text), len(want), firstByteDiff([]byte(snap.Output.Text), []byte(want)))
	}
	if tr := snap.Output.Truncation; tr == nil || *tr != wantTrunc {
		t.Errorf("final Truncation = %+v; want %+v", tr, wantTrunc)
	}
	for i, seen := range lastSeen {
		if seen.Output.Text != snap.Output.Text || seen.Info.OutputBytes != total {
			t.Errorf("Snapshot caller %d: last snapshot of the final record (%d bytes of output, OutputBytes %d) differs from the final one", i, len(seen.Output.Text), seen.Info.OutputBytes)
		}
	}

	// Every follower's account of the stream.
	for _, r := range readers {
		switch {
		case r.err != nil:
			t.Errorf("follower %v: %v after %d reads to cursor %d of %d", r, r.err, r.reads, r.next, total)
		case !r.eof || r.next != total || r.read+r.lost != total:
			t.Errorf("follower %v: EOF %v at cursor %d, read %d + lost %d = %d; want EOF at %d = read + lost",
				r, r.eof, r.next, r.read, r.lost, r.read+r.lost, total)
		}
		if r.mismatchAt >= 0 {
			t.Errorf("follower %v: bytes at stream offset %d are %q; the flood has %q there", r, r.mismatchAt, r.mismatch, r.wanted)
		}
		if r.read < head+tail {
			t.Errorf("follower %v read %d bytes; want at least the retained head and tail, %d", r, r.read, head+tail)
		}
	}
}

// follow reads p's Output stream as a follower does until EOF or until
// WaitOutput fails, keeping the account in r and checking every byte.
func (r *observedReader) follow(ctx context.Context, p *proc.Process) {
	r.mismatchAt = -1
	var buf, scratch []byte
	if r.into {
		buf = make([]byte, r.size)
	}
	for {
		var c proc.Chunk
		if r.into {
			c = p.ReadSinceInto(r.next, buf)
		} else {
			c = p.ReadSince(r.next, r.size)
		}
		r.reads++
		if c.Next != r.next+c.Lost+int64(len(c.Data)) {
			r.err = fmt.Errorf("read from %d returned Next %d, Lost %d, %d bytes: Next is not cursor + Lost + len(Data)", r.next, c.Next, c.Lost, len(c.Data))
			return
		}
		at := r.next + c.Lost
		r.read += int64(len(c.Data))
		r.lost += c.Lost
		r.next = c.Next
		if r.mismatchAt < 0 {
			scratch = faultFloodInto(scratch[:0], at, len(c.Data))
			if i := firstByteDiff(c.Data, scratch); i >= 0 {
				end := min(i+20, len(c.Data))
				r.mismatchAt, r.mismatch, r.wanted = at+int64(i), bytes.Clone(c.Data[i:end]), bytes.Clone(scratch[i:end])
			}
		}
		if c.EOF {
			r.eof = true
			return
		}
		if c.Next < c.End {
			continue // more is there: read on before waiting
		}
		r.waits++
		if err := p.WaitOutput(ctx, r.next); err != nil {
			r.err = err
			return
		}
	}
}

// faultFloodInto appends bytes [off, off+n) of the flood stream (see
// faultFloodBytes) to dst, counting the line numbers up in place: the
// followers check every byte they read, hundreds of megabytes, which fmt
// per line would make the slowest part of the test.
func faultFloodInto(dst []byte, off int64, n int) []byte {
	if n == 0 {
		return dst
	}
	k := off / faultFloodLine
	line := []byte(fmt.Sprintf("%09d\n", k))
	skip := int(off % faultFloodLine)
	for n > 0 {
		part := line[skip:]
		if len(part) > n {
			part = part[:n]
		}
		dst = append(dst, part...)
		n -= len(part)
		skip = 0
		for i := faultFloodLine - 2; i >= 0; i-- {
			if line[i] < '9' {
				line[i]++
				break
			}
			line[i] = '0'
		}
	}
	return dst
}

// firstByteDiff returns the index of the first byte where a and b differ
// (one being shorter counts at its end), or -1 if they are equal.
func firstByteDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// observedSnapshotWrong checks a snapshot taken while the flood runs (or
// just after): a status is final exactly when it has an exit code, and
// the output, read after the status (I2), holds at least the bytes the
// status counted. It returns what is wrong, or "".
func observedSnapshotWrong(s proc.Snapshot) string {
	if s.Info.Running != (s.Info.ExitCode == nil) {
		return fmt.Sprintf("running %v with exit code %v", s.Info.Running, s.Info.ExitCode)
	}
	stored := int64(len(s.Output.Text))
	if s.Output.Truncation != nil {
		stored = s.Output.Truncation.OriginalBytes
	}
	if stored < s.Info.OutputBytes {
		return fmt.Sprintf("output of %d bytes for OutputBytes %d", stored, s.Info.OutputBytes)
	}
	return ""
}
