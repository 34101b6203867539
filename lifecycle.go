package proc

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"time"

	"golang.org/x/xerrors"
)

// The one path a process takes, in order (design section 2): start
// reserves the ID and a running slot, launch makes the child and connects
// its I/O (startInTree is the one place a child is forked), begin hands it
// to its exit goroutine, supervise collects the exit and drains the
// output, finish publishes the final state in one step. The timeout lives
// here too.

// start starts req; s is the Scope it came through, or nil.
func (m *Manager) start(req StartRequest, s *Scope) (*Process, error) {
	// Refuse early, before running the caller's hooks; reserveAndLaunch
	// checks again under the lock.
	m.mu.Lock()
	closed := m.closed || (s != nil && s.closed)
	m.mu.Unlock()
	if closed {
		return nil, xerrors.Errorf("start: %w", ErrClosed)
	}
	spec, err := m.prepare(req)
	if err != nil {
		return nil, err
	}
	return m.reserveAndLaunch(spec, s)
}

func (m *Manager) reserveAndLaunch(spec *spec, s *Scope) (*Process, error) {
	m.prune()

	// Reserve the ID and a running slot before anything starts.
	m.mu.Lock()
	switch {
	case m.closed || (s != nil && s.closed):
		m.mu.Unlock()
		return nil, xerrors.Errorf("start: %w", ErrClosed)
	case m.records[spec.id] != nil || m.starting[spec.id] != nil:
		m.mu.Unlock()
		return nil, xerrors.Errorf("start %q: id is in use: %w", spec.id, ErrDuplicateID)
	case m.opts.MaxRunning > 0 && m.notFinal >= m.opts.MaxRunning:
		m.mu.Unlock()
		return nil, xerrors.Errorf("start: %d processes running: %w", m.notFinal, ErrLimit)
	}
	registered := make(chan struct{})
	m.starting[spec.id] = registered
	m.notFinal++
	m.seq++
	seq := m.seq
	m.mu.Unlock()

	p, err := m.launchRegistered(spec, seq, registered)
	if err != nil {
		return nil, err
	}
	p.eventStarted()
	p.begin()
	return p, nil
}

// launchRegistered launches spec and then registers the record, or gives
// back the reservation, even if the CommandContext hook panics: a start
// left half-reserved would hold Close forever.
func (m *Manager) launchRegistered(spec *spec, seq uint64, registered chan struct{}) (p *Process, err error) {
	defer func() {
		if p != nil {
			// Registered before the record is visible: whoever finds the
			// record (Close, Scope.Close) finds its tree, and Close's wait
			// for m.exits its exit goroutine, which begin starts.
			m.trees.register(p.tree())
			m.exits.Add(1)
		}
		m.mu.Lock()
		delete(m.starting, spec.id)
		if p == nil {
			m.notFinal--
		} else {
			m.addLocked(p)
		}
		m.mu.Unlock()
		if p != nil {
			m.trees.recheck(p.tree())
		}
		close(registered)
	}()
	return m.launch(spec, seq)
}

// launch starts the child described by sp, along os/exec's seams: make
// the command, connect its I/O, start it inside its tree, hand it over. On
// error nothing is left: no descriptor, no goroutine, no process. A start
// whose cgroup was removed from outside (cgroupGoneError) is made again,
// command and I/O too (an exec.Cmd starts once), into another cgroup, up
// to cgroupTries times; one whose default work dir is gone
// (workDirGone), once more with the work dir resolved afresh.
func (m *Manager) launch(sp *spec, seq uint64) (*Process, error) {
	cmd, err := m.command(sp)
	if err != nil {
		return nil, err
	}
	// The log is opened only now, with the ID reserved and the program
	// found, so that a start refused for those reasons never creates (or
	// removes) a file another start is using. It is discarded unless a
	// try starts, also when a CommandContext hook panics in a later try.
	var log *logFile
	started := false
	defer func() {
		if log != nil && !started {
			log.discard()
		}
	}()
	if sp.req.LogPath != "" {
		if log, err = openLog(sp.req.LogPath); err != nil {
			return nil, err
		}
	}
	moved := false
	for try := 1; ; try++ {
		p, err := m.launchCmd(cmd, sp, seq, log)
		var gone *cgroupGoneError
		switch {
		case err == nil:
			started = true
			return p, nil
		case errors.As(err, &gone) && try < cgroupTries:
		case !moved && m.workDirGone(sp):
			// The default work dir, taken as found before (workBase),
			// is gone: resolved afresh, as a start that looked would
			// have found it.
			moved = true
			if sp.dir, err = m.workDir(""); err != nil {
				return nil, err
			}
		default:
			return nil, err
		}
		if cmd, err = m.command(sp); err != nil {
			return nil, err
		}
	}
}

// The Options.Clock tags of the calls every start makes, each list made
// once: a list written at the call escapes through the quartz.Clock
// interface and is a new allocation on every call. The tags are the same
// strings, so traps match them as before; nothing may change the lists.
var (
	tagsProcessStart = []string{"process", "start"}
	tagsProcessExit  = []string{"process", "exit"}
	tagsProcessFinal = []string{"process", "final"}
)

// cgroupTries is how many cgroups a start tries that an outsider removed
// (launch): each failed try discarded its cgroup, and spares run out.
const cgroupTries = 3

// launchCmd is one try of launch with cmd.
func (m *Manager) launchCmd(cmd *exec.Cmd, sp *spec, seq uint64, log *logFile) (_ *Process, err error) {
	p := m.newProcess(sp, seq, log)
	p.watch = sp.watch.of(p)
	var ends ioEnds
	defer func() { ends.close(err != nil) }()
	if err := p.connect(cmd, sp, &ends); err != nil {
		return nil, err
	}
	if err := m.startInTree(p, cmd, sp); err != nil {
		return nil, err
	}
	p.pumpDone = make(chan struct{}, len(p.pumps))
	for _, pu := range p.pumps {
		pu.activity = p.activity
		pu.done = p.pumpDone
		pu.log = p.log
		pu.clock = p.m.clock
		pu.pipes = &p.m.pipes
		p.watch.attach(pu, p.out)
	}
	return p, nil
}

// command makes the child's command: the program, its work dir and
// environment.
func (m *Manager) command(sp *spec) (*exec.Cmd, error) {
	cmd := m.opts.CommandContext(context.Background(), sp.name, sp.args...)
	if cmd == nil {
		return nil, xerrors.Errorf("start %s: Options.CommandContext returned nil: %w", quotePath(sp.name), ErrInvalid)
	}
	if cmd.Err != nil {
		// The program was not found: say so before touching the log file.
		return nil, xerrors.Errorf("start %s: %w", quotePath(sp.name), cmd.Err)
	}
	cmd.Dir = sp.dir
	cmd.Env = sp.env
	return cmd, nil
}

// newProcess makes the record of sp, not yet started.
func (m *Manager) newProcess(sp *spec, seq uint64, log *logFile) *Process {
	out := NewHeadTailBuffer(sp.headBytes, sp.tailBytes, sp.maxLine)
	out.sharePolls(&m.polls)
	return &Process{
		m:            m,
		seq:          seq,
		timeout:      sp.req.Timeout,
		drainQuiet:   sp.drainQuiet,
		drainTimeout: sp.drainTimeout,
		asked:        sp.asked.orNil(),
		log:          log,
		out:          out,
		activity:     make(chan struct{}, 1),
		done:         make(chan struct{}),
		info: &Info{
			ID:         sp.id,
			Command:    sp.req.Command,
			Args:       append([]string(nil), sp.req.Args...),
			WorkDir:    sp.dir,
			Owner:      sp.req.Owner,
			Background: sp.req.Background,
			Running:    true,
			LogPath:    sp.req.LogPath,
			DroppedEnv: sp.droppedEnv,
			Sandbox:    sp.sandboxInfo,
		},
	}
}

// ioEnds are the descriptors connect opened: the parent's ends are ours
// (closed on failure, else by the exit goroutine); the child's belong to
// the child and are closed once it started.
type ioEnds struct{ parent, child []*os.File }

func (e *ioEnds) close(failed bool) {
	for _, f := range e.child {
		_ = f.Close()
	}
	if failed {
		for _, f := range e.parent {
			_ = f.Close()
		}
	}
}

// connect gives cmd its standard streams: a pseudo-terminal with TTY, else
// pipes the pumps read (stdout, stderr with SeparateStderr) and, with
// Stdin, a pipe the record writes.
func (p *Process) connect(cmd *exec.Cmd, sp *spec, ends *ioEnds) error {
	// Opened by a Manager's first start, whatever it asks, as its other
	// shared descriptors are: the stdin of a child without one.
	null := p.m.trees.devNull()
	pipe := func(parentReads bool) (parent, child *os.File, err error) {
		parent, child, err = newPipe(parentReads)
		if err != nil {
			return nil, nil, xerrors.Errorf("start %s: %w", quotePath(sp.name), err)
		}
		ends.parent = append(ends.parent, parent)
		ends.child = append(ends.child, child)
		return parent, child, nil
	}
	if sp.req.TTY {
		master, slave, err := openTTY(sp.size)
		if err != nil {
			return xerrors.Errorf("start %s: open terminal: %w", quotePath(sp.name), err)
		}
		ends.parent = append(ends.parent, master)
		ends.child = append(ends.child, slave)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		p.tty = master
		input := inputOf(slave)
		p.input = &input
		p.in = newStdinPipe(master, true, sp.req.Stdin)
		p.pumps = append(p.pumps, &pump{r: master, dst: p.out, tee: newTee(sp.req.OutputTee, "output tee", &p.tees)})
		return nil
	}
	// output is the child's end of a pipe a pump reads into dst.
	output := func(dst *HeadTailBuffer, w io.Writer, name string) (*os.File, error) {
		r, child, err := pipe(true)
		if err != nil {
			return nil, err
		}
		p.pumps = append(p.pumps, &pump{r: r, dst: dst, tee: newTee(w, name, &p.tees)})
		return child, nil
	}
	w, err := output(p.out, sp.req.OutputTee, "output tee")
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = w, w
	if sp.req.SeparateStderr {
		p.errOut = NewHeadTailBuffer(sp.headBytes, sp.tailBytes, sp.maxLine)
		p.errOut.sharePolls(&p.m.polls)
		if cmd.Stderr, err = output(p.errOut, sp.req.StderrTee, "stderr tee"); err != nil {
			return err
		}
	}
	if !sp.req.Stdin {
		// The shared null device; nil: exec.Cmd opens one of its own.
		if null != nil {
			cmd.Stdin = null
		}
		return nil
	}
	iw, ir, err := pipe(false)
	if err != nil {
		return err
	}
	cmd.Stdin = ir
	input := inputOf(ir)
	p.input = &input
	p.in = newStdinPipe(iw, false, true)
	return nil
}

// startInTree starts cmd inside its tree (a cgroup, or a session of its
// own) and hands the child to p. It is the one place a child is forked
// (the watchdog and the cgroup probe are helpers, not children): the tree
// keeper decides how the tree is held, the backend sets the SysProcAttr
// (setupTree) and makes the tree once the child runs (started), and
// fork says on which thread cmd.Start runs.
func (m *Manager) startInTree(p *Process, cmd *exec.Cmd, sp *spec) error {
	setup, err := m.trees.setup(cmd, sp.req.TTY, sp.sandbox != nil, sp.limits)
	if err != nil {
		return err
	}
	if sp.req.Command != "" {
		setCommandLine(cmd, m.opts.Shell, sp.req.Command)
	}
	asked := p.handsOver()
	if asked {
		p.askPidfd(cmd)
	}
	p.info.StartedAt = m.clock.Now(tagsProcessStart...)
	release, startErr := fork(setup, sp, cmd)
	gone := startErr != nil && setup.cgroupGone(startErr)
	t, err := setup.started(cmd, sp.req.Owner)
	if release != nil {
		release()
	}
	if asked && (startErr != nil || err != nil) {
		p.dropPidfd()
	}
	switch {
	case gone:
		return xerrors.Errorf("start %s: %w", quotePath(sp.name), &cgroupGoneError{startErr})
	case startErr != nil:
		return xerrors.Errorf("start %s: %w", quotePath(sp.name), startErr)
	case err != nil:
		// The child runs but cannot be supervised: stop it, and whatever
		// it started already, and collect it.
		killStarted(cmd)
		_ = cmd.Wait()
		return xerrors.Errorf("start %s: %w", quotePath(sp.name), err)
	}
	p.cmd = cmd
	p.treeP.Store(t)
	p.info.PID = cmd.Process.Pid
	p.info.Containment = t.kind
	p.info.Limits = sp.limits
	return nil
}

// cgroupGoneError is a start that failed because its cgroup was removed
// from outside (treeSetup.cgroupGone); launch tries again. It does not
// unwrap to the failure it names: the kernel's ENOENT would read as a
// missing program (fs.ErrNotExist), a missing limit file as a missing
// controller.
type cgroupGoneError struct{ err error }

func (e *cgroupGoneError) Error() string {
	return "its cgroup was removed from outside (" + e.err.Error() + ")"
}

// fork forks cmd: a sandboxed start on a restricted thread of its own
// (sandbox_*.go, design section 17), any other on the calling goroutine's
// thread. No child has Pdeathsig, which fires when the forking thread
// ends rather than the host (golang/go#27505): where a child must die
// with the host until it is registered, setupTree covers it with a
// pending mark (tree_linux.go). A sandboxed child is held at its exec
// until its thread is gone; release (nil if nothing is held) is called
// once started registered the child.
func fork(setup *treeSetup, sp *spec, cmd *exec.Cmd) (release func(), err error) {
	if sp.sandbox == nil {
		return nil, cmd.Start()
	}
	s := *sp.sandbox
	return s.start(setup, cmd, cmd.Start, sp.req.TTY)
}

// begin starts the pumps, the end's owner and the timeout. It runs once,
// after the record and its tree are registered, so that the end is always
// seen by the Manager.
//
// A record with one output pipe (the common case) hands its end over
// (endHandoff): its pump goroutine is the only one made, and whichever
// comes first takes the end: the pump at the end of its pipe, or the
// Manager's exit watch at the child's exit, which leaves a pipe already
// at its end to the pump and otherwise makes the exit goroutine. Any
// other record, or where the exit cannot be watched so, gets its exit
// goroutine as well.
func (p *Process) begin() {
	p.startActivityWatch()
	if p.handsOver() {
		// Stopped by EOF, or by the drain once the child exited; then it
		// ends the record if it came first (pumpThenEnd).
		go p.pumpThenEnd(p.pumps[0])
	} else {
		for _, pu := range p.pumps {
			// Stopped by EOF, or by the drain once the child exited (drain.go).
			go pu.run()
		}
		// Stopped when the child exits and the bounded drain ends; counted in
		// m.exits since the record was registered (launchRegistered).
		go p.supervise()
	}
	if p.timeout > 0 {
		t := p.m.clock.AfterFunc(p.timeout, p.onTimeout, "process", "timeout")
		p.mu.Lock()
		stopped := p.final || p.stopped
		if !stopped {
			p.timeoutTimer = t
		}
		p.mu.Unlock()
		if stopped {
			t.Stop("process", "timeout")
		}
	}
}

// supervise is the exit goroutine of a record not handed over: it waits
// for the child's exit and ends the record (afterExit).
func (p *Process) supervise() {
	waitExited(p.info.PID)
	p.afterExit()
}

// afterExit ends the record once its child exited (not yet reaped). It
// runs on the one goroutine that owns the end (supervise, or the
// endHandoff's winner): the only caller of cmd.Wait, and the only
// goroutine that publishes the end of the process (I3).
func (p *Process) afterExit() {
	defer p.m.exits.Done()
	defer p.endedNow()
	p.m.trees.exits.forget(p)
	// Before the reap, while the zombie still lists its pending signals: a
	// timeout's TERM that was never taken did not reach the child.
	p.mu.Lock()
	fired := p.timeoutFired
	p.mu.Unlock()
	unreached := fired && termPending(p.info.PID)
	// Wait's error says nothing the ProcessState does not (nil if the
	// wait failed: exit code -1).
	_ = p.cmd.Wait()
	// Refuse stdin and publish the exit before anything else, even a clock
	// call: a write in between would meet a bare broken pipe.
	if p.in != nil {
		p.in.exit()
	}
	// "Timed out" is decided here, once, with the exit: the timeout timed
	// the child out only if it found the child alive (onTimeout) and its
	// TERM reached it (or a signal ended it).
	p.mu.Lock()
	p.exitSeen = true
	timedOut := p.timeoutFired && (!unreached || exitSignaled(p.cmd.ProcessState))
	p.mu.Unlock()
	p.tree().sys.reaped()
	exitedAt := p.m.clock.Now(tagsProcessExit...)
	p.drain()
	p.finish(exitedAt, timedOut)
}

// finish publishes the final state in one step: the buffers are finished
// before the status flips, so that whoever sees Running == false sees
// final output, and Running, the exit code, TimedOut and Signal change
// together, under p.mu, once.
func (p *Process) finish(exitedAt time.Time, timedOut bool) {
	for _, pu := range p.pumps {
		_ = pu.r.Close()
	}
	p.out.Finish()
	if p.errOut != nil {
		p.errOut.Finish()
	}
	p.log.close()
	code, sigName, usage := exitStatus(p.cmd.ProcessState)
	if usage != nil {
		usage.Tree = p.tree().sys.usage()
	}
	if timedOut {
		code = ExitTimedOut
	}
	p.setFinal(exitedAt, code, sigName, timedOut, usage)
	now := p.m.clock.Now(tagsProcessFinal...)

	p.mu.Lock()
	p.final = true
	// A final record keeps only what it reports.
	p.cmd = nil
	p.pumps = nil
	p.activity, p.pumpDone = nil, nil // the drain's, 224 bytes
	p.mu.Unlock()

	p.stopTimeout()
	t := p.tree()
	t.final.Store(true)
	// The common case: the tree died with the child. It leaves the
	// registry now, so that nothing of it (a cgroup's open files) outlives
	// Done; its cgroup is removed, or readied for reuse by later, on this
	// goroutine after Done (settleOwn). The record then forgets it.
	later := p.m.trees.settleOwn(t)
	p.forgetTree()
	// The Manager counts the record as final before anyone can see Done
	// close: a Start right after Wait finds the slot free.
	after := p.m.recordFinal(p, now)
	p.finalStep(now) // closes p.done with the final event
	// After done: a look that began before closes what it made.
	p.dropLooks()
	after()
	if later != nil {
		later()
	}
}

// onTimeout runs on the timeout timer and decides, exactly, whether the
// child timed out: it stops the child (haltChild; a stopped process cannot
// begin to exit on its own) and looks. A child that already exited, reaped
// or not, beat the deadline by itself and is left alone. Otherwise the
// timeout fired: that is recorded before anything else (the exit goroutine
// reads it once, with the exit), the child gets SIGTERM before it runs
// again, and the tree is stopped by the one stop policy: terminate,
// KillGrace, kill. Where a child cannot be stopped and looked at (macOS,
// Windows) it counts as alive.
func (p *Process) onTimeout() {
	if !p.m.enter() {
		return // Close stops the tree
	}
	p.mu.Lock()
	skip := p.exitSeen || p.stopped
	p.mu.Unlock()
	exited := skip || haltChild(p.info.PID)
	p.mu.Lock()
	fire := !exited && !p.exitSeen && !p.stopped
	p.timeoutFired = fire
	p.mu.Unlock()
	// The tree's Terminate reaches the halted child too, and its SIGCONT
	// lets it run, to handle the TERM first.
	t := p.tree()
	if !fire || t.signal(Terminate) != nil {
		if !exited {
			resumeHalted(p.info.PID)
		}
		p.m.background.Done()
		return
	}
	// The rest of the stop waits out KillGrace: not on the timer's own
	// goroutine. It ends when the tree is empty or killed, or when Close
	// begins.
	go func() {
		defer p.m.background.Done()
		p.m.trees.graceThenKill(p.m.stopCtx, []*tree{t}, "process", "kill-grace")
	}()
}

// stopping marks p as being stopped by Close or Scope.Close: its timeout
// stops (the closer stops the tree) and blocked writers return ErrClosed.
func (p *Process) stopping() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.stopTimeout()
	if p.in != nil {
		p.in.closeByManager()
	}
}

// stopTimeout stops p's timeout timer, if it has one: the record is final
// or being stopped, and onTimeout, should it run anyway, sees that.
func (p *Process) stopTimeout() {
	p.mu.Lock()
	t := p.timeoutTimer
	p.timeoutTimer = nil
	p.mu.Unlock()
	if t != nil {
		t.Stop("process", "timeout")
	}
}
