package proc

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/coder/quartz"

	"github.com/procvisor/proc/internal/testkit"
)

// The shared toolkit of the package's own tests (package proc); the
// tests of the API (package proc_test) have helpers_*_test.go.

// internalManager returns a context that ends after d, and a Manager of
// opts closed at the end of the test (before the context is cancelled).
func internalManager(t testing.TB, d time.Duration, opts Options) (context.Context, *Manager) {
	t.Helper()
	ctx := testkit.Ctx(t, d)
	m := NewManager(opts)
	t.Cleanup(func() { _ = m.Close() })
	return ctx, m
}

// internalMockManager returns a Manager on a mock clock, closed at the
// end of the test.
func internalMockManager(t testing.TB) (*quartz.Mock, *Manager) {
	t.Helper()
	mClock := quartz.NewMock(t)
	m := NewManager(Options{Clock: mClock})
	t.Cleanup(func() { _ = m.Close() })
	return mClock, m
}

// endsWaited reports whether a waitEnded caller made the Manager's channel
// of ended records: it waits on it.
func endsWaited(m *Manager) bool {
	m.endsMu.Lock()
	defer m.endsMu.Unlock()
	return m.ends != nil
}

// inParallel runs f on n goroutines at once, and returns once every one
// returned.
func inParallel(n int, f func()) {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	wg.Wait()
}

// eachParallel runs f as parallel subtests, one for each of names.
var eachParallel = testkit.EachParallel

// bothWays runs f as two parallel subtests, named off and on, with on
// false and then true.
func bothWays(t *testing.T, off, on string, f func(t *testing.T, on bool)) {
	t.Helper()
	eachParallel(t, []string{off, on}, func(t *testing.T, name string) { f(t, name == on) })
}

// BothWays, EachParallel and InParallel are bothWays, eachParallel and
// inParallel for the tests of the API.
var (
	BothWays     = bothWays
	EachParallel = eachParallel
	InParallel   = inParallel
)

// sharingBuffer returns a buffer of 4 head and 4 tail bytes holding data,
// which shares its polls with the returned signal, as a Manager's records
// share theirs.
func sharingBuffer(data string) (*HeadTailBuffer, *pollSignal) {
	sig := new(pollSignal)
	b := NewHeadTailBuffer(4, 4, 0)
	b.sharePolls(sig)
	_, _ = b.Write([]byte(data))
	return b, sig
}
