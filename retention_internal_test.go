package proc

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestRetainedOrder pins the order Manager keeps at insert (m.order) and
// List's order built from it: running records first, then final ones,
// each newest first by start time, the start sequence breaking ties, also
// when records arrive out of start order and are dropped from the middle.
func TestRetainedOrder(t *testing.T) {
	t.Parallel()
	mClock, m := internalMockManager(t)
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

// TestOrderIndexMiss: a record the binary search of m.order does not find
// (never expected: one missing from the order, or an order not sorted by
// startedBefore) is looked for by identity, and dropping it never drops
// another record from the order (the place it would go belongs to a
// neighbour, or is past the end).
func TestOrderIndexMiss(t *testing.T) {
	t.Parallel()
	mClock, m := internalMockManager(t)
	base := mClock.Now()
	procs := map[string]*Process{}
	for i, id := range []string{"a", "b", "c", "d", "e"} {
		info := &Info{ID: id, StartedAt: base.Add(time.Duration(i) * time.Second)}
		closed := make(chan struct{})
		close(closed)
		p := &Process{m: m, info: info, seq: uint64(i + 1), out: NewHeadTailBuffer(0, 0, 0), fin: &finalStatus{}, done: closed}
		p.ended.Store(true) // Close has no exit goroutine to wait for
		procs[id] = p
	}
	ids := func() []string {
		var got []string
		for _, p := range m.order {
			got = append(got, p.info.ID)
		}
		return got
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range []string{"a", "b", "c", "d"} {
		m.addLocked(procs[id])
	}
	for id, p := range procs {
		want := slices.Index(m.order, p)
		if got := m.orderIndexLocked(p); got != want {
			t.Errorf("orderIndexLocked(%s) = %d; want %d", id, got, want)
		}
	}

	// In m.records but not in m.order: its place is past the end ("e"),
	// or a neighbour's ("b" once taken out of the order by hand).
	m.records["e"] = procs["e"]
	m.dropLocked(procs["e"], base)
	m.order = slices.Delete(m.order, 1, 2)
	m.dropLocked(procs["b"], base)
	if got, want := ids(), []string{"a", "c", "d"}; !slices.Equal(got, want) {
		t.Fatalf("after dropping records missing from the order: order %q; want %q", got, want)
	}

	// Not sorted: "a" now seems to start last, and the search for it
	// lands past the end.
	procs["a"].info.StartedAt = base.Add(time.Hour)
	if got := m.orderIndexLocked(procs["a"]); got != 0 {
		t.Fatalf("orderIndexLocked(a) in an unsorted order = %d; want 0", got)
	}
	m.dropLocked(procs["a"], base)
	if got, want := ids(), []string{"c", "d"}; !slices.Equal(got, want) {
		t.Fatalf("after dropping a record out of place: order %q; want %q", got, want)
	}
}

// TestWaitEnded pins how Close and Scope.Close wait for exit goroutines
// (waitEnded): on the Manager's one channel, until every record given
// marked its exit goroutine ended, and no sooner.
func TestWaitEnded(t *testing.T) {
	t.Parallel()
	ctx, m := internalManager(t, 30*time.Second, Options{})
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
		for !endsWaited(m) {
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

// TestDeleteAt pins retention's removal from m.order and m.finals: the
// element at i goes and the others keep their order, wherever i is; a
// front removal clears the slot it leaves behind, so that the array does
// not keep a dropped record alive.
func TestDeleteAt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		i    int
		want []string
	}{
		{0, []string{"b", "c", "d"}},
		{1, []string{"a", "c", "d"}},
		{3, []string{"a", "b", "c"}},
	} {
		if got := deleteAt([]string{"a", "b", "c", "d"}, tc.i); !slices.Equal(got, tc.want) {
			t.Errorf("deleteAt([a b c d], %d) = %v; want %v", tc.i, got, tc.want)
		}
	}
	s := []*Process{{}, {}}
	backing := s[:cap(s)]
	if got := deleteAt(s, 0); len(got) != 1 || got[0] != backing[1] {
		t.Errorf("deleteAt(s, 0) = %p; want [%p]", got, backing[1])
	}
	if backing[0] != nil {
		t.Errorf("deleteAt(s, 0) left the dropped record in the array's first slot")
	}
}
