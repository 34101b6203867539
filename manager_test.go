package proc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"cdr.dev/slog/v3"
	"github.com/coder/quartz"

	"github.com/procvisor/proc"
)

// Tests of the Manager: retention (DESIGN.md section 7), bad input
// (section 8), logging (section 9), the contract of section 4 around
// IDs, scopes, the environment and the work dir, and the conveniences Run
// and StartOrGet (section 11).

// mgr-echo prints its arguments joined by spaces and a newline.
var _ = helper("mgr-echo", func(args []string) int {
	fmt.Println(strings.Join(args, " "))
	return 0
})

// mgr-exit exits with the code in args[0].
var _ = helper("mgr-exit", func(args []string) int {
	code, err := strconv.Atoi(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return code
})

// mgr-block runs until it is signalled.
var _ = helper("mgr-block", func([]string) int {
	time.Sleep(time.Hour)
	return 0
})

// mgr-env prints its environment, each entry followed by a NUL byte.
var _ = helper("mgr-env", func([]string) int {
	var b strings.Builder
	for _, kv := range os.Environ() {
		b.WriteString(kv)
		b.WriteByte(0)
	}
	_, _ = os.Stdout.WriteString(b.String())
	return 0
})

// mgr-pwd prints its working directory.
var _ = helper("mgr-pwd", func([]string) int {
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Print(wd)
	return 0
})

// mgrSentinels are the package's sentinel errors.
var mgrSentinels = []error{
	proc.ErrNotFound, proc.ErrNotRunning, proc.ErrRunning, proc.ErrClosed,
	proc.ErrDuplicateID, proc.ErrLimit, proc.ErrInvalid, proc.ErrUnsupported,
}

// mgrSentinelsIn returns the sentinels err wraps.
func mgrSentinelsIn(err error) []error {
	var in []error
	for _, s := range mgrSentinels {
		if errors.Is(err, s) {
			in = append(in, s)
		}
	}
	return in
}

// mgrCheckErr fails unless err wraps want and no other sentinel, and its
// message contains every one of mention (case-insensitive).
func mgrCheckErr(t testing.TB, call string, err, want error, mention ...string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s = %v; want an error wrapping %v", call, err, want)
		return
	}
	if in := mgrSentinelsIn(err); len(in) != 1 {
		t.Errorf("%s = %v; wraps sentinels %v, want only %v", call, err, in, want)
	}
	for _, s := range mention {
		if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(s)) {
			t.Errorf("%s = %q; want the message to mention %q", call, err, s)
		}
	}
}

// mgrWantRefused starts req through s (m or one of its scopes) and fails
// unless the start is refused as mgrCheckErr(what, want, mention) says and
// m keeps no record of it.
func mgrWantRefused(t testing.TB, m *proc.Manager, s starter, what string, req proc.StartRequest, want error, mention ...string) {
	t.Helper()
	before := len(m.List())
	p, err := s.Start(req)
	mgrCheckErr(t, what, err, want, mention...)
	if p != nil {
		t.Errorf("%s returned process %s with its error", what, p.ID())
	}
	if after := len(m.List()); after != before {
		t.Errorf("List() has %d records after %s; want the %d before", after, what, before)
	}
}

func mgrBlockReq() proc.StartRequest { return helperReq("mgr-block") }

func mgrExitReq(code int) proc.StartRequest { return helperReq("mgr-exit", strconv.Itoa(code)) }

// mgrIDs returns the IDs of infos, in order.
func mgrIDs(infos []proc.Info) []string {
	ids := make([]string, len(infos))
	for i, info := range infos {
		ids[i] = info.ID
	}
	return ids
}

// mgrReapTrapped returns a Manager on opts with a mock clock whose reap
// timers are trapped. The trap is closed when the test ends, before the
// Manager is.
func mgrReapTrapped(t *testing.T, opts proc.Options) (*quartz.Mock, *quartz.Trap, *proc.Manager) {
	t.Helper()
	mClock := quartz.NewMock(t)
	opts.Clock = mClock
	m := newManager(t, opts)
	trap := mClock.Trap().AfterFunc("manager", "reap")
	t.Cleanup(trap.Close)
	return mClock, trap, m
}

// mgrKill kills p's group and waits until p is final.
func mgrKill(ctx context.Context, t testing.TB, p *proc.Process) {
	t.Helper()
	if err := p.Signal(proc.Kill); err != nil && !errors.Is(err, proc.ErrNotRunning) {
		t.Fatalf("Signal(%s, Kill) = %v", p.ID(), err)
	}
	waitFinal(ctx, t, p)
}

// mgrWantListed fails unless List and Get both show id.
func mgrWantListed(t testing.TB, m *proc.Manager, id string) {
	t.Helper()
	if _, err := m.Get(id); err != nil {
		t.Errorf("Get(%s) = %v; want the record", id, err)
	}
	if ids := mgrIDs(m.List()); !slices.Contains(ids, id) {
		t.Errorf("List() = %v; want it to hold %s", ids, id)
	}
}

// mgrWantGone fails unless id is neither listed nor found.
func mgrWantGone(t testing.TB, m *proc.Manager, id string) {
	t.Helper()
	if p, err := m.Get(id); !errors.Is(err, proc.ErrNotFound) {
		t.Errorf("Get(%s) = %v, %v; want ErrNotFound", id, p, err)
	}
	if ids := mgrIDs(m.List()); slices.Contains(ids, id) {
		t.Errorf("List() = %v; want %s dropped", ids, id)
	}
}

// mgrEnviron returns the environment printed by the mgr-env helper p.
func mgrEnviron(ctx context.Context, t testing.TB, p *proc.Process) []string {
	t.Helper()
	snap := waitFinal(ctx, t, p)
	if code := exitCode(t, snap.Info); code != 0 {
		t.Fatalf("mgr-env exit code = %d; output %q", code, snap.Output.Text)
	}
	c := p.ReadSince(0, 0)
	if c.Lost != 0 || c.Next != c.End {
		t.Fatalf("ReadSince(0, 0) = lost %d, next %d, end %d; want the whole environment (raise HeadBytes)", c.Lost, c.Next, c.End)
	}
	env := strings.Split(string(c.Data), "\x00")
	if env[len(env)-1] != "" {
		t.Fatalf("mgr-env output does not end in NUL: %q", c.Data)
	}
	return env[:len(env)-1]
}

// mgrEnvOwn runs req (for helper mgr-env) on m and returns the child's
// environment without what the OS adds (SYSTEMROOT, ...), sorted.
func mgrEnvOwn(ctx context.Context, t testing.TB, m *proc.Manager, req proc.StartRequest) []string {
	t.Helper()
	req.HeadBytes = 1 << 20
	env := mgrEnviron(ctx, t, mustStart(t, m, req))
	return mgrSorted(slices.DeleteFunc(env, func(kv string) bool { k, _, _ := strings.Cut(kv, "="); return osAddsEnv(k) }))
}

// mgrEnvReq runs mgr-env with room for a large environment.
func mgrEnvReq() proc.StartRequest {
	req := helperReq("mgr-env")
	req.HeadBytes = 1 << 20
	return req
}

// mgrEntries returns the entries of env named name.
func mgrEntries(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == name {
			out = append(out, kv)
		}
	}
	return out
}

// mgrBaseEnv is os.Environ() plus the variables of mgrHelperReq, sorted,
// without the names in drop.
func mgrBaseEnv(mode string, drop ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !slices.Contains(drop, k) && k != helperEnv && k != "GORACE" {
			env = append(env, kv)
		}
	}
	env = append(env, helperEnv+"="+mode, "GORACE="+helperGorace)
	sort.Strings(env)
	return env
}

func mgrSorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// mgrLogSink records every entry logged to it. An entry at Error or above
// fails the test, as slogtest does: expected failures are Warn or below.
type mgrLogSink struct {
	t testing.TB
	// onEntry, if set, is called after the entry was recorded.
	onEntry func(slog.SinkEntry)

	mu      sync.Mutex
	entries []slog.SinkEntry
}

func (s *mgrLogSink) LogEntry(_ context.Context, e slog.SinkEntry) {
	s.mu.Lock()
	s.entries = append(s.entries, e)
	s.mu.Unlock()
	if e.Level >= slog.LevelError {
		s.t.Errorf("logged at %v: %q %v", e.Level, e.Message, e.Fields)
	}
	if s.onEntry != nil {
		s.onEntry(e)
	}
}

func (*mgrLogSink) Sync() {}

func (s *mgrLogSink) logger() slog.Logger {
	return slog.Make(s).Leveled(slog.LevelDebug)
}

func (s *mgrLogSink) snapshot() []slog.SinkEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.entries)
}

// mgrEntryText renders every part of e that could carry a value.
func mgrEntryText(e slog.SinkEntry) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %v", e.Message, e.LoggerNames)
	for _, f := range e.Fields {
		fmt.Fprintf(&b, " %s=%+v", f.Name, f.Value)
	}
	return b.String()
}

// TestRetentionReapTimer pins section 7 with a mock clock: a final record is
// kept for exactly RetainExited after it became final, the reap timer drops
// it without anyone calling List, re-arms for the next final record with
// that record's remaining retention, and never drops a running record.
func TestRetentionReapTimer(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	const retain = 5 * time.Minute
	mClock, trap, m := mgrReapTrapped(t, proc.Options{RetainExited: retain})

	// A record that is not final is never dropped, however old.
	running := mustStart(t, m, mgrBlockReq())
	first := mustStart(t, m, mgrExitReq(0))
	if info := waitFinal(ctx, t, first).Info; !info.ExitedAt.Equal(mClock.Now()) {
		t.Errorf("ExitedAt = %v; want the mock clock's %v", info.ExitedAt, mClock.Now())
	}
	releaseTrapped(ctx, t, trap, retain, "reap timer for the first final record")
	mgrWantListed(t, m, first.ID())

	mClock.Advance(retain - time.Nanosecond).MustWait(ctx)
	mgrWantListed(t, m, first.ID())
	// The reap runs on the timer; with no final record left it does not
	// re-arm (a re-arm would be held by the trap and this wait would hang).
	mClock.Advance(time.Nanosecond).MustWait(ctx)
	mgrWantGone(t, m, first.ID())
	if d, ok := mClock.Peek(); ok {
		t.Errorf("a timer is still armed (fires in %v) with no final record left to reap", d)
	}
	if ids := mgrIDs(m.List()); !slices.Equal(ids, []string{running.ID()}) {
		t.Errorf("List() after the reap = %v; want the running record [%s]", ids, running.ID())
	}
	// The Process value stays readable after its record was dropped.
	if info := first.Info(); info.Running || exitCode(t, info) != 0 {
		t.Errorf("dropped record's Info() = running %v, exit %v; want final, 0", info.Running, info.ExitCode)
	}

	// With nothing armed, the next record to become final arms the full
	// retention again.
	mgrKill(ctx, t, running)
	releaseTrapped(ctx, t, trap, retain, "reap timer after the final records were all dropped")
	mgrWantListed(t, m, running.ID())

	// A second record becomes final 2m later. The armed timer is not
	// re-armed for it: a second AfterFunc would be caught by the trap below
	// with the wrong duration.
	mClock.Advance(2 * time.Minute).MustWait(ctx)
	second := mustStart(t, m, mgrExitReq(0))
	waitFinal(ctx, t, second)

	mClock.Advance(retain - 2*time.Minute - time.Nanosecond).MustWait(ctx)
	mgrWantListed(t, m, running.ID())
	mgrWantListed(t, m, second.ID())

	w := mClock.Advance(time.Nanosecond)
	releaseTrapped(ctx, t, trap, 2*time.Minute, "reap timer re-armed for the second record's remaining retention")
	w.MustWait(ctx)
	mgrWantGone(t, m, running.ID())
	if ids := mgrIDs(m.List()); !slices.Equal(ids, []string{second.ID()}) {
		t.Errorf("List() after the second reap = %v; want [%s]", ids, second.ID())
	}

	mClock.Advance(2*time.Minute - time.Nanosecond).MustWait(ctx)
	mgrWantListed(t, m, second.ID())
	mClock.Advance(time.Nanosecond).MustWait(ctx)
	mgrWantGone(t, m, second.ID())
	if d, ok := mClock.Peek(); ok {
		t.Errorf("a timer is still armed (fires in %v) with no final record left to reap", d)
	}
}

// TestRetentionCloseStopsTimer pins that Close stops an armed reap timer.
func TestRetentionCloseStopsTimer(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	mClock, trap, m := mgrReapTrapped(t, proc.Options{})

	waitFinal(ctx, t, mustStart(t, m, mgrExitReq(0)))
	releaseTrapped(ctx, t, trap, proc.DefaultRetainExited, "reap timer with the default retention")
	if _, ok := mClock.Peek(); !ok {
		t.Fatalf("no timer armed after a record became final")
	}
	if err := m.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if d, ok := mClock.Peek(); ok {
		t.Errorf("a timer is still armed (fires in %v) after Close", d)
	}
}

// TestRetentionOnAccess pins that retention is also enforced on access: with
// the reap timer held back, Get and List drop an expired record themselves.
func TestRetentionOnAccess(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 10*time.Second)
	const retain = time.Minute
	mClock, trap, m := mgrReapTrapped(t, proc.Options{RetainExited: retain})

	p := mustStart(t, m, mgrExitReq(0))
	waitFinal(ctx, t, p)
	// Hold the reap timer's creation: no timer exists until the release.
	call := trap.MustWait(ctx)

	mClock.Advance(retain - time.Nanosecond).MustWait(ctx)
	mgrWantListed(t, m, p.ID())
	mClock.Advance(time.Nanosecond).MustWait(ctx)
	if got, err := m.Get(p.ID()); !errors.Is(err, proc.ErrNotFound) {
		t.Errorf("Get(%s) at RetainExited after final = %v, %v; want ErrNotFound", p.ID(), got, err)
	}
	if ids := mgrIDs(m.List()); len(ids) != 0 {
		t.Errorf("List() at RetainExited after final = %v; want empty", ids)
	}
	call.MustRelease(ctx)
}

// TestRetentionMaxRetained pins that at most MaxRetained final records are
// kept, the earliest to become final dropped first, and that records that
// are not final are neither dropped nor counted.
func TestRetentionMaxRetained(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{MaxRetained: 3})

	running := mustStart(t, m, mgrBlockReq())
	var ids []string
	for i := range 5 {
		p := mustStart(t, m, mgrExitReq(0))
		waitFinal(ctx, t, p)
		ids = append(ids, p.ID())
		kept := ids[max(0, len(ids)-3):]
		want := []string{running.ID()}
		for j := len(kept) - 1; j >= 0; j-- {
			want = append(want, kept[j])
		}
		if got := mgrIDs(m.List()); !slices.Equal(got, want) {
			t.Fatalf("List() after %d final records = %v; want %v (running, then the 3 newest)", i+1, got, want)
		}
	}
	for _, id := range ids[:2] {
		if _, err := m.Get(id); !errors.Is(err, proc.ErrNotFound) {
			t.Errorf("Get(%s) of one of the 2 earliest final records = %v; want ErrNotFound", id, err)
		}
	}
	if _, err := m.Get(running.ID()); err != nil {
		t.Errorf("Get(%s) of the running record = %v; want it kept", running.ID(), err)
	}
	mgrKill(ctx, t, running)
}

// TestMaxRunning pins that MaxRunning counts records that are not final and
// refuses starts past it with ErrLimit, and that a slot is free once a
// record is final.
func TestMaxRunning(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{MaxRunning: 2})

	a := mustStart(t, m, mgrBlockReq())
	b := mustStart(t, m, mgrBlockReq())
	mgrWantRefused(t, m, m, "Start(third)", mgrExitReq(0), proc.ErrLimit, "2")
	mgrWantRefused(t, m, m.Scope("alice"), "Scope.Start(third)", mgrExitReq(0), proc.ErrLimit)

	mgrKill(ctx, t, a)
	c, err := m.Start(mgrExitReq(0))
	if err != nil {
		t.Fatalf("Start() after a record became final = %v; want a free slot", err)
	}
	waitFinal(ctx, t, c)
	mgrKill(ctx, t, b)
}

// TestMaxRunningConcurrent pins that concurrent starts never exceed
// MaxRunning: a start in progress holds its slot.
func TestMaxRunningConcurrent(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	const limit, n = 3, 16
	m := newManager(t, proc.Options{MaxRunning: limit})

	started := 0
	for _, err := range atOnce(ctx, t, n, func(int) error { _, err := m.Start(mgrBlockReq()); return err }) {
		switch {
		case err == nil:
			started++
		case !errors.Is(err, proc.ErrLimit):
			t.Errorf("concurrent Start() = %v; want nil or ErrLimit", err)
		}
	}
	if started != limit {
		t.Errorf("%d of %d concurrent starts succeeded with MaxRunning %d; want %d", started, n, limit, limit)
	}
	if ids := mgrIDs(m.List()); len(ids) != started {
		t.Errorf("List() = %v; want the %d started records", ids, started)
	}
}

// TestFinalAccountingAtDone checks that by the time a record's Done
// channel closes, the Manager already treats it as final: it no longer
// counts against MaxRunning, and it counts against MaxRetained.
func TestFinalAccountingAtDone(t *testing.T) {
	t.Parallel()

	t.Run("max-running", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		// The first record to become final arms the reap timer after Done
		// closed: trapping that call holds its exit goroutine right there.
		_, trap, m := mgrReapTrapped(t, proc.Options{MaxRunning: 1})
		p := mustStart(t, m, mgrExitReq(0))
		call := trap.MustWait(ctx)
		if !isDone(p) {
			t.Fatalf("the reap timer was armed before Done closed")
		}
		q, err := m.Start(mgrExitReq(0))
		call.MustRelease(ctx)
		if err != nil {
			t.Fatalf("Start() once the only record is final (Done closed) = %v; want a free slot", err)
		}
		waitFinal(ctx, t, q)
	})

	t.Run("max-retained", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		_, trap, m := mgrReapTrapped(t, proc.Options{MaxRetained: 1})

		first := mustStart(t, m, mgrExitReq(0))
		waitFinal(ctx, t, first)
		trap.MustWait(ctx).MustRelease(ctx)

		req := mgrExitReq(0)
		req.ID = "second"
		p := mustStart(t, m, req)
		waitFinal(ctx, t, p)
		if got := mgrIDs(m.List()); !slices.Equal(got, []string{"second"}) {
			t.Errorf("List() once the second record is final (Done closed) = %v; want [second] (MaxRetained 1)", got)
		}
	})
}

// TestRemove pins Manager.Remove: ErrRunning for a record that is not
// final, nil then ErrNotFound for a final one, ErrNotFound for unknown IDs.
func TestRemove(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})

	p := mustStart(t, m, mgrBlockReq())
	mgrCheckErr(t, "Remove(running)", m.Remove(p.ID()), proc.ErrRunning, p.ID())
	mgrWantListed(t, m, p.ID())

	mgrKill(ctx, t, p)
	if err := m.Remove(p.ID()); err != nil {
		t.Fatalf("Remove(final) = %v; want nil", err)
	}
	mgrWantGone(t, m, p.ID())
	mgrCheckErr(t, "Remove(removed)", m.Remove(p.ID()), proc.ErrNotFound, p.ID())
	mgrCheckErr(t, "Remove(unknown)", m.Remove("no-such-id"), proc.ErrNotFound, "no-such-id")
	if info := p.Info(); info.Running || info.ExitCode == nil {
		t.Errorf("removed record's Info() = running %v, exit %v; want it still readable and final", info.Running, info.ExitCode)
	}
}

// TestDuplicateID pins that an ID held by a running or retained record is
// refused with ErrDuplicateID, through any Scope, and is free after Remove.
func TestDuplicateID(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	const id = "job-1"

	req := mgrBlockReq()
	req.ID = id
	p := mustStart(t, m, req)
	if p.ID() != id {
		t.Fatalf("ID() = %q; want %q", p.ID(), id)
	}

	dup := mgrExitReq(0)
	dup.ID = id
	mgrWantRefused(t, m, m, "Start(running ID)", dup, proc.ErrDuplicateID, id)
	mgrWantRefused(t, m, m.Scope("bob"), "Scope(bob).Start(running ID of another owner)", dup, proc.ErrDuplicateID, id)
	mgrKill(ctx, t, p)
	mgrWantRefused(t, m, m, "Start(retained ID)", dup, proc.ErrDuplicateID, id)
	if got, err := m.Get(id); err != nil || got != p {
		t.Errorf("Get(%q) after refused duplicates = %v, %v; want the first record", id, got, err)
	}

	if err := m.Remove(id); err != nil {
		t.Fatalf("Remove(%q) = %v", id, err)
	}
	r := mustStart(t, m, dup)
	waitFinal(ctx, t, r)
	if got, err := m.Get(id); err != nil || got != r {
		t.Errorf("Get(%q) after restart = %v, %v; want the new record", id, got, err)
	}
}

// TestDuplicateIDConcurrent pins that of concurrent starts with one ID
// exactly one succeeds and the others get ErrDuplicateID.
func TestDuplicateIDConcurrent(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	const n = 16

	type result struct {
		p   *proc.Process
		err error
	}
	var started []*proc.Process
	for _, r := range atOnce(ctx, t, n, func(int) result {
		p, err := m.Start(withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.ID = "same" }))
		return result{p, err}
	}) {
		switch {
		case r.err == nil:
			started = append(started, r.p)
		case !errors.Is(r.err, proc.ErrDuplicateID):
			t.Errorf("Start(same ID) = %v; want nil or ErrDuplicateID", r.err)
		}
	}
	if len(started) != 1 {
		t.Fatalf("%d of %d concurrent starts with one ID succeeded; want exactly 1", len(started), n)
	}
	waitFinal(ctx, t, started[0])
	if ids := mgrIDs(m.List()); !slices.Equal(ids, []string{"same"}) {
		t.Errorf("List() = %v; want [same]", ids)
	}
}

// TestListOrder pins List's order: running records first, then newest
// first; with a mock clock all start times are equal and the start sequence
// breaks the ties.
func TestListOrder(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	mClock := quartz.NewMock(t)
	m := newManager(t, proc.Options{Clock: mClock})
	s := m.Scope("alice")

	oldRunning := mustStart(t, m, mgrBlockReq())
	finalB := mustStart(t, s, mgrExitReq(0))
	waitFinal(ctx, t, finalB)
	finalC := mustStart(t, m, mgrExitReq(0))
	waitFinal(ctx, t, finalC)
	newRunning := mustStart(t, s, mgrBlockReq())

	for _, p := range []*proc.Process{oldRunning, finalB, finalC, newRunning} {
		if at := p.Info().StartedAt; !at.Equal(mClock.Now()) {
			t.Fatalf("StartedAt of %s = %v; want the mock clock's %v", p.ID(), at, mClock.Now())
		}
	}
	want := []string{newRunning.ID(), oldRunning.ID(), finalC.ID(), finalB.ID()}
	if got := mgrIDs(m.List()); !slices.Equal(got, want) {
		t.Errorf("List() = %v; want %v (running newest first, then final newest first)", got, want)
	}
	wantScope := []string{newRunning.ID(), finalB.ID()}
	if got := mgrIDs(s.List()); !slices.Equal(got, wantScope) {
		t.Errorf("Scope.List() = %v; want %v", got, wantScope)
	}

	// Once final, a record sorts by start, not by when it became final.
	mgrKill(ctx, t, oldRunning)
	want = []string{newRunning.ID(), finalC.ID(), finalB.ID(), oldRunning.ID()}
	if got := mgrIDs(m.List()); !slices.Equal(got, want) {
		t.Errorf("List() after the oldest became final = %v; want %v", got, want)
	}
	mgrKill(ctx, t, newRunning)
}

// TestScopeIsolation pins that a Scope sees only its owner's records and
// reports any other as ErrNotFound, while the Manager sees all.
func TestScopeIsolation(t *testing.T) {
	t.Parallel()
	m := newManager(t, proc.Options{})
	alice, bob := m.Scope("alice"), m.Scope("bob")

	pa := mustStart(t, alice, mgrBlockReq())
	pb := mustStart(t, bob, mgrBlockReq())
	if got := pa.Info().Owner; got != "alice" {
		t.Errorf("Owner of a process started through Scope(alice) = %q; want alice", got)
	}

	if got, err := alice.Get(pb.ID()); !errors.Is(err, proc.ErrNotFound) || got != nil {
		t.Errorf("alice.Get(bob's) = %v, %v; want nil, ErrNotFound", got, err)
	} else {
		mgrCheckErr(t, "alice.Get(bob's)", err, proc.ErrNotFound)
	}
	mgrCheckErr(t, "alice.Signal(bob's, Kill)", alice.Signal(pb.ID(), proc.Kill), proc.ErrNotFound)
	mgrCheckErr(t, "alice.Signal(bob's, bogus)", alice.Signal(pb.ID(), "bogus"), proc.ErrNotFound)
	mgrCheckErr(t, "alice.Get(unknown)", func() error { _, err := alice.Get("nope"); return err }(), proc.ErrNotFound)
	if !pb.Info().Running {
		t.Errorf("bob's process is not running after alice's refused signal")
	}

	if got, err := alice.Get(pa.ID()); err != nil || got != pa {
		t.Errorf("alice.Get(own) = %v, %v; want the record", got, err)
	}
	if got := mgrIDs(alice.List()); !slices.Equal(got, []string{pa.ID()}) {
		t.Errorf("alice.List() = %v; want [%s]", got, pa.ID())
	}
	if got := mgrIDs(bob.List()); !slices.Equal(got, []string{pb.ID()}) {
		t.Errorf("bob.List() = %v; want [%s]", got, pb.ID())
	}
	if got := mgrIDs(m.List()); len(got) != 2 {
		t.Errorf("Manager.List() = %v; want both records", got)
	}
	for _, p := range []*proc.Process{pa, pb} {
		if got, err := m.Get(p.ID()); err != nil || got != p {
			t.Errorf("Manager.Get(%s) = %v, %v; want the record", p.ID(), got, err)
		}
	}

	// A record started through the Manager with an Owner belongs to it.
	req := mgrExitReq(0)
	req.Owner = "alice"
	pm := mustStart(t, m, req)
	if _, err := alice.Get(pm.ID()); err != nil {
		t.Errorf("alice.Get(started by Manager with Owner alice) = %v", err)
	}
	if _, err := bob.Get(pm.ID()); !errors.Is(err, proc.ErrNotFound) {
		t.Errorf("bob.Get(alice's, started by Manager) = %v; want ErrNotFound", err)
	}
}

// TestScopeStartOwner pins Scope.Start's Owner rule: empty takes the
// scope's owner, equal is fine, anything else is ErrInvalid and starts
// nothing.
func TestScopeStartOwner(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	s := m.Scope("alice")

	req := mgrExitReq(0)
	req.Owner = "mallory"
	mgrWantRefused(t, m, s, "Scope(alice).Start(Owner mallory)", req, proc.ErrInvalid, "mallory")

	for _, owner := range []string{"", "alice"} {
		req.Owner = owner
		p := mustStart(t, s, req)
		if info := waitFinal(ctx, t, p).Info; info.Owner != "alice" {
			t.Errorf("Scope(alice).Start(Owner %q): Owner = %q; want alice", owner, info.Owner)
		}
	}
}

// TestScopeClose pins Scope.Close: it stops the owner's processes (however
// they were started), waits until they are final, leaves other owners'
// running, keeps the records, and refuses later starts through that scope.
func TestScopeClose(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	alice, bob := m.Scope("alice"), m.Scope("bob")

	a1 := mustStart(t, alice, mgrBlockReq())
	a2 := mustStart(t, m.Scope("alice"), mgrBlockReq())
	req := mgrBlockReq()
	req.Owner = "alice"
	a3 := mustStart(t, m, req)
	a4 := mustStart(t, alice, mgrExitReq(0))
	waitFinal(ctx, t, a4)
	b1 := mustStart(t, bob, mgrBlockReq())
	unowned := mustStart(t, m, mgrBlockReq())

	if err := alice.Close(); err != nil {
		t.Fatalf("alice.Close() = %v", err)
	}
	for _, p := range []*proc.Process{a1, a2, a3, a4} {
		if !isDone(p) {
			t.Errorf("alice's %s is not final when Close returned", p.ID())
			continue
		}
		if info := p.Info(); info.Running || info.ExitCode == nil {
			t.Errorf("alice's %s after Close: running %v, exit %v; want final", p.ID(), info.Running, info.ExitCode)
		}
		if _, err := m.Get(p.ID()); err != nil {
			t.Errorf("Get(%s) after Scope.Close = %v; want the record retained", p.ID(), err)
		}
	}
	for _, p := range []*proc.Process{b1, unowned} {
		if isDone(p) {
			t.Errorf("%s (owner %q) became final when alice's scope closed", p.ID(), p.Info().Owner)
		}
	}

	_, err := alice.Start(mgrExitReq(0))
	mgrCheckErr(t, "closed Scope.Start", err, proc.ErrClosed)
	if err := alice.Close(); err != nil {
		t.Errorf("second Scope.Close() = %v; want nil", err)
	}
	// The other owner and the Manager carry on.
	b2 := mustStart(t, bob, mgrExitReq(0))
	waitFinal(ctx, t, b2)
	mgrKill(ctx, t, b1)
	mgrKill(ctx, t, unowned)
}

// TestOwnerEnv pins Options.OwnerEnv: the owner is exported to the child
// under that name, once, and neither the base environment nor the request
// can forge it.
func TestOwnerEnv(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	const name = "PROC_T_OWNER"
	m := newManager(t, proc.Options{
		OwnerEnv: name,
		UpdateEnv: func(current []string) ([]string, error) {
			return append(current, name+"=stale"), nil
		},
	})

	req := mgrEnvReq()
	req.Env[name] = "mallory"
	env := mgrEnviron(ctx, t, mustStart(t, m.Scope("alice"), req))
	if got, want := mgrEntries(env, name), []string{name + "=alice"}; !slices.Equal(got, want) {
		t.Errorf("child of Scope(alice) has %v; want %v", got, want)
	}

	req = mgrEnvReq()
	req.Owner = "bob"
	req.UnsetEnv = []string{name}
	env = mgrEnviron(ctx, t, mustStart(t, m, req))
	if got, want := mgrEntries(env, name), []string{name + "=bob"}; !slices.Equal(got, want) {
		t.Errorf("child with Owner bob and UnsetEnv %s has %v; want %v", name, got, want)
	}

	// An OwnerEnv that cannot name a variable refuses owned starts as bad
	// input, not as a failed exec.
	bad := newManager(t, proc.Options{OwnerEnv: "PROC_T=OWNER"})
	mgrWantRefused(t, bad, bad.Scope("alice"), "Start with OwnerEnv PROC_T=OWNER", mgrEnvReq(), proc.ErrInvalid, "OwnerEnv", "PROC_T=OWNER")
}

// TestStartEnv pins the child's environment: the base environment, then
// UpdateEnv, then Env overrides (replacing, never duplicating), then
// UnsetEnv.
func TestStartEnv(t *testing.T) {
	t.Parallel()

	withManager(t, "inherited", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		env := mgrEnviron(ctx, t, mustStart(t, m, mgrEnvReq()))
		if got, want := mgrSorted(env), mgrBaseEnv("mgr-env"); !slices.Equal(got, want) {
			t.Errorf("child environment = %q\nwant os.Environ() and the helper mode: %q", got, want)
		}
	})

	t.Run("overrides", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		m := newManager(t, proc.Options{UpdateEnv: func(current []string) ([]string, error) {
			return append(current, "PROC_T_DUP=old", "PROC_T_GONE=x"), nil
		}})
		req := mgrEnvReq()
		req.Env["PROC_T_DUP"] = "new"
		req.Env["PROC_T_NEW"] = "v=with=equals"
		req.Env["PROC_T_BOTH"] = "set-and-unset"
		req.UnsetEnv = []string{"PROC_T_GONE", "PROC_T_NEVER_SET", "PROC_T_BOTH"}
		inherited := ""
		if _, ok := os.LookupEnv("HOME"); ok {
			inherited = "HOME"
			req.Env["HOME"] = "/proc-test-home"
		}
		env := mgrEnviron(ctx, t, mustStart(t, m, req))

		for name, want := range map[string][]string{
			"PROC_T_DUP":       {"PROC_T_DUP=new"},
			"PROC_T_NEW":       {"PROC_T_NEW=v=with=equals"},
			"PROC_T_GONE":      nil,
			"PROC_T_NEVER_SET": nil,
			"PROC_T_BOTH":      nil, // removals come after overrides
		} {
			if got := mgrEntries(env, name); !slices.Equal(got, want) {
				t.Errorf("child has %s entries %q; want %q", name, got, want)
			}
		}
		if inherited != "" {
			if got, want := mgrEntries(env, inherited), []string{inherited + "=/proc-test-home"}; !slices.Equal(got, want) {
				t.Errorf("child has %s entries %q; want the override once: %q", inherited, got, want)
			}
		}
		// Everything else is the base environment, unchanged.
		var rest []string
		for _, kv := range env {
			if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "PROC_T_") && k != inherited {
				rest = append(rest, kv)
			}
		}
		if got, want := mgrSorted(rest), mgrBaseEnv("mgr-env", inherited); !slices.Equal(got, want) {
			t.Errorf("rest of the child environment = %q\nwant %q", got, want)
		}
	})

	t.Run("update-env-rewrites", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		var mu sync.Mutex
		var seen []string
		m := newManager(t, proc.Options{UpdateEnv: func(current []string) ([]string, error) {
			mu.Lock()
			seen = slices.Clone(current)
			mu.Unlock()
			return []string{"PROC_T_ONLY=1"}, nil
		}})
		if got, want := mgrEnvOwn(ctx, t, m, mgrEnvReq()), mgrSorted([]string{helperEnv + "=mgr-env", "GORACE=" + helperGorace, "PROC_T_ONLY=1"}); !slices.Equal(got, want) {
			t.Errorf("child environment = %q; want exactly UpdateEnv's result and the request's Env: %q", got, want)
		}
		mu.Lock()
		defer mu.Unlock()
		if got, want := mgrSorted(seen), mgrSorted(os.Environ()); !slices.Equal(got, want) {
			t.Errorf("UpdateEnv got %q; want os.Environ() %q", got, want)
		}
	})

	t.Run("update-env-error", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		sink := &mgrLogSink{t: t}
		m := newManager(t, proc.Options{
			Logger: sink.logger(),
			UpdateEnv: func(current []string) ([]string, error) {
				return append(current, "PROC_T_GARBAGE=1"), errors.New("credential helper unavailable")
			},
		})
		req := mgrEnvReq()
		req.Env["PROC_T_SET"] = "1"
		p, err := m.Start(req)
		if err != nil {
			t.Fatalf("Start() with a failing UpdateEnv = %v; want the start to succeed", err)
		}
		env := mgrEnviron(ctx, t, p)
		if got, want := mgrSorted(env), mgrSorted(append(mgrBaseEnv("mgr-env"), "PROC_T_SET=1")); !slices.Equal(got, want) {
			t.Errorf("child environment = %q\nwant the current one (os.Environ()) with the request's Env: %q", got, want)
		}
		var warned bool
		for _, e := range sink.snapshot() {
			if e.Level == slog.LevelWarn && strings.Contains(mgrEntryText(e), "credential helper unavailable") {
				warned = true
			}
		}
		if !warned {
			t.Errorf("no Warn entry carrying the UpdateEnv error; logged %d entries", len(sink.snapshot()))
		}
	})
}

// TestUpdateEnvWarningNamesProcess pins that the UpdateEnv warning names
// the process it concerns, also when the Manager chose the ID.
func TestUpdateEnvWarningNamesProcess(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	sink := &mgrLogSink{t: t}
	m := newManager(t, proc.Options{
		Logger: sink.logger(),
		UpdateEnv: func([]string) ([]string, error) {
			return nil, errors.New("update failed")
		},
	})
	p := mustStart(t, m, mgrExitReq(0))
	waitFinal(ctx, t, p)
	var ids []any
	for _, e := range sink.snapshot() {
		if e.Level != slog.LevelWarn {
			continue
		}
		for _, f := range e.Fields {
			if f.Name == "id" {
				ids = append(ids, f.Value)
			}
		}
	}
	if len(ids) != 1 || ids[0] != p.ID() {
		t.Errorf("ids of the UpdateEnv warnings = %q; want [%s]", ids, p.ID())
	}
}

// TestStartWorkDir pins the work dir: the request's (a relative one joined
// to the base an empty one gets), else Options.WorkingDir when it names an
// existing directory, else $HOME.
func TestStartWorkDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	home, homeErr := os.UserHomeDir()
	if homeErr == nil {
		if fi, err := os.Stat(home); err != nil || !fi.IsDir() {
			homeErr = fmt.Errorf("$HOME %q is not a directory", home)
		}
	}

	for _, tc := range []struct {
		name       string
		workDir    string
		hook       func() string
		want       string
		needsHome  bool
		hookCalled bool
	}{
		{name: "request", workDir: dir, want: dir},
		{name: "request-relative", workDir: "sub", hook: func() string { return dir }, want: sub, hookCalled: true},
		{name: "request-relative-up", workDir: "..", hook: func() string { return sub }, want: dir, hookCalled: true},
		{name: "request-relative-home", workDir: ".", hook: func() string { return missing }, want: home, needsHome: true, hookCalled: true},
		{name: "hook", hook: func() string { return dir }, want: dir, hookCalled: true},
		{name: "hook-missing", hook: func() string { return missing }, want: home, needsHome: true, hookCalled: true},
		{name: "hook-empty", hook: func() string { return "" }, want: home, needsHome: true, hookCalled: true},
		{name: "no-hook", want: home, needsHome: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.needsHome && homeErr != nil {
				t.Skipf("no usable $HOME: %v", homeErr)
			}
			ctx := testCtx(t)
			var mu sync.Mutex
			called := false
			opts := proc.Options{}
			if tc.hook != nil {
				opts.WorkingDir = func() string {
					mu.Lock()
					called = true
					mu.Unlock()
					return tc.hook()
				}
			}
			m := newManager(t, opts)
			req := helperReq("mgr-pwd")
			req.WorkDir = tc.workDir
			snap := waitFinal(ctx, t, mustStart(t, m, req))
			if code := exitCode(t, snap.Info); code != 0 {
				t.Fatalf("mgr-pwd exit %d: %q", code, snap.Output.Text)
			}
			if snap.Info.WorkDir != tc.want {
				t.Errorf("Info.WorkDir = %q; want %q", snap.Info.WorkDir, tc.want)
			}
			want, err := filepath.EvalSymlinks(tc.want)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := filepath.EvalSymlinks(snap.Output.Text); err != nil || got != want {
				t.Errorf("child's working directory = %q (%v); want %q", snap.Output.Text, err, want)
			}
			mu.Lock()
			defer mu.Unlock()
			if tc.hookCalled && !called {
				t.Errorf("Options.WorkingDir was not consulted")
			}
		})
	}
}

// TestCommandContextHook pins Options.CommandContext: it gets the program
// and its arguments, and the command it returns is what runs.
func TestCommandContextHook(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	type callArgs struct {
		name string
		args []string
	}
	calls := make(chan callArgs, 1)
	m := newManager(t, proc.Options{
		CommandContext: func(ctx context.Context, name string, args ...string) *exec.Cmd {
			calls <- callArgs{name, slices.Clone(args)}
			// Wrap: the test binary as mgr-echo prints what it wraps.
			return exec.CommandContext(ctx, os.Args[0], append([]string{"wrapped", name}, args...)...)
		},
	})

	req := helperReq("mgr-echo", "a", "b c")
	snap := waitFinal(ctx, t, mustStart(t, m, req))
	var got callArgs
	select {
	case got = <-calls:
	default:
		t.Fatalf("CommandContext was not called")
	}
	if got.name != os.Args[0] || !slices.Equal(got.args, []string{"a", "b c"}) {
		t.Errorf("CommandContext(%q, %q); want (%q, [a \"b c\"])", got.name, got.args, os.Args[0])
	}
	if want := "wrapped " + os.Args[0] + " a b c\n"; snap.Output.Text != want {
		t.Errorf("output = %q; want the hook's command to run: %q", snap.Output.Text, want)
	}
	if !slices.Equal(snap.Info.Args, req.Args) {
		t.Errorf("Info.Args = %q; want the request's %q", snap.Info.Args, req.Args)
	}
}

// TestCommandContextHookNil pins that a hook returning nil is refused
// without a panic and leaves nothing behind.
func TestCommandContextHookNil(t *testing.T) {
	t.Parallel()
	m := newManager(t, proc.Options{
		CommandContext: func(context.Context, string, ...string) *exec.Cmd { return nil },
		MaxRunning:     1,
	})
	for range 2 { // twice: the first must not hold the running slot
		req := withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.ID = "nil-cmd" })
		mgrWantRefused(t, m, m, "Start() with a nil command from the hook", req, proc.ErrInvalid, "CommandContext")
	}
}

// TestStartBadInput pins section 8: every malformed request is refused with
// an error that wraps one sentinel and says what was wrong, and starts
// nothing: no command built, no record, no reserved ID.
func TestStartBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name    string
		req     proc.StartRequest
		want    error
		mention []string
	}{
		{"empty", proc.StartRequest{}, proc.ErrInvalid, []string{"Command", "Args"}},
		{"empty-argv", proc.StartRequest{Args: []string{}}, proc.ErrInvalid, []string{"Command", "Args"}},
		{"empty-argv0", proc.StartRequest{Args: []string{"", "x"}}, proc.ErrInvalid, []string{"Args"}},
		{"command-and-args", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.Command = "true" }), proc.ErrInvalid, []string{"Command", "Args"}},
		{"command-nul", proc.StartRequest{Command: "echo a\x00b"}, proc.ErrInvalid, []string{"NUL"}},
		{"arg-nul", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.Args = append(r.Args, "a\x00b") }), proc.ErrInvalid, []string{"NUL"}},
		{"env-name-empty", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.Env[""] = "v" }), proc.ErrInvalid, []string{`""`}},
		{"env-name-equals", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.Env["A=B"] = "v" }), proc.ErrInvalid, []string{"A=B"}},
		{"env-name-nul", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.Env["A\x00"] = "v" }), proc.ErrInvalid, []string{`A\x00`}},
		{"env-value-nul", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.Env["PROC_T_V"] = "v\x00" }), proc.ErrInvalid, []string{"PROC_T_V", "NUL"}},
		{"unset-name-empty", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.UnsetEnv = []string{""} }), proc.ErrInvalid, []string{`""`}},
		{"unset-name-equals", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.UnsetEnv = []string{"A=B"} }), proc.ErrInvalid, []string{"A=B"}},
		{"workdir-missing", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.WorkDir = missing }), proc.ErrInvalid, []string{missing}},
		{"workdir-file", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.WorkDir = file }), proc.ErrInvalid, []string{file, "not a directory"}},
		{"timeout-negative", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.Timeout = -time.Second }), proc.ErrInvalid, []string{"Timeout"}},
		{"drain-quiet-negative", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.DrainQuiet = -time.Millisecond }), proc.ErrInvalid, []string{"drain"}},
		{"drain-timeout-negative", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.DrainTimeout = -time.Millisecond }), proc.ErrInvalid, []string{"drain"}},
		{"head-bytes-negative", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.HeadBytes = -1 }), proc.ErrInvalid, []string{"negative"}},
		{"tail-bytes-negative", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.TailBytes = -1 }), proc.ErrInvalid, []string{"negative"}},
		{"size-zero-rows", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.Size = proc.TermSize{Rows: 0, Cols: 80} }), proc.ErrInvalid, []string{"Size"}},
		{"size-zero-cols", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.Size = proc.TermSize{Rows: 24, Cols: 0} }), proc.ErrInvalid, []string{"Size"}},
		{"tty-separate-stderr", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.TTY = true; r.SeparateStderr = true }), proc.ErrInvalid, []string{"SeparateStderr"}},
		{"id-nul", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.ID = "a\x00b" }), proc.ErrInvalid, []string{"ID"}},
		{"owner-nul", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.Owner = "a\x00b" }), proc.ErrInvalid, []string{"Owner"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			var mu sync.Mutex
			built := 0
			m := newManager(t, proc.Options{
				CommandContext: func(ctx context.Context, name string, args ...string) *exec.Cmd {
					mu.Lock()
					built++
					mu.Unlock()
					return exec.CommandContext(ctx, name, args...)
				},
			})
			req := tc.req
			if req.ID == "" {
				req.ID = "bad"
			}
			mgrWantRefused(t, m, m, fmt.Sprintf("Start(%s)", tc.name), req, tc.want, tc.mention...)
			mu.Lock()
			if built != 0 {
				t.Errorf("Start(%s) built %d commands; want none", tc.name, built)
			}
			mu.Unlock()
			if ids := mgrIDs(m.List()); len(ids) != 0 {
				t.Errorf("List() after Start(%s) = %v; want empty", tc.name, ids)
			}
			if _, err := m.Get(req.ID); !errors.Is(err, proc.ErrNotFound) {
				t.Errorf("Get(%q) after Start(%s) = %v; want ErrNotFound", req.ID, tc.name, err)
			}
			if strings.ContainsRune(req.ID, 0) {
				return
			}
			// The ID was not reserved.
			good := mgrExitReq(0)
			good.ID = req.ID
			waitFinal(ctx, t, mustStart(t, m, good))
		})
	}
}

// TestStartBadInputNoValueEcho pins that an error about an environment
// value never repeats the value: it may be a secret.
func TestStartBadInputNoValueEcho(t *testing.T) {
	t.Parallel()
	m := newManager(t, proc.Options{})
	req := mgrExitReq(0)
	req.Env["PROC_T_TOKEN"] = "hunter2-secret\x00"
	_, err := m.Start(req)
	mgrCheckErr(t, "Start(value with NUL)", err, proc.ErrInvalid, "PROC_T_TOKEN")
	if err != nil && strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Start(value with NUL) = %q; the error repeats the value", err)
	}
}

// TestCallsAfterClose pins what answers after Close (design section 8):
// calls that start or control a process are ErrClosed, through the Manager
// and through a Scope; Get, List and Remove keep answering for the
// records still retained, so a transport can report how they ended.
func TestCallsAfterClose(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	m := proc.NewManager(proc.Options{})
	s := m.Scope("alice")
	p := mustStart(t, s, mgrExitReq(0))
	waitFinal(ctx, t, p)
	if err := m.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}

	_, err := m.Start(mgrExitReq(0))
	mgrCheckErr(t, "Start after Close", err, proc.ErrClosed)
	_, err = s.Start(mgrExitReq(0))
	mgrCheckErr(t, "Scope.Start after Close", err, proc.ErrClosed)
	mgrCheckErr(t, "Signal after Close", m.Signal(p.ID(), proc.Kill), proc.ErrClosed)
	mgrCheckErr(t, "Scope.Signal after Close", s.Signal(p.ID(), proc.Kill), proc.ErrClosed)
	mgrCheckErr(t, "Process.Signal after Close", p.Signal(proc.Terminate), proc.ErrClosed)

	for name, get := range map[string]func(string) (*proc.Process, error){"Get": m.Get, "Scope.Get": s.Get} {
		if got, err := get(p.ID()); err != nil || got != p {
			t.Errorf("%s(retained) after Close = %v, %v; want the record", name, got, err)
		}
		_, err := get("unknown")
		mgrCheckErr(t, name+"(unknown) after Close", err, proc.ErrNotFound)
	}
	mgrCheckErr(t, "Signal(unknown) after Close", m.Signal("unknown", proc.Kill), proc.ErrNotFound)
	for name, list := range map[string]func() []proc.Info{"List": m.List, "Scope.List": s.List} {
		if ids := mgrIDs(list()); len(ids) != 1 || ids[0] != p.ID() {
			t.Errorf("%s() after Close = %v; want [%s]", name, ids, p.ID())
		}
	}
	if snap := p.Snapshot(); snap.Info.Running || exitCode(t, snap.Info) != 0 {
		t.Errorf("Snapshot() after Close = running %v, exit %v", snap.Info.Running, snap.Info.ExitCode)
	}
	if c := p.ReadSince(0, 0); !c.EOF {
		t.Errorf("ReadSince(0) after Close = %+v; want EOF", c)
	}
	if err := p.Wait(ctx); err != nil {
		t.Errorf("Wait() after Close = %v; want nil", err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close() = %v; want nil", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Scope.Close() after Manager.Close = %v; want nil", err)
	}
	if err := m.Remove(p.ID()); err != nil {
		t.Errorf("Remove(retained) after Close = %v; want nil", err)
	}
	mgrCheckErr(t, "Remove(removed) after Close", m.Remove(p.ID()), proc.ErrNotFound)
	if ids := mgrIDs(m.List()); len(ids) != 0 {
		t.Errorf("List() after Remove = %v; want empty", ids)
	}
}

// TestProcessCallMisuse pins the refusals of section 8 on a record: an
// unknown signal, Write or CloseStdin without Stdin, Resize without TTY.
func TestProcessCallMisuse(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	s := m.Scope("alice")
	p := mustStart(t, s, mgrBlockReq())

	mgrCheckErr(t, "Manager.Signal(bogus)", m.Signal(p.ID(), "bogus"), proc.ErrInvalid, "bogus")
	mgrCheckErr(t, "Scope.Signal(bogus)", s.Signal(p.ID(), "SIGBOGUS"), proc.ErrInvalid, "SIGBOGUS")
	mgrCheckErr(t, "Process.Signal(empty)", p.Signal(""), proc.ErrInvalid)
	mgrCheckErr(t, "Manager.Signal(unknown id)", m.Signal("no-such-id", proc.Kill), proc.ErrNotFound, "no-such-id")
	_, err := proc.ParseSignal("bogus")
	mgrCheckErr(t, "ParseSignal(bogus)", err, proc.ErrInvalid, "bogus")
	n, err := p.Write([]byte("x"))
	mgrCheckErr(t, "Write without Stdin", err, proc.ErrInvalid, "Stdin")
	if n != 0 {
		t.Errorf("Write without Stdin wrote %d bytes", n)
	}
	mgrCheckErr(t, "CloseStdin without Stdin", p.CloseStdin(), proc.ErrInvalid, "Stdin")
	mgrCheckErr(t, "Resize without TTY", p.Resize(proc.TermSize{Rows: 24, Cols: 80}), proc.ErrInvalid, "TTY")
	if !p.Info().Running {
		t.Errorf("process is not running after refused calls")
	}

	mgrKill(ctx, t, p)
	mgrCheckErr(t, "Manager.Signal(final, bogus)", m.Signal(p.ID(), "bogus"), proc.ErrInvalid, "bogus")
	_, err = p.Write([]byte("x"))
	mgrCheckErr(t, "Write without Stdin on a final record", err, proc.ErrInvalid, "Stdin")
}

// TestStartNotFound pins that a program that does not exist is reported as
// the OS error (exec.ErrNotFound) and none of our sentinels, and leaves no
// record, no reserved ID and no running slot behind.
func TestStartNotFound(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	const prog = "proc-test-no-such-program"
	for _, tc := range []struct {
		name string
		opts proc.Options
		req  proc.StartRequest
	}{
		{"args", proc.Options{}, proc.StartRequest{Args: []string{prog, "x"}}},
		{"args-path", proc.Options{}, proc.StartRequest{Args: []string{filepath.Join(t.TempDir(), prog)}}},
		{"shell", proc.Options{Shell: []string{prog, "-c"}}, proc.StartRequest{Command: "true"}},
	} {
		tc.opts.MaxRunning = 1
		m := newManager(t, tc.opts)
		for range 3 {
			req := tc.req
			req.ID = "refused"
			p, err := m.Start(req)
			if p != nil {
				t.Errorf("%s: Start returned a process with its error", tc.name)
			}
			if !errors.Is(err, exec.ErrNotFound) && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s: Start(%q) = %v; want an error wrapping exec.ErrNotFound or fs.ErrNotExist", tc.name, req.Args, err)
			}
			if tc.name != "args-path" && !errors.Is(err, exec.ErrNotFound) {
				t.Errorf("%s: Start = %v; want an error wrapping exec.ErrNotFound", tc.name, err)
			}
			if in := mgrSentinelsIn(err); len(in) != 0 {
				t.Errorf("%s: Start = %v; wraps our sentinels %v, want none (an OS refusal)", tc.name, err, in)
			}
			if err != nil && !strings.Contains(err.Error(), prog) {
				t.Errorf("%s: Start = %q; want the message to name the program", tc.name, err)
			}
		}
		if ids := mgrIDs(m.List()); len(ids) != 0 {
			t.Errorf("%s: List() after refused starts = %v; want empty", tc.name, ids)
		}
		// Neither the ID nor the single running slot is held.
		good := mgrExitReq(0)
		good.ID = "refused"
		waitFinal(ctx, t, mustStart(t, m, good))
	}
}

// TestSnapshotJSON pins the snake_case JSON encoding of a final Snapshot.
func TestSnapshotJSON(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	req := helperReq("mgr-echo", strings.Repeat("x", 100))
	req.HeadBytes, req.TailBytes = 16, 16
	req.Owner = "alice"
	snap := waitFinal(ctx, t, mustStart(t, m, req))

	data, err := json.Marshal(snap)
	if err != nil {
		t.Fatalf("json.Marshal(Snapshot) = %v", err)
	}
	var tree map[string]any
	if err := json.Unmarshal(data, &tree); err != nil {
		t.Fatal(err)
	}
	lookup := func(path string) (any, bool) {
		var v any = tree
		for _, k := range strings.Split(path, ".") {
			obj, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = obj[k]; !ok {
				return nil, false
			}
		}
		return v, true
	}
	for path, want := range map[string]any{
		"info.id":                          snap.Info.ID,
		"info.owner":                       "alice",
		"info.running":                     false,
		"info.exit_code":                   float64(0),
		"info.timed_out":                   false,
		"info.background":                  false,
		"info.output_bytes":                float64(101),
		"info.pid":                         float64(snap.Info.PID),
		"info.work_dir":                    snap.Info.WorkDir,
		"info.started_at":                  snap.Info.StartedAt.Format(time.RFC3339Nano),
		"info.exited_at":                   snap.Info.ExitedAt.Format(time.RFC3339Nano),
		"output.text":                      snap.Output.Text,
		"output.truncation.original_bytes": float64(101),
		"output.truncation.retained_bytes": float64(32),
		"output.truncation.omitted_bytes":  float64(69),
		"output.truncation.lines_cut":      float64(0),
		"output.truncation.strategy":       "head_tail",
		"stderr.text":                      "",
		"info.usage.max_rss":               nil,
		"info.usage.user":                  nil,
		"info.usage.system":                nil,
		"info.args":                        nil,
	} {
		got, ok := lookup(path)
		if !ok {
			t.Errorf("JSON has no %s: %s", path, data)
			continue
		}
		if want != nil && got != want {
			t.Errorf("JSON %s = %#v; want %#v", path, got, want)
		}
	}
	snake := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, sub := range v {
				if !snake.MatchString(k) {
					t.Errorf("JSON key %s%s is not snake_case", path, k)
				}
				walk(path+k+".", sub)
			}
		case []any:
			for _, sub := range v {
				walk(path, sub)
			}
		}
	}
	walk("", tree)
}

// TestLoggingNoEnvValues pins section 9: the manager logs through the given
// Logger, an UpdateEnv failure at Warn, nothing at Error for expected
// failures, and never an environment value.
func TestLoggingNoEnvValues(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	const secret = "s3cr3t-value-7f2c"
	sink := &mgrLogSink{t: t}
	m := newManager(t, proc.Options{
		Logger: sink.logger(),
		UpdateEnv: func(current []string) ([]string, error) {
			return nil, errors.New("update failed")
		},
	})

	req := mgrExitReq(3)
	req.ID = "logged"
	req.Env["PROC_T_SECRET"] = secret
	req.Owner = "alice"
	p := mustStart(t, m, req)
	waitFinal(ctx, t, p)
	// Refused and failed starts and calls too.
	bad := mgrExitReq(0)
	bad.Env["PROC_T_SECRET"] = secret
	bad.Timeout = -1
	_, _ = m.Start(bad)
	_, _ = m.Start(proc.StartRequest{Args: []string{"proc-test-no-such-program"}, Env: map[string]string{"PROC_T_SECRET": secret}})
	_ = m.Signal(p.ID(), proc.Kill)
	if err := m.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}

	entries := sink.snapshot()
	var warned bool
	for _, e := range entries {
		text := mgrEntryText(e)
		if strings.Contains(text, secret) {
			t.Errorf("log entry at %v holds an environment value: %s", e.Level, text)
		}
		if e.Level == slog.LevelWarn && strings.Contains(text, "update failed") {
			warned = true
		}
	}
	if !warned {
		var texts []string
		for _, e := range entries {
			texts = append(texts, e.Level.String()+" "+mgrEntryText(e))
		}
		t.Errorf("no Warn entry with the UpdateEnv error; logged:\n%s", strings.Join(texts, "\n"))
	}
}

func TestRun(t *testing.T) {
	t.Parallel()

	withManager(t, "final", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		snap, err := m.Run(ctx, cvReq("out:hello\n", "err:oops\n", "exit:3"))
		if err != nil {
			t.Fatalf("Run() = %v; want nil", err)
		}
		if snap.Info.Running {
			t.Errorf("Run() snapshot Running = true; want a final snapshot")
		}
		wantExit(t, snap, 3)
		if snap.Output.Text != "hello\noops\n" {
			t.Errorf("Run() output = %q; want %q", snap.Output.Text, "hello\noops\n")
		}
		p, err := m.Get(snap.Info.ID)
		if err != nil {
			t.Fatalf("Get(%q) after Run = %v; want the record", snap.Info.ID, err)
		}
		if got := p.Snapshot(); got.Output.Text != snap.Output.Text || got.Info.Running {
			t.Errorf("Get(%q).Snapshot() = running %v, output %q; want the final record Run returned", snap.Info.ID, got.Info.Running, got.Output.Text)
		}
	})

	// The caller's context ends while Run waits: the process keeps running
	// and can be re-attached by ID.
	for _, tc := range []struct {
		name  string
		ctx   func(ctx context.Context) (context.Context, context.CancelFunc)
		block bool // cancel once Run blocks; else the ctx is over before Run
		want  error
	}{
		{"ctx-ends-while-waiting", context.WithCancel, true, context.Canceled},
		{"ctx-already-canceled", context.WithCancel, false, context.Canceled},
		{"ctx-deadline-passed", func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithDeadline(ctx, time.Unix(1, 0))
		}, false, context.DeadlineExceeded},
	} {
		withManager(t, tc.name, proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
			req := cvReq("out:up\n", "sleep")
			req.Stdin = true
			runCtx, cancel := tc.ctx(ctx)
			defer cancel()
			if !tc.block {
				cancel()
			}
			var (
				snap proc.Snapshot
				err  error
			)
			if tc.block {
				_ = cvWhileBlocked(runCtx, func(ctx context.Context) { snap, err = m.Run(ctx, req) },
					func() error { cancel(); return nil })
			} else {
				snap, err = m.Run(runCtx, req)
			}
			if !errors.Is(err, proc.ErrRunning) || !errors.Is(err, tc.want) {
				t.Fatalf("Run() = %v; want an error wrapping ErrRunning and %v", err, tc.want)
			}
			if !snap.Info.Running || snap.Info.ExitCode != nil {
				t.Errorf("Run() snapshot = running %v, exit code %v; want the running snapshot", snap.Info.Running, snap.Info.ExitCode)
			}
			if snap.Info.ID == "" || snap.Info.PID == 0 {
				t.Fatalf("Run() snapshot has ID %q, PID %d; want the started process", snap.Info.ID, snap.Info.PID)
			}
			p, err := m.Get(snap.Info.ID)
			if err != nil {
				t.Fatalf("Get(%q) after Run = %v; want to re-attach", snap.Info.ID, err)
			}
			if !p.Info().Running {
				t.Errorf("re-attached record is not running; Run must leave the process running")
			}
			final := cvStop(ctx, t, p)
			if code := exitCode(t, final.Info); code != 0 || final.Output.Text != "up\n" {
				t.Errorf("re-attached record ended with exit %d, output %q; want 0, %q", code, final.Output.Text, "up\n")
			}
		})
	}

	withManager(t, "start-errors", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		defer cvStop(ctx, t, startStdin(t, m, withReq(cvReq("sleep"), func(r *proc.StartRequest) { r.ID = "held" })))

		for _, tc := range cvFailingStarts {
			snap, err := m.Run(ctx, tc.req)
			if !errors.Is(err, tc.want) || errors.Is(err, proc.ErrRunning) {
				t.Errorf("%s: Run() = %v; want the Start error wrapping %v (and not ErrRunning)", tc.name, err, tc.want)
			}
			if snap.Info.ID != "" || snap.Output.Text != "" {
				t.Errorf("%s: Run() snapshot = %+v; want the zero Snapshot", tc.name, snap.Info)
			}
		}
		if infos := m.List(); len(infos) != 1 {
			t.Errorf("List() after failed Runs has %d records; want only %q", len(infos), "held")
		}

		closed := proc.NewManager(proc.Options{})
		if err := closed.Close(); err != nil {
			t.Fatalf("Close() = %v", err)
		}
		if _, err := closed.Run(ctx, proc.StartRequest{Command: "true"}); !errors.Is(err, proc.ErrClosed) {
			t.Errorf("Run() after Close = %v; want ErrClosed", err)
		}
	})

	withManager(t, "scope", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		alice, bob := m.Scope("alice"), m.Scope("bob")

		snap, err := alice.Run(ctx, cvReq("out:from alice\n"))
		if err != nil {
			t.Fatalf("alice.Run() = %v", err)
		}
		if snap.Info.Owner != "alice" || snap.Output.Text != "from alice\n" || snap.Info.Running {
			t.Errorf("alice.Run() = owner %q, output %q, running %v; want alice, %q, final", snap.Info.Owner, snap.Output.Text, snap.Info.Running, "from alice\n")
		}
		if _, err := bob.Get(snap.Info.ID); !errors.Is(err, proc.ErrNotFound) {
			t.Errorf("bob.Get(alice's run) = %v; want ErrNotFound", err)
		}

		req := cvReq("sleep")
		req.Owner, req.Stdin = "bob", true
		if _, err := alice.Run(ctx, req); !errors.Is(err, proc.ErrInvalid) {
			t.Errorf("alice.Run(Owner bob) = %v; want ErrInvalid", err)
		}

		req.Owner = ""
		runCtx, cancel := context.WithCancel(ctx)
		cancel()
		snap, err = alice.Run(runCtx, req)
		if !errors.Is(err, proc.ErrRunning) || !errors.Is(err, context.Canceled) {
			t.Fatalf("alice.Run(ended ctx) = %v; want ErrRunning and context.Canceled", err)
		}
		p, err := alice.Get(snap.Info.ID)
		if err != nil {
			t.Fatalf("alice.Get(%q) = %v; want to re-attach", snap.Info.ID, err)
		}
		if _, err := bob.Get(snap.Info.ID); !errors.Is(err, proc.ErrNotFound) {
			t.Errorf("bob.Get(alice's running process) = %v; want ErrNotFound", err)
		}
		cvStop(ctx, t, p)
	})
}

func TestStartOrGet(t *testing.T) {
	t.Parallel()

	withManager(t, "retry-while-running", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		req := cvReq("out:up\n", "sleep")
		req.ID, req.Stdin = "svc", true
		p, started, err := m.StartOrGet(req)
		if err != nil || !started || p == nil {
			t.Fatalf("first StartOrGet() = %v, %v, %v; want a process, true, nil", p, started, err)
		}
		defer cvStop(ctx, t, p)

		// Only Command, Args, WorkDir, Owner, the environment and
		// Background are compared (TestStartOrGetEnvironment).
		retry := req
		retry.Timeout = time.Hour // not compared
		for _, r := range []proc.StartRequest{req, retry} {
			got, started, err := m.StartOrGet(r)
			if err != nil || started || got != p {
				t.Errorf("retried StartOrGet() = %p, %v, %v; want %p, false, nil", got, started, err, p)
			}
		}
		if n := len(m.List()); n != 1 {
			t.Errorf("List() after retries has %d records; want 1", n)
		}
	})

	withManager(t, "retry-after-final", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		req := cvReq("out:done\n", "exit:4")
		req.ID = "job"
		p, started, err := m.StartOrGet(req)
		if err != nil || !started {
			t.Fatalf("first StartOrGet() = %v, %v; want true, nil", started, err)
		}
		snap := waitFinal(ctx, t, p)
		got, started, err := m.StartOrGet(req)
		if err != nil || started || got != p {
			t.Fatalf("StartOrGet() of a final record = %p, %v, %v; want %p, false, nil", got, started, err, p)
		}
		if again := got.Snapshot(); again.Info.Running || exitCode(t, again.Info) != 4 || again.Output.Text != snap.Output.Text {
			t.Errorf("StartOrGet() returned record = running %v, output %q; want the final record with exit 4", again.Info.Running, again.Output.Text)
		}
	})

	withManager(t, "different-parameters", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		dir := t.TempDir()
		byCommand := proc.StartRequest{ID: "by-command", Command: "echo original"}
		byArgs := cvReq("out:original\n")
		byArgs.ID = "by-args"
		for _, req := range []proc.StartRequest{byCommand, byArgs} {
			p, started, err := m.StartOrGet(req)
			if err != nil || !started {
				t.Fatalf("StartOrGet(%q) = %v, %v; want true, nil", req.ID, started, err)
			}
			waitFinal(ctx, t, p)
		}
		resolved := func() string {
			p, err := m.Get("by-command")
			if err != nil {
				t.Fatalf("Get(by-command) = %v", err)
			}
			return p.Info().WorkDir
		}()

		for _, tc := range []struct {
			name string
			req  proc.StartRequest
		}{
			{"other-command", withReq(byCommand, func(r *proc.StartRequest) { r.Command = "echo other" })},
			{"args-instead-of-command", withReq(byCommand, func(r *proc.StartRequest) { r.Command, r.Args = "", []string{"echo", "original"} })},
			{"other-args", withReq(byArgs, func(r *proc.StartRequest) { r.Args = append(append([]string(nil), r.Args...), "out:more\n") })},
			{"other-workdir", withReq(byCommand, func(r *proc.StartRequest) { r.WorkDir = dir })},
			// Compared as requested, not as resolved.
			{"resolved-workdir", withReq(byCommand, func(r *proc.StartRequest) { r.WorkDir = resolved })},
			{"other-owner", withReq(byCommand, func(r *proc.StartRequest) { r.Owner = "someone" })},
		} {
			p, started, err := m.StartOrGet(tc.req)
			if !errors.Is(err, proc.ErrDuplicateID) || started || p != nil {
				t.Errorf("%s: StartOrGet() = %v, %v, %v; want nil, false, ErrDuplicateID", tc.name, p, started, err)
			}
		}
		if n := len(m.List()); n != 2 {
			t.Errorf("List() has %d records; want the 2 originals", n)
		}
	})

	withManager(t, "no-id", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		req := cvReq("out:x\n")
		first, started1, err1 := m.StartOrGet(req)
		second, started2, err2 := m.StartOrGet(req)
		if err1 != nil || err2 != nil || !started1 || !started2 || first == second || first.ID() == second.ID() {
			t.Fatalf("StartOrGet() without ID twice = (%v, %v), (%v, %v); want two new processes", started1, err1, started2, err2)
		}
		waitFinal(ctx, t, first)
		waitFinal(ctx, t, second)
	})

	t.Run("start-errors", func(t *testing.T) {
		t.Parallel()
		m := newManager(t, proc.Options{})
		for _, tc := range []struct {
			req  proc.StartRequest
			want error
		}{
			{proc.StartRequest{ID: "nf", Args: []string{"cv-no-such-program-7f3a"}}, exec.ErrNotFound},
			{proc.StartRequest{ID: "bad"}, proc.ErrInvalid},
		} {
			p, started, err := m.StartOrGet(tc.req)
			if !errors.Is(err, tc.want) || started || p != nil {
				t.Errorf("StartOrGet(%q) = %v, %v, %v; want nil, false, %v", tc.req.ID, p, started, err, tc.want)
			}
		}
		if n := len(m.List()); n != 0 {
			t.Errorf("List() after failed starts has %d records; want 0", n)
		}
	})

	// Many callers retry one start at once: exactly one process starts and
	// every caller gets it.
	withManager(t, "concurrent", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		req := cvReq("out:once\n", "sleep")
		req.ID, req.Stdin = "one", true
		const callers = 32
		type result struct {
			p       *proc.Process
			started bool
			err     error
		}
		all := atOnce(ctx, t, callers, func(int) result {
			p, started, err := m.StartOrGet(req)
			return result{p, started, err}
		})
		var winner *proc.Process
		starts := 0
		for _, r := range all {
			if r.err != nil {
				t.Errorf("StartOrGet() = %v; want nil", r.err)
				continue
			}
			if r.started {
				starts++
				winner = r.p
			}
		}
		if starts != 1 {
			t.Fatalf("%d of %d concurrent StartOrGet() calls started a process; want exactly 1", starts, callers)
		}
		for _, r := range all {
			if r.err == nil && r.p != winner {
				t.Errorf("StartOrGet() = %p; want the one started process %p", r.p, winner)
			}
		}
		if infos := m.List(); len(infos) != 1 || infos[0].ID != "one" {
			t.Errorf("List() = %d records; want exactly the one process", len(infos))
		}
		if snap := cvStop(ctx, t, winner); snap.Output.Text != "once\n" {
			t.Errorf("output = %q; want %q", snap.Output.Text, "once\n")
		}
	})

	// The same race with a LogPath, in the order that loses the log: the
	// losing call opens (creates) the log first, then the winner starts
	// and writes to it, then the loser finds the ID taken and discards its
	// start. The loser must not remove the file the winner writes to.
	// Options.UpdateEnv, which runs after the log was opened and before the
	// ID is reserved, holds the losing call at that point.
	t.Run("losing-retry-keeps-the-log", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		hold := cvHoldFirstUpdateEnv(t)
		m := newManager(t, proc.Options{UpdateEnv: hold.updateEnv})
		req := cvReq("out:once\n", "sleep")
		req.ID, req.Stdin = "one", true
		req.LogPath = filepath.Join(t.TempDir(), "one.log")

		type result struct {
			p       *proc.Process
			started bool
			err     error
		}
		loser := make(chan result, 1)
		go func() {
			p, started, err := m.StartOrGet(req)
			loser <- result{p, started, err}
		}()
		recv(ctx, t, hold.held, "the first StartOrGet to reach UpdateEnv")
		winner, started, err := m.StartOrGet(req)
		if err != nil || !started {
			t.Fatalf("second StartOrGet() = %v, %v; want it to start the process", started, err)
		}
		hold.release()
		r := recv(ctx, t, loser, "the first StartOrGet")
		if r.err != nil || r.started || r.p != winner {
			t.Errorf("first StartOrGet() = %p, %v, %v; want the winner %p, false, nil", r.p, r.started, r.err, winner)
		}
		cvStop(ctx, t, winner)
		cvWantFile(t, req.LogPath, "once\n")
	})

	withManager(t, "scope", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		alice, bob := m.Scope("alice"), m.Scope("bob")
		req := cvReq("out:alice\n", "sleep")
		req.ID, req.Stdin = "shared", true
		p, started, err := alice.StartOrGet(req)
		if err != nil || !started {
			t.Fatalf("alice.StartOrGet() = %v, %v; want true, nil", started, err)
		}
		defer cvStop(ctx, t, p)
		if p.Info().Owner != "alice" {
			t.Errorf("alice.StartOrGet() owner = %q; want alice", p.Info().Owner)
		}

		got, started, err := bob.StartOrGet(req)
		if !errors.Is(err, proc.ErrDuplicateID) || started || got != nil {
			t.Errorf("bob.StartOrGet(alice's ID) = %v, %v, %v; want nil, false, ErrDuplicateID", got, started, err)
		}
		got, started, err = alice.StartOrGet(req)
		if err != nil || started || got != p {
			t.Errorf("alice.StartOrGet() again = %p, %v, %v; want %p, false, nil", got, started, err, p)
		}
		got, started, err = m.Scope("alice").StartOrGet(req)
		if err != nil || started || got != p {
			t.Errorf("another alice Scope StartOrGet() = %p, %v, %v; want %p, false, nil", got, started, err, p)
		}
		owned := req
		owned.Owner = "alice"
		got, started, err = m.StartOrGet(owned)
		if err != nil || started || got != p {
			t.Errorf("Manager.StartOrGet(Owner alice) = %p, %v, %v; want %p, false, nil", got, started, err, p)
		}
		if _, _, err := m.StartOrGet(req); !errors.Is(err, proc.ErrDuplicateID) {
			t.Errorf("Manager.StartOrGet(no owner) of alice's ID = %v; want ErrDuplicateID", err)
		}
		owned.Owner = "bob"
		if _, _, err := alice.StartOrGet(owned); !errors.Is(err, proc.ErrInvalid) {
			t.Errorf("alice.StartOrGet(Owner bob) = %v; want ErrInvalid", err)
		}
		if !p.Info().Running {
			t.Errorf("alice's process is not running after the others' calls")
		}
	})
}
