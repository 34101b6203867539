package proc

// The post-exit drain (design section 5); the pump it stops is pump.go's.
//
// Output goes through pipes the library owns, one pump goroutine per stream
// reading into the stream's HeadTailBuffer. exec.Cmd's own copying
// goroutines are not used: cmd.Wait would wait for them, and so for any
// grandchild that holds the pipe. Instead, after the child is reaped:
//
//   - EOF on every pipe ends the drain at once (no added delay);
//   - otherwise it waits for DrainQuiet without a byte, every chunk
//     restarting the window, and never longer than DrainTimeout in all;
//   - then each pump is stopped by an expired read deadline, makes one last
//     bounded non-blocking pass over the bytes already in the pipe, and
//     ends. Nothing ready is lost to a timer race.
//
// The windows are Options.Clock timers; the deadline is only the means of
// stopping a blocked read.

// drain runs on the exit goroutine after the child was reaped and returns
// once every pump has ended.
func (p *Process) drain() {
	remaining := len(p.pumps)
	for remaining > 0 && tryRecv(p.pumpDone) {
		remaining--
	}
	if remaining == 0 {
		return // the common case: every pipe is at EOF already
	}
	// Bytes read before the exit do not open the quiet window.
	select {
	case <-p.activity:
	default:
	}
	clock := p.m.clock
	quiet := clock.NewTimer(p.drainQuiet, tagsDrainQuiet...)
	defer quiet.Stop(tagsDrainQuiet...)
	hardCap := clock.NewTimer(p.drainTimeout, tagsDrainCap...)
	defer hardCap.Stop(tagsDrainCap...)

	capped := false
wait:
	for remaining > 0 {
		select {
		case <-p.pumpDone:
			remaining--
		case <-p.activity:
			quiet.Reset(p.drainQuiet, tagsDrainQuiet...)
		case <-quiet.C:
			if p.pumpsHolding() {
				// Bytes are waiting for a follower to read them, not
				// missing: a quiet window starts when it has.
				quiet.Reset(p.drainQuiet, tagsDrainQuiet...)
				continue
			}
			break wait
		case <-hardCap.C:
			capped = true
			break wait
		}
	}
	for _, pu := range p.pumps {
		pu.stop()
	}
	// A stopped pump ends after one bounded pass, unless it is blocked in
	// a tee's Write: that tee is cut off once DrainTimeout has passed since
	// the exit, so that the record can become final.
	capC := hardCap.C
	for remaining > 0 {
		if capped {
			p.cutOffTees()
			if p.onlyTeesBlocked() {
				return
			}
			capC = nil
		}
		select {
		case <-p.pumpDone:
			remaining--
		case <-capC:
			capped = true
		}
	}
}

// The drain's clock tags, made once (tagsProcessStart says why).
var (
	tagsDrainQuiet = []string{"drain", "quiet"}
	tagsDrainCap   = []string{"drain", "cap"}
)

// pumpsHolding reports whether a pump is waiting for a follower to read
// (pump.writeFollowed), which MaxFollowHold bounds.
func (p *Process) pumpsHolding() bool {
	for _, pu := range p.pumps {
		if pu.holding.Load() {
			return true
		}
	}
	return false
}

// cutOffTees stops the tee of every pump that has not ended: none of them
// starts another Write.
func (p *Process) cutOffTees() {
	for _, pu := range p.pumps {
		if !pu.ended.Load() {
			pu.tee.cutOff(p.drainTimeout)
		}
	}
}

// onlyTeesBlocked reports whether every pump that has not ended is inside
// a tee's Write: the drain waits for the others, which end promptly, and
// leaves those.
func (p *Process) onlyTeesBlocked() bool {
	for _, pu := range p.pumps {
		if !pu.ended.Load() && (pu.tee == nil || !pu.tee.writing.Load()) {
			return false
		}
	}
	return true
}
