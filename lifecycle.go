package proc

import (
	"context"
	"errors"
	"os"
	"time"

	"cdr.dev/slog/v3"
	"github.com/coder/quartz"
	"golang.org/x/xerrors"
)

// The one path a process takes, in order (design section 2): launch makes
// the child and connects its I/O, begin hands it to its exit goroutine,
// supervise collects the exit and drains the output, finish publishes the
// final state in one step. The timeout lives here too.

// launch starts the child described by sp. On error nothing is left: no
// descriptor, no goroutine, no process.
func (m *Manager) launch(sp *spec, seq uint64) (_ *Process, err error) {
	cmd := m.opts.CommandContext(context.Background(), sp.name, sp.args...)
	if cmd == nil {
		return nil, xerrors.Errorf("start %q: Options.CommandContext returned nil: %w", sp.name, ErrInvalid)
	}
	if cmd.Err != nil {
		// The program was not found: say so before touching the log file.
		return nil, xerrors.Errorf("start %q: %w", sp.name, cmd.Err)
	}
	cmd.Dir = sp.dir
	cmd.Env = sp.env
	// The log is opened only now, with the ID reserved and the program
	// found, so that a start refused for those reasons never creates (or
	// removes) a file another start is using.
	var log *logFile
	if sp.req.LogPath != "" {
		if log, err = openLog(sp.req.LogPath); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				log.discard()
			}
		}()
	}
	p := &Process{
		m:            m,
		seq:          seq,
		timeout:      sp.req.Timeout,
		drainQuiet:   sp.drainQuiet,
		drainTimeout: sp.drainTimeout,
		reqWorkDir:   sp.req.WorkDir,
		log:          log,
		out:          NewHeadTailBuffer(sp.headBytes, sp.tailBytes, m.opts.MaxLineLength),
		activity:     make(chan struct{}, 1),
		exited:       make(chan struct{}),
		done:         make(chan struct{}),
		ended:        make(chan struct{}),
		info: Info{
			ID:         sp.id,
			Command:    sp.req.Command,
			Args:       append([]string(nil), sp.req.Args...),
			WorkDir:    sp.dir,
			Owner:      sp.req.Owner,
			Background: sp.req.Background,
			Running:    true,
			LogPath:    sp.req.LogPath,
		},
	}

	// parentEnds are ours (closed on failure, else by the exit goroutine);
	// childEnds belong to the child and are closed here once it started.
	var parentEnds, childEnds []*os.File
	defer func() {
		for _, f := range childEnds {
			_ = f.Close()
		}
		if err != nil {
			for _, f := range parentEnds {
				_ = f.Close()
			}
		}
	}()
	pipe := func(parentReads bool) (parent, child *os.File, err error) {
		parent, child, err = newPipe(parentReads)
		if err != nil {
			return nil, nil, xerrors.Errorf("start %q: %w", sp.name, err)
		}
		parentEnds = append(parentEnds, parent)
		childEnds = append(childEnds, child)
		return parent, child, nil
	}

	if sp.req.TTY {
		master, slave, err := openTTY(sp.size)
		if err != nil {
			return nil, xerrors.Errorf("start %q: open terminal: %w", sp.name, err)
		}
		parentEnds = append(parentEnds, master)
		childEnds = append(childEnds, slave)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
		p.tty = master
		p.in = newStdinPipe(master, true, sp.req.Stdin)
		p.pumps = append(p.pumps, &pump{r: master, dst: p.out, tee: newTee(sp.req.OutputTee, "output tee", &p.tees)})
	} else {
		r, w, err := pipe(true)
		if err != nil {
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = w, w
		p.pumps = append(p.pumps, &pump{r: r, dst: p.out, tee: newTee(sp.req.OutputTee, "output tee", &p.tees)})
		if sp.req.SeparateStderr {
			er, ew, err := pipe(true)
			if err != nil {
				return nil, err
			}
			cmd.Stderr = ew
			p.errOut = NewHeadTailBuffer(sp.headBytes, sp.tailBytes, m.opts.MaxLineLength)
			p.pumps = append(p.pumps, &pump{r: er, dst: p.errOut, tee: newTee(sp.req.StderrTee, "stderr tee", &p.tees)})
		}
		if sp.req.Stdin {
			iw, ir, err := pipe(false)
			if err != nil {
				return nil, err
			}
			cmd.Stdin = ir
			p.in = newStdinPipe(iw, false, true)
		}
	}
	setupGroup(cmd, sp.req.TTY)
	if sp.req.Command != "" {
		setCommandLine(cmd, m.opts.Shell, sp.req.Command)
	}

	p.info.StartedAt = m.clock.Now("process", "start")
	if err := cmd.Start(); err != nil {
		return nil, xerrors.Errorf("start %q: %w", sp.name, err)
	}
	group, err := newGroup(cmd)
	if err != nil {
		// The child runs but cannot be supervised: stop it and collect it.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, xerrors.Errorf("start %q: %w", sp.name, err)
	}
	p.cmd = cmd
	p.group = group
	p.info.PID = cmd.Process.Pid
	p.pumpDone = make(chan struct{}, len(p.pumps))
	for _, pu := range p.pumps {
		pu.activity = p.activity
		pu.done = p.pumpDone
		pu.log = p.log
	}
	return p, nil
}

// begin starts the pumps, the exit goroutine and the timeout. It runs once,
// after the record is registered, so that the end is always seen by the
// Manager.
func (p *Process) begin() {
	for _, pu := range p.pumps {
		// Stopped by EOF, or by the drain once the child exited (drain.go).
		go pu.run()
	}
	// Stopped when the child exits and the bounded drain ends.
	p.m.exits.Add(1)
	go p.supervise()
	if p.timeout > 0 {
		t := p.m.clock.AfterFunc(p.timeout, p.onTimeout, "process", "timeout")
		p.setTimer(&p.timeoutTimer, t)
	}
}

// supervise is the exit goroutine: the only caller of cmd.Wait, and the only
// goroutine that publishes the end of the process (I3).
func (p *Process) supervise() {
	defer p.m.exits.Done()
	defer close(p.ended)
	waitExited(p.info.PID)
	waitErr := p.cmd.Wait()
	// Refuse stdin and publish the exit before anything else, even a clock
	// call: a write in between would meet a bare broken pipe.
	if p.in != nil {
		p.in.exit()
	}
	close(p.exited)
	p.group.reaped()
	exitedAt := p.m.clock.Now("process", "exit")
	p.drain()
	p.finish(waitErr, exitedAt)
}

// finish publishes the final state. The buffers are finished before the
// status flips, so that whoever sees Running == false sees final output.
func (p *Process) finish(waitErr error, exitedAt time.Time) {
	for _, pu := range p.pumps {
		_ = pu.r.Close()
	}
	p.out.Finish()
	if p.errOut != nil {
		p.errOut.Finish()
	}
	p.log.close()
	code, sigName, usage := exitStatus(p.cmd.ProcessState, waitErr)
	now := p.m.clock.Now("process", "final")

	p.mu.Lock()
	if p.timedOut {
		code = 124
	}
	p.final = true
	p.exitCode = &code
	p.sigName = sigName
	p.exitedAt = exitedAt
	p.finalTime = now
	p.usage = usage
	// A final record keeps only what it reports.
	p.cmd = nil
	p.pumps = nil
	timeout := p.timeoutTimer
	p.timeoutTimer = nil
	p.mu.Unlock()

	if timeout != nil {
		timeout.Stop("process", "timeout")
	}
	// The Manager counts the record as final before anyone can see Done
	// close: a Start right after Wait finds the slot free.
	after := p.m.recordFinal(p)
	close(p.done)
	after()
}

// setTimer stores t in *slot unless Close already stopped p's timers.
func (p *Process) setTimer(slot **quartz.Timer, t *quartz.Timer) {
	p.mu.Lock()
	off := p.timersOff
	if !off {
		*slot = t
	}
	p.mu.Unlock()
	if off {
		t.Stop()
	}
}

// onTimeout runs on the timeout timer: terminate the group, then kill it
// after KillGrace.
func (p *Process) onTimeout() {
	// A leader that exited by itself, even if not reaped yet, beat the
	// deadline: it did not time out.
	if p.hasExited() || leaderExited(p.info.PID) || !p.m.enter() {
		return
	}
	defer p.m.background.Done()
	// Set before the signal: the exit it causes may be published at once.
	p.mu.Lock()
	p.timedOut = true
	p.mu.Unlock()
	if err := p.Signal(Terminate); err != nil {
		if errors.Is(err, ErrNotRunning) {
			// The exit was published in between, and the group is gone:
			// the timeout ended nothing, unless the record already went
			// final saying otherwise (a final record never changes).
			p.mu.Lock()
			if !p.final {
				p.timedOut = false
			}
			p.mu.Unlock()
			return
		}
		p.m.logger.Debug(context.Background(), "terminate on timeout", slog.F("id", p.info.ID), slog.Error(err))
	}
	t := p.m.clock.AfterFunc(p.m.opts.KillGrace, p.onKillGrace, "process", "kill-grace")
	p.setTimer(&p.killTimer, t)
}

func (p *Process) onKillGrace() {
	if !p.m.enter() {
		return
	}
	defer p.m.background.Done()
	if err := p.Signal(Kill); err != nil {
		p.m.logger.Debug(context.Background(), "kill after grace", slog.F("id", p.info.ID), slog.Error(err))
	}
}

// takeKillTimer hands a pending kill-grace timer over to the caller (the
// Manager, when it drops the record).
func (p *Process) takeKillTimer() *quartz.Timer {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.killTimer
	p.killTimer = nil
	p.timersOff = true
	return t
}

// stopping marks p as being stopped by Close: its timers stop (Close does
// their work) and blocked writers return ErrClosed.
func (p *Process) stopping() {
	p.mu.Lock()
	p.timersOff = true
	timers := []*quartz.Timer{p.timeoutTimer, p.killTimer}
	p.timeoutTimer, p.killTimer = nil, nil
	p.mu.Unlock()
	for _, t := range timers {
		if t != nil {
			t.Stop()
		}
	}
	if p.in != nil {
		p.in.closeByManager()
	}
}
