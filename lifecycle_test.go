package proc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/procvisor/proc"
)

// Lifecycle tests: design sections 2 (states and invariants I1–I3), 5
// (drain) and 6 (signals, timeouts, Close). Unix-only cases are in
// lifecycle_unix_test.go.

var _ = helper("lc-print", lcHelperPrint)

// lcHelperPrint writes args[0] to stdout and exits 0.
func lcHelperPrint(args []string) int {
	_, _ = os.Stdout.WriteString(args[0])
	return 0
}

var _ = helper("lc-write", lcHelperWrite)

// lcHelperWrite writes lcContent(args[0]) to stdout in 4 KiB writes.
func lcHelperWrite(args []string) int {
	n, err := strconv.Atoi(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	data := lcContent(n)
	for len(data) > 0 {
		k := min(len(data), 4096)
		if _, err := os.Stdout.Write(data[:k]); err != nil {
			return 1
		}
		data = data[k:]
	}
	return 0
}

// lcContent is the deterministic output of helper lc-write: n bytes of
// numbered lines.
func lcContent(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "line %06d %s\n", i, strings.Repeat("x", 40))
	}
	return b.Bytes()[:n]
}

// lcCheckRunning checks the status fields of a record that is not final.
func lcCheckRunning(t *testing.T, info proc.Info) {
	t.Helper()
	if !info.Running || info.ExitCode != nil || !info.ExitedAt.IsZero() || info.Usage != nil || info.Signal != "" {
		t.Errorf("Info() of a record that is not final = running %v, exit code %v, exited at %v, usage %v, signal %q; want true, nil, zero, nil, \"\"",
			info.Running, info.ExitCode, info.ExitedAt, info.Usage, info.Signal)
	}
}

// lcCheckFinal checks the status fields every final record has.
func lcCheckFinal(t *testing.T, info proc.Info) {
	t.Helper()
	if info.Running || info.ExitCode == nil || info.ExitedAt.IsZero() || info.Usage == nil {
		t.Errorf("Info() of a final record = running %v, exit code %v, exited at %v, usage %v; want false, set, set, set",
			info.Running, info.ExitCode, info.ExitedAt, info.Usage)
	}
	if info.ExitedAt.Before(info.StartedAt) {
		t.Errorf("Info().ExitedAt = %v before StartedAt %v", info.ExitedAt, info.StartedAt)
	}
}

// TestSnapshotRaceFinalOutput pins I1 and I2 under load: many short
// processes that overflow their buffers, snapshotted concurrently while
// they run and end. A snapshot that says final carries exactly the final
// output and count; a running one never carries less output than its
// status says, and its count never exceeds the final count nor goes back.
func TestSnapshotRaceFinalOutput(t *testing.T) {
	t.Parallel()
	const (
		procs    = 40
		size     = 100 << 10
		head     = 1 << 10
		tail     = 1 << 10
		snappers = 4
	)
	ctx, m := testManager(t, proc.Options{})

	want := proc.NewHeadTailBuffer(head, tail, 0)
	_, _ = want.Write(lcContent(size))
	want.Finish()
	wantOut := want.Output()

	ps := make([]*proc.Process, procs)
	for i := range ps {
		req := helperReq("lc-write", strconv.Itoa(size))
		req.HeadBytes, req.TailBytes = head, tail
		ps[i] = mustStart(t, m, req)
	}

	type finalSeen struct {
		out   proc.Output
		bytes int64
	}
	var (
		mu     sync.Mutex
		finals = make([][]finalSeen, procs) // distinct final snapshots per process
	)
	var failures atomic.Int32
	report := func(format string, args ...any) {
		if failures.Add(1) <= 10 {
			t.Errorf(format, args...)
		}
	}
	allFinal := func() bool {
		for _, p := range ps {
			if !isDone(p) {
				return false
			}
		}
		return true
	}

	var wg sync.WaitGroup
	for g := range snappers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := make([]int64, procs)
			lastFinal := make([]*finalSeen, procs)
			for ctx.Err() == nil {
				done := allFinal() // then one more full pass
				for k := range ps {
					i := (k + g*procs/snappers) % procs
					s := ps[i].Snapshot()
					info := s.Info
					if info.OutputBytes < last[i] {
						report("snapshot %d of process %d: OutputBytes %d < %d of an earlier snapshot", g, i, info.OutputBytes, last[i])
					}
					last[i] = info.OutputBytes
					if info.OutputBytes > size {
						report("snapshot of process %d: OutputBytes %d > %d written", i, info.OutputBytes, size)
					}
					if info.Running {
						if info.ExitCode != nil || !info.ExitedAt.IsZero() || info.Usage != nil {
							report("running snapshot of process %d has exit code %v, exited at %v, usage %v", i, info.ExitCode, info.ExitedAt, info.Usage)
						}
						// I2: the output was read after the status.
						have := int64(len(s.Output.Text))
						if s.Output.Truncation != nil {
							have = s.Output.Truncation.OriginalBytes
						}
						if have < info.OutputBytes {
							report("running snapshot of process %d: output holds %d bytes < OutputBytes %d read before it", i, have, info.OutputBytes)
						}
						continue
					}
					f := lastFinal[i]
					if f != nil && f.bytes == info.OutputBytes && reflect.DeepEqual(f.out, s.Output) {
						continue
					}
					seen := finalSeen{out: s.Output, bytes: info.OutputBytes}
					lastFinal[i] = &seen
					mu.Lock()
					finals[i] = append(finals[i], seen)
					mu.Unlock()
				}
				if done {
					return
				}
			}
		}()
	}
	for i, p := range ps {
		if err := p.Wait(ctx); err != nil {
			t.Fatalf("Wait(process %d) = %v", i, err)
		}
	}
	wg.Wait()

	for i, p := range ps {
		info := p.Info()
		if code := exitCode(t, info); code != 0 {
			t.Errorf("process %d: exit code %d; want 0 (stderr %q)", i, code, p.Stderr().Text)
		}
		if info.OutputBytes != size {
			t.Errorf("process %d: final OutputBytes %d; want %d", i, info.OutputBytes, size)
		}
		final := p.Output()
		if !reflect.DeepEqual(final, wantOut) {
			t.Errorf("process %d: final Output() = %q (%+v); want %q (%+v)", i, final.Text, final.Truncation, wantOut.Text, wantOut.Truncation)
		}
		if len(finals[i]) == 0 {
			t.Errorf("process %d: no snapshot saw it final", i)
		}
		for _, f := range finals[i] {
			if f.bytes != size || !reflect.DeepEqual(f.out, final) {
				t.Errorf("process %d: a final snapshot had OutputBytes %d and Output %q (%+v); want %d and the final Output %q",
					i, f.bytes, f.out.Text, f.out.Truncation, size, final.Text)
			}
		}
	}
}

// TestWaitAndDone pins the end as seen by waiters (I3): every concurrent
// Wait returns nil once final, Done is one channel closed once, and a
// Wait whose context ends first reports the context's error.
func TestWaitAndDone(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	p := startStdin(t, m, helperReq("interactive-cat"))

	done := p.Done()
	if p.Done() != done {
		t.Errorf("Done() returned different channels")
	}
	select {
	case <-done:
		t.Fatalf("Done() closed while the child waits for stdin")
	default:
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := p.Wait(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait(cancelled ctx) on a running process = %v; want an error wrapping context.Canceled", err)
	}
	expired, cancel2 := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel2()
	if err := p.Wait(expired); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait(expired ctx) on a running process = %v; want an error wrapping context.DeadlineExceeded", err)
	}
	lcCheckRunning(t, p.Info())

	const waiters = 8
	errs := make(chan error, waiters)
	for range waiters {
		go func() { errs <- p.Wait(ctx) }()
	}
	closedSeen := make(chan struct{}, 1)
	go func() {
		<-done
		closedSeen <- struct{}{}
	}()

	if _, err := p.Write([]byte("bye\n")); err != nil {
		t.Fatalf("Write() = %v", err)
	}
	if err := p.CloseStdin(); err != nil {
		t.Fatalf("CloseStdin() = %v", err)
	}
	for range waiters {
		if err := recv(ctx, t, errs, "a waiter"); err != nil {
			t.Errorf("concurrent Wait() = %v; want nil", err)
		}
	}
	recv(ctx, t, closedSeen, "Done() to close")
	s := p.Snapshot()
	lcCheckFinal(t, s.Info)
	if s.Output.Text != "bye\n" {
		t.Errorf("Output() = %q; want %q", s.Output.Text, "bye\n")
	}
	// Once final, Wait returns nil even with a context that is over.
	if err := p.Wait(cancelled); err != nil {
		t.Errorf("Wait(cancelled ctx) on a final process = %v; want nil", err)
	}
	if p.Done() != done {
		t.Errorf("Done() changed after final")
	}
}

// TestParseSignal pins the accepted signal names.
func TestParseSignal(t *testing.T) {
	t.Parallel()
	for want, names := range map[proc.Signal]string{
		proc.Kill:      "kill KILL SIGKILL sigkill",
		proc.Terminate: "TERM term SIGTERM terminate",
		proc.Interrupt: "Interrupt int SIGINT",
	} {
		for _, in := range strings.Fields(names) {
			if got, err := proc.ParseSignal(in); err != nil || got != want {
				t.Errorf("ParseSignal(%q) = %q, %v; want %q, nil", in, got, err, want)
			}
		}
	}
	for _, in := range []string{"HUP", "SIGHUP", "", "9", "SIG", "killall", "usr1"} {
		got, err := proc.ParseSignal(in)
		if !errors.Is(err, proc.ErrInvalid) {
			t.Errorf("ParseSignal(%q) = %q, %v; want an error wrapping ErrInvalid", in, got, err)
		}
	}
}

// TestSignalInvalid pins that an unknown signal is refused with
// ErrInvalid, running or final, through the Process and the Manager, and
// that a final record whose group is gone reports ErrNotRunning.
func TestSignalInvalid(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	p := startStdin(t, m, helperReq("interactive-cat"))
	for _, sig := range []proc.Signal{"HUP", "", "9", "stop"} {
		if err := p.Signal(sig); !errors.Is(err, proc.ErrInvalid) {
			t.Errorf("Signal(%q) on a running process = %v; want an error wrapping ErrInvalid", sig, err)
		}
		if err := m.Signal(p.ID(), sig); !errors.Is(err, proc.ErrInvalid) {
			t.Errorf("Manager.Signal(%q) = %v; want an error wrapping ErrInvalid", sig, err)
		}
	}
	lcCheckRunning(t, p.Info())
	if err := p.CloseStdin(); err != nil {
		t.Fatalf("CloseStdin() = %v", err)
	}
	waitFinal(ctx, t, p)
	if err := p.Signal("HUP"); !errors.Is(err, proc.ErrInvalid) {
		t.Errorf("Signal(%q) on a final process = %v; want an error wrapping ErrInvalid", "HUP", err)
	}
	// The child was the group's only member and was reaped before final.
	for _, sig := range []proc.Signal{proc.Kill, proc.Terminate, proc.Interrupt} {
		if err := p.Signal(sig); !errors.Is(err, proc.ErrNotRunning) {
			t.Errorf("Signal(%q) on a final process with no group left = %v; want an error wrapping ErrNotRunning", sig, err)
		}
	}
}
