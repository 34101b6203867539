package proc

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/coder/quartz"
)

// TestRetainedOrder pins the order Manager keeps at insert (m.order) and
// List's order built from it: running records first, then final ones,
// each newest first by start time, the start sequence breaking ties, also
// when records arrive out of start order and are dropped from the middle.
func TestRetainedOrder(t *testing.T) {
	t.Parallel()
	mClock := quartz.NewMock(t)
	m := NewManager(Options{Clock: mClock})
	t.Cleanup(func() { _ = m.Close() })
	base := mClock.Now()
	closed := make(chan struct{})
	close(closed)
	records := []struct {
		id    string
		at    time.Duration // start time after base
		seq   uint64
		final bool
	}{
		{"a", 1, 1, true}, {"b", 3, 2, false}, {"c", 2, 3, true},
		{"d", 3, 4, true}, {"e", 0, 5, false}, {"f", 2, 6, false},
	}
	procs := map[string]*Process{}
	m.mu.Lock()
	for _, r := range records {
		info := &Info{ID: r.id, Running: true, StartedAt: base.Add(r.at * time.Second)}
		p := &Process{m: m, info: info, seq: r.seq, out: NewHeadTailBuffer(0, 0, 0), done: make(chan struct{})}
		if r.final {
			p.fin, p.done = &finalStatus{}, closed
		}
		procs[r.id] = p
		p.ended.Store(true)
		m.addLocked(p)
	}
	m.mu.Unlock()

	check := func(wantList, wantOrder []string) {
		t.Helper()
		var got []string
		for _, info := range m.List() {
			if info.Running != !procs[info.ID].isFinal() {
				t.Errorf("List: %s has Running %v; want %v", info.ID, info.Running, !procs[info.ID].isFinal())
			}
			got = append(got, info.ID)
		}
		if !slices.Equal(got, wantList) {
			t.Errorf("List() = %q; want %q", got, wantList)
		}
		m.mu.Lock()
		var order []string
		for _, p := range m.order {
			order = append(order, p.info.ID)
		}
		m.mu.Unlock()
		if !slices.Equal(order, wantOrder) {
			t.Errorf("order = %q; want %q", order, wantOrder)
		}
	}
	check([]string{"b", "f", "e", "d", "c", "a"}, []string{"e", "a", "c", "f", "b", "d"})

	m.mu.Lock()
	m.dropLocked(procs["c"], base)
	m.dropLocked(procs["a"], base)
	m.mu.Unlock()
	check([]string{"b", "f", "e", "d"}, []string{"e", "f", "b", "d"})
}

// TestFinalRecordKeepsOneStatus pins what a final record holds: its final
// status, made once, is what every final Info (Info, List, the final and
// removed events) is composed from and points into, so that repeated
// reads return equal values (I1); and its tree, seen empty, is forgotten
// (a signal is ErrNotRunning).
func TestFinalRecordKeepsOneStatus(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := NewManager(Options{})
	t.Cleanup(func() { _ = m.Close() })
	p, err := m.Start(StartRequest{Args: []string{"echo", "hello"}})
	if err != nil {
		t.Fatalf("Start(echo) = %v", err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	info := p.Info()
	if info.Running || info.ExitCode == nil || *info.ExitCode != 0 || info.OutputBytes != 6 {
		t.Fatalf("Info() = %+v; want final, exit code 0, 6 bytes", info)
	}
	if info.ExitCode != &p.fin.code || info.Usage != &p.fin.usage {
		t.Errorf("Info() points to %p and %p; want the final status's %p and %p", info.ExitCode, info.Usage, &p.fin.code, &p.fin.usage)
	}
	if again := p.Info(); !reflect.DeepEqual(again, info) || again.ExitCode != info.ExitCode || again.Usage != info.Usage {
		t.Errorf("Info() again = %+v; want %+v, pointing to the same status", again, info)
	}
	if list := m.List(); len(list) != 1 || !reflect.DeepEqual(list[0], info) {
		t.Errorf("List() = %+v; want [%+v]", list, info)
	}
	if err := m.Remove(p.ID()); err != nil {
		t.Fatalf("Remove() = %v", err)
	}
	evs, _, _ := m.Events(0, 0)
	var kinds []EventKind
	for _, ev := range evs {
		if ev.ID != p.ID() {
			continue
		}
		kinds = append(kinds, ev.Kind)
		switch ev.Kind {
		case EventStarted:
			if ev.Info != p.info {
				t.Errorf("the started event's Info is a copy; want the record's static Info shared")
			}
		case EventFinal, EventRemoved:
			if ev.Info == nil || !reflect.DeepEqual(*ev.Info, info) || ev.Info.ExitCode != info.ExitCode || ev.Info.Usage != info.Usage {
				t.Errorf("the %s event's Info is %+v; want %+v, pointing to the final status", ev.Kind, ev.Info, info)
			}
		}
	}
	if want := []EventKind{EventStarted, EventFinal, EventRemoved}; !slices.Equal(kinds, want) {
		t.Errorf("events of the record: %q; want %q", kinds, want)
	}
	if got := p.tree(); got != goneTree {
		t.Errorf("a final record's tree is %+v; want it forgotten (goneTree)", got)
	}
	if err := p.Signal(Kill); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Signal(Kill) of a final record = %v; want ErrNotRunning", err)
	}
}

// TestWaitEnded pins how Close and Scope.Close wait for exit goroutines
// (waitEnded): on the Manager's one channel, until every record given
// marked its exit goroutine ended, and no sooner.
func TestWaitEnded(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := NewManager(Options{})
	t.Cleanup(func() { _ = m.Close() })
	a, b := &Process{m: m}, &Process{m: m}
	returned := make(chan struct{})
	// Ends once a and b are marked ended (below).
	go func() {
		defer close(returned)
		m.waitEnded([]*Process{a, b})
	}()
	// waiting returns once the waiter made the Manager's channel: it is
	// blocked on it.
	waiting := func() {
		t.Helper()
		for {
			m.endsMu.Lock()
			made := m.ends != nil
			m.endsMu.Unlock()
			if made {
				return
			}
			if ctx.Err() != nil {
				t.Fatal("waitEnded never waited")
			}
			runtime.Gosched()
		}
	}
	waiting()
	a.endedNow() // wakes it, and clears the channel
	waiting()    // now for b
	select {
	case <-returned:
		t.Fatal("waitEnded returned before b ended")
	default:
	}
	b.endedNow()
	select {
	case <-returned:
	case <-ctx.Done():
		t.Fatal("waitEnded did not return once both ended")
	}
}

// TestStdinPublishesExit pins that the exit goroutine publishes the
// child's reaping through the stdin pipe (a write that met the exit waits
// for it), and that a record without Stdin keeps no pipe.
func TestStdinPublishesExit(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := NewManager(Options{})
	t.Cleanup(func() { _ = m.Close() })
	p, err := m.Start(StartRequest{Args: []string{"cat"}, Stdin: true})
	if err != nil {
		t.Fatalf("Start(cat) = %v", err)
	}
	if p.in.hasExited() {
		t.Error("the stdin pipe says the child exited while cat waits for input")
	}
	if err := p.CloseStdin(); err != nil {
		t.Fatalf("CloseStdin() = %v", err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	if !p.in.hasExited() {
		t.Error("the stdin pipe does not say the child exited once the record is final")
	}
	q, err := m.Start(StartRequest{Args: []string{"true"}})
	if err != nil {
		t.Fatalf("Start(true) = %v", err)
	}
	if q.in != nil {
		t.Errorf("a record without Stdin has a stdin pipe %+v", q.in)
	}
}
