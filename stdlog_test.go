package proc_test

import (
	"context"
	stdslog "log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cdr.dev/slog/v3"
	"golang.org/x/xerrors"

	"github.com/procvisor/proc"
)

// Tests of StdlibLogger, the bridge to log/slog (DESIGN.md section 16).

// slCaptured is one call of a capturing handler.
type slCaptured struct {
	ctx    context.Context
	record stdslog.Record
}

// slCapture is a log/slog handler that keeps every record it is handed,
// with its context. It keeps records from min on. The bridge never calls
// WithAttrs or WithGroup: it hands every attribute to Handle.
type slCapture struct {
	t   testing.TB
	min stdslog.Level

	mu      sync.Mutex
	enabled []stdslog.Level
	got     []slCaptured
}

func (h *slCapture) Enabled(_ context.Context, l stdslog.Level) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.enabled = append(h.enabled, l)
	return l >= h.min
}

func (h *slCapture) Handle(ctx context.Context, r stdslog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got = append(h.got, slCaptured{ctx: ctx, record: r.Clone()})
	return xerrors.New("a handler error the bridge drops")
}

func (h *slCapture) WithAttrs([]stdslog.Attr) stdslog.Handler {
	h.t.Errorf("the bridge called WithAttrs; it should hand attributes to Handle")
	return h
}

func (h *slCapture) WithGroup(string) stdslog.Handler {
	h.t.Errorf("the bridge called WithGroup; it should hand groups to Handle")
	return h
}

func (h *slCapture) records() []slCaptured {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]slCaptured(nil), h.got...)
}

// slAttrs renders r's attributes as "k=v" strings, groups as
// "g.k=v", in order.
func slAttrs(r stdslog.Record) []string {
	var out []string
	var walk func(prefix string, a stdslog.Attr)
	walk = func(prefix string, a stdslog.Attr) {
		if a.Value.Kind() == stdslog.KindGroup {
			for _, g := range a.Value.Group() {
				walk(prefix+a.Key+".", g)
			}
			return
		}
		out = append(out, prefix+a.Key+"="+a.Value.String())
	}
	r.Attrs(func(a stdslog.Attr) bool {
		walk("", a)
		return true
	})
	return out
}

type slCtxKey struct{}

func TestStdlibLogger(t *testing.T) {
	t.Parallel()

	t.Run("entry", func(t *testing.T) {
		t.Parallel()
		h := &slCapture{t: t, min: stdslog.LevelDebug}
		logger := proc.StdlibLogger(h).Named("proc").Named("test").With(slog.F("fixed", 1))
		ctx := context.WithValue(context.Background(), slCtxKey{}, "trace-7")
		ctx = slog.With(ctx, slog.F("from_ctx", "yes"))
		before := time.Now()
		logger.Warn(ctx, "it happened", slog.F("id", "p1"), slog.Error(xerrors.New("boom")),
			slog.F("nested", slog.M(slog.F("a", "x"), slog.F("b", 2))))

		got := h.records()
		if len(got) != 1 {
			t.Fatalf("handler got %d records; want 1", len(got))
		}
		r := got[0].record
		if r.Level != stdslog.LevelWarn || r.Message != "it happened" {
			t.Errorf("record = %v %q; want WARN %q", r.Level, r.Message, "it happened")
		}
		if r.Time.Before(before.Add(-time.Second)) || r.Time.After(time.Now().Add(time.Second)) {
			t.Errorf("record time %v; want about now (%v)", r.Time, before)
		}
		if v := got[0].ctx.Value(slCtxKey{}); v != "trace-7" {
			t.Errorf("handler's context carries %v; want the caller's (trace-7)", v)
		}
		want := []string{"logger=proc.test", "fixed=1", "from_ctx=yes", "id=p1", "error=boom", "nested.a=x", "nested.b=2"}
		if attrs := slAttrs(r); strings.Join(attrs, " ") != strings.Join(want, " ") {
			t.Errorf("attributes = %q; want %q", attrs, want)
		}
	})

	// Each entry reaches the handler at its level (Critical above Error),
	// and the handler's Enabled, asked once per entry, filters.
	for _, tc := range []struct {
		name string
		min  stdslog.Level
		want []stdslog.Level
	}{
		{"levels", stdslog.LevelDebug, []stdslog.Level{stdslog.LevelDebug, stdslog.LevelInfo, stdslog.LevelWarn, stdslog.LevelError, stdslog.LevelError + 4}},
		{"handler-filters", stdslog.LevelWarn, []stdslog.Level{stdslog.LevelWarn, stdslog.LevelError, stdslog.LevelError + 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := &slCapture{t: t, min: tc.min}
			logger := proc.StdlibLogger(h)
			ctx := context.Background()
			logger.Debug(ctx, "d")
			logger.Info(ctx, "i")
			logger.Warn(ctx, "w")
			logger.Error(ctx, "e")
			logger.Critical(ctx, "c")
			var got []stdslog.Level
			for _, c := range h.records() {
				got = append(got, c.record.Level)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("handler at %v got records at %v; want %v", tc.min, got, tc.want)
			}
			if len(h.enabled) != 5 {
				t.Errorf("Enabled was asked %d times; want once per entry (5)", len(h.enabled))
			}
		})
	}

	t.Run("nil-discards", func(t *testing.T) {
		t.Parallel()
		logger := proc.StdlibLogger(nil)
		ctx := context.Background()
		logger.Debug(ctx, "d", slog.F("k", "v"))
		logger.Error(ctx, "e")
		// A manager with it works like one with the zero Logger.
		m := newManager(t, proc.Options{Logger: logger, UpdateEnv: func([]string) ([]string, error) {
			return nil, xerrors.New("update failed")
		}})
		snap, err := m.Run(testCtx(t), helperReq("mgr-exit", "0"))
		if err != nil || exitCode(t, snap.Info) != 0 {
			t.Errorf("Run with StdlibLogger(nil) = %v, exit %v; want a clean run", err, snap.Info.ExitCode)
		}
	})

	// The manager's own diagnostics reach the handler: a failing UpdateEnv
	// is logged at Warn with the record's ID and the error.
	t.Run("manager", func(t *testing.T) {
		t.Parallel()
		h := &slCapture{t: t, min: stdslog.LevelDebug}
		m := newManager(t, proc.Options{Logger: proc.StdlibLogger(h), UpdateEnv: func([]string) ([]string, error) {
			return nil, xerrors.New("vault unreachable")
		}})
		req := helperReq("mgr-exit", "0")
		req.ID = "with-log"
		if _, err := m.Run(testCtx(t), req); err != nil {
			t.Fatalf("Run = %v", err)
		}
		for _, c := range h.records() {
			if c.record.Level != stdslog.LevelWarn || !strings.Contains(c.record.Message, "update environment") {
				continue
			}
			attrs := strings.Join(slAttrs(c.record), " ")
			for _, want := range []string{"logger=proc", "id=with-log", "error=vault unreachable"} {
				if !strings.Contains(attrs, want) {
					t.Errorf("warning %q has attributes %q; want %q among them", c.record.Message, attrs, want)
				}
			}
			return
		}
		t.Errorf("handler got %d records, none the WARN about UpdateEnv", len(h.records()))
	})
}
