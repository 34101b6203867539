package proc

import (
	"context"
	"time"

	"golang.org/x/xerrors"
)

// listenPoll is how often WaitListening looks: a listener is noticed
// within 50 ms, with room for the look itself on a busy machine.
const listenPoll = 25 * time.Millisecond

// WaitListening returns the first listener the process tree opens on port,
// or one it has already (port 0: on any port), as [Process.Activity] lists
// them: a listening TCP socket or a bound UDP socket of any member, a
// grandchild's included. When several are there at the first look, it
// returns the one with the lowest port. It looks at once, then every 25
// ms on Options.Clock (a ticker tagged "activity", "listen"), so a new
// listener is noticed within 50 ms.
//
// It returns an error wrapping ErrNotRunning when the record becomes final
// first, and one wrapping ctx.Err() when ctx ends first. A port below 0 or
// above 65535 is ErrInvalid. It starts no goroutine and is safe for
// concurrent use. Linux only, with Activity's rights and limits;
// elsewhere it returns an error wrapping ErrUnsupported at once.
func (p *Process) WaitListening(ctx context.Context, port int) (Listener, error) {
	const op = "wait listening"
	if port < 0 || port > 65535 {
		return Listener{}, xerrors.Errorf("%s of %q: port %d is outside 0-65535: %w", op, p.info.ID, port, ErrInvalid)
	}
	if l, ok, err := p.listening(op, port); err != nil || ok {
		return l, err
	}
	ticker := p.m.clock.NewTicker(listenPoll, "activity", "listen")
	defer ticker.Stop("activity", "listen")
	for {
		select {
		case <-p.done:
			return Listener{}, xerrors.Errorf("%s of %q: %w", op, p.info.ID, ErrNotRunning)
		case <-ctx.Done():
			return Listener{}, xerrors.Errorf("%s of %q: %w", op, p.info.ID, ctx.Err())
		case <-ticker.C:
		}
		if l, ok, err := p.listening(op, port); err != nil || ok {
			return l, err
		}
	}
}

// listening looks at the tree once, as Activity does (sparsely, sharing
// what the record's other looks read), and returns its first listener on
// port (0: any), sorted by port.
func (p *Process) listening(op string, port int) (Listener, bool, error) {
	a, err := p.lookAt(op, true, true)
	if err != nil {
		return Listener{}, false, err
	}
	listeners := a.Listeners
	for _, l := range listeners {
		if port == 0 || l.Port == port {
			return l, true, nil
		}
	}
	return Listener{}, false, nil
}
