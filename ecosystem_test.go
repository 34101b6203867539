package proc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/procvisor/proc"
)

// Tests of what DESIGN.md section 16 adds for other people's code: requests
// as JSON, ClearEnv, the environment in StartOrGet, MaxLineLength per
// request, and stderr streaming. The logging bridge is in stdlog_test.go.

// ecoSnake is the snake_case form of a Go field name: "WorkDir" is
// "work_dir", "ID" is "id".
func ecoSnake(name string) string {
	var b strings.Builder
	for i, r := range name {
		if i > 0 && unicode.IsUpper(r) && unicode.IsLower(rune(name[i-1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

func TestStartRequestJSON(t *testing.T) {
	t.Parallel()

	// Every field has a snake_case tag, so that a field added later cannot
	// silently decode under its Go name. Writers (tees) are not data.
	t.Run("tags", func(t *testing.T) {
		t.Parallel()
		typ := reflect.TypeFor[proc.StartRequest]()
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" && f.Type.Kind() == reflect.Interface {
				continue
			}
			if want := ecoSnake(f.Name); name != want {
				t.Errorf("StartRequest.%s has JSON name %q; want %q", f.Name, name, want)
			}
		}
	})

	t.Run("decode", func(t *testing.T) {
		t.Parallel()
		body := `{
			"id": "build-1", "args": ["make", "test"], "work_dir": "/src",
			"env": {"CI": "1"}, "unset_env": ["TOKEN"], "clear_env": true,
			"owner": "alice", "background": true, "timeout": 90000000000,
			"stdin": true, "tty": true, "size": {"rows": 40, "cols": 120},
			"separate_stderr": true, "head_bytes": 1024, "tail_bytes": 2048,
			"max_line_length": 300, "drain_quiet": 10000000,
			"drain_timeout": 1500000000, "log_path": "/tmp/build-1.log",
			"limits": {"memory_bytes": 1073741824, "pids": 64, "cpus": 1.5}
		}`
		want := proc.StartRequest{
			ID: "build-1", Args: []string{"make", "test"}, WorkDir: "/src",
			Env: map[string]string{"CI": "1"}, UnsetEnv: []string{"TOKEN"}, ClearEnv: true,
			Owner: "alice", Background: true, Timeout: 90 * time.Second,
			Stdin: true, TTY: true, Size: proc.TermSize{Rows: 40, Cols: 120},
			SeparateStderr: true, HeadBytes: 1024, TailBytes: 2048,
			MaxLineLength: 300, DrainQuiet: 10 * time.Millisecond,
			DrainTimeout: 1500 * time.Millisecond, LogPath: "/tmp/build-1.log",
			Limits: proc.Limits{MemoryBytes: 1 << 30, Pids: 64, CPUs: 1.5},
		}
		var got proc.StartRequest
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatalf("Unmarshal = %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Unmarshal =\n%+v\nwant\n%+v", got, want)
		}
		// And back: the same document, whatever the order of the keys.
		enc, err := json.Marshal(want)
		if err != nil {
			t.Fatalf("Marshal = %v", err)
		}
		var again proc.StartRequest
		if err := json.Unmarshal(enc, &again); err != nil || !reflect.DeepEqual(again, want) {
			t.Errorf("Marshal then Unmarshal = %+v, %v; want %+v", again, err, want)
		}
	})

	t.Run("zero-is-empty", func(t *testing.T) {
		t.Parallel()
		enc, err := json.Marshal(proc.StartRequest{})
		if err != nil || string(enc) != "{}" {
			t.Errorf("Marshal(StartRequest{}) = %s, %v; want {} (zero fields take the defaults)", enc, err)
		}
		enc, err = json.Marshal(proc.StartRequest{Command: "make", Timeout: 2 * time.Second})
		if want := `{"command":"make","timeout":2000000000}`; err != nil || string(enc) != want {
			t.Errorf("Marshal = %s, %v; want %s", enc, err, want)
		}
	})

	// Durations are integers of nanoseconds, as encoding/json has them; a
	// string such as "30s" is a decoding error, never a silent zero.
	t.Run("duration-as-string", func(t *testing.T) {
		t.Parallel()
		var req proc.StartRequest
		if err := json.Unmarshal([]byte(`{"command":"x","timeout":"30s"}`), &req); err == nil {
			t.Errorf(`Unmarshal("timeout":"30s") = nil, Timeout %v; want an error`, req.Timeout)
		}
	})

	// A request body decoded straight into a StartRequest runs.
	t.Run("decode-and-run", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
		argv, err := json.Marshal(helperArgv("out:to stdout\n", "err:to stderr\n", "exit:3"))
		if err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf(`{"id":"from-json","args":%s,"env":{%q:"cv-script",%q:%q},"separate_stderr":true,"timeout":60000000000}`,
			argv, helperEnv, "GORACE", helperGorace)
		var req proc.StartRequest
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatalf("Unmarshal(%s) = %v", body, err)
		}
		snap, err := m.Run(ctx, req)
		if err != nil {
			t.Fatalf("Run(decoded request) = %v", err)
		}
		if snap.Info.ID != "from-json" || exitCode(t, snap.Info) != 3 ||
			snap.Output.Text != "to stdout\n" || snap.Stderr.Text != "to stderr\n" {
			t.Errorf("Run(decoded request) = id %q, exit %d, output %q, stderr %q; want from-json, 3, %q, %q",
				snap.Info.ID, exitCode(t, snap.Info), snap.Output.Text, snap.Stderr.Text, "to stdout\n", "to stderr\n")
		}
	})
}

// ecoSetSecret sets a variable in the test process that no child started
// with ClearEnv may see, and removes it when the test ends. Its children
// inherit it, so the test must not run in parallel with one that compares
// a child's whole environment (TestStartEnv): t.Setenv enforces that.
func ecoSetSecret(t *testing.T) (name, value string) {
	t.Helper()
	name = "PROC_TEST_SECRET_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	value = "hunter2"
	t.Setenv(name, value)
	return name, value
}

// TestClearEnv is not parallel: its variable would show in the children
// of parallel tests that compare their whole environment (TestStartEnv).
func TestClearEnv(t *testing.T) {
	ctx := testCtx(t)
	secret, value := ecoSetSecret(t)
	var updates atomic.Int32
	m := newManager(t, proc.Options{
		OwnerEnv: "PROC_TEST_OWNER",
		UpdateEnv: func(env []string) ([]string, error) {
			updates.Add(1)
			return append(env, "PROC_TEST_UPDATED=1"), nil
		},
	})

	// The control: without ClearEnv the child sees the test's variable and
	// the hook's, so their absence below means something.
	plain := mgrEnvOwn(ctx, t, m, helperReq("mgr-env"))
	for _, kv := range []string{secret + "=" + value, "PROC_TEST_UPDATED=1"} {
		if !slices.Contains(plain, kv) {
			t.Fatalf("without ClearEnv the child's environment lacks %s", kv)
		}
	}

	req := helperReq("mgr-env")
	req.ClearEnv = true
	req.Env["KEEP"] = "1"
	req.Env["DROP"] = "2"
	req.UnsetEnv = []string{"DROP", "HOME"}
	req.Owner = "alice"
	calls := updates.Load()
	got := mgrEnvOwn(ctx, t, m, req)
	want := []string{"GORACE=" + helperGorace, "KEEP=1", helperEnv + "=mgr-env", "PROC_TEST_OWNER=alice"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("with ClearEnv the child's environment is\n%q\nwant exactly\n%q", got, want)
	}
	if n := updates.Load() - calls; n != 0 {
		t.Errorf("UpdateEnv was called %d times for a ClearEnv start; want 0", n)
	}
}

func TestStartOrGetEnvironment(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	env := map[string]string{helperEnv: "mgr-exit", "GORACE": helperGorace, "A": "1"}
	orig := proc.StartRequest{ID: "env", Args: helperArgv("0"), Env: env, UnsetEnv: []string{"B"}}
	p, started, err := m.StartOrGet(orig)
	if err != nil || !started {
		t.Fatalf("first StartOrGet() = %v, %v; want true, nil", started, err)
	}
	waitFinal(ctx, t, p)
	env["A"] = "changed by the caller after the start" // must not change the record

	with := func(edit func(*proc.StartRequest)) proc.StartRequest {
		req := orig
		req.Env = map[string]string{helperEnv: "mgr-exit", "GORACE": helperGorace, "A": "1"}
		req.UnsetEnv = []string{"B"}
		edit(&req)
		return req
	}
	for _, tc := range []struct {
		name string
		req  proc.StartRequest
		same bool
	}{
		{"equal-copies", with(func(*proc.StartRequest) {}), true},
		{"not-compared-timeout", with(func(r *proc.StartRequest) { r.Timeout = time.Hour }), true},
		{"callers-map-changed", with(func(r *proc.StartRequest) { r.Env = env }), false},
		{"other-env-value", with(func(r *proc.StartRequest) { r.Env["A"] = "2" }), false},
		{"extra-env", with(func(r *proc.StartRequest) { r.Env["C"] = "3" }), false},
		{"env-missing", with(func(r *proc.StartRequest) { delete(r.Env, "A") }), false},
		{"other-unset-env", with(func(r *proc.StartRequest) { r.UnsetEnv = []string{"C"} }), false},
		{"no-unset-env", with(func(r *proc.StartRequest) { r.UnsetEnv = nil }), false},
		{"clear-env", with(func(r *proc.StartRequest) { r.ClearEnv = true }), false},
		{"background", with(func(r *proc.StartRequest) { r.Background = true }), false},
	} {
		got, started, err := m.StartOrGet(tc.req)
		switch {
		case tc.same && (err != nil || started || got != p):
			t.Errorf("%s: StartOrGet() = %p, %v, %v; want %p, false, nil", tc.name, got, started, err, p)
		case !tc.same && (!errors.Is(err, proc.ErrDuplicateID) || started || got != nil):
			t.Errorf("%s: StartOrGet() = %p, %v, %v; want nil, false, ErrDuplicateID", tc.name, got, started, err)
		}
	}

	// An empty Env or UnsetEnv asks for the same as a nil one.
	bare := proc.StartRequest{ID: "bare", Args: helperArgv("0")}
	if _, _, err := m.StartOrGet(bare); err != nil {
		t.Fatalf("StartOrGet(bare) = %v", err)
	}
	bare.Env, bare.UnsetEnv = map[string]string{}, []string{}
	if _, started, err := m.StartOrGet(bare); err != nil || started {
		t.Errorf("StartOrGet(bare with empty Env and UnsetEnv) = %v, %v; want the record, false, nil", started, err)
	}
}

func TestMaxLineLength(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("y", 100)
	req := func(maxLine int) proc.StartRequest {
		r := cvReq("out:"+long+`\n`, "err:"+long+`\n`)
		r.SeparateStderr = true
		r.MaxLineLength = maxLine
		return r
	}
	for _, tc := range []struct {
		name           string
		manager, asked int
		cut            bool
	}{
		{"request-cuts", 4096, 40, true},
		{"zero-takes-managers", 40, 0, true},
		{"request-longer-than-managers", 40, 500, false},
		{"neither-cuts", 4096, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, m := testManager(t, proc.Options{MaxLineLength: tc.manager})
			snap, err := m.Run(ctx, req(tc.asked))
			if err != nil {
				t.Fatalf("Run = %v", err)
			}
			for _, out := range []struct {
				name string
				o    proc.Output
			}{{"Output", snap.Output}, {"Stderr", snap.Stderr}} {
				cut := out.o.Truncation != nil && out.o.Truncation.LinesCut == 1 && strings.Contains(out.o.Text, "[truncated]")
				if cut != tc.cut || (!tc.cut && out.o.Text != long+"\n") {
					t.Errorf("%s with Options.MaxLineLength %d, request %d = %q, truncation %+v; want the line cut: %v",
						out.name, tc.manager, tc.asked, out.o.Text, out.o.Truncation, tc.cut)
				}
			}
		})
	}

	t.Run("negative", func(t *testing.T) {
		t.Parallel()
		m := newManager(t, proc.Options{})
		mgrWantRefused(t, m, m, "Start(MaxLineLength -1)", req(-1), proc.ErrInvalid, "MaxLineLength", "-1")
	})
}

// ecoCheckStreamBytes fails unless data is the stream name of helper
// interactive-streams (64-byte lines iaStreamLine) at offset off.
func ecoCheckStreamBytes(t *testing.T, name string, off int64, data []byte) {
	t.Helper()
	const line = 64
	for i, c := range data {
		o := off + int64(i)
		if want := iaStreamLine(name, int(o/line))[o%line]; c != want {
			t.Fatalf("%s byte at offset %d = %q; want %q (line %d of that stream)", name, o, c, want, o/line)
		}
	}
}

func TestReadStderrSince(t *testing.T) {
	t.Parallel()

	// Both streams flood small buffers at once: a follower of stderr gets
	// only stderr's bytes, each at its offset, and what it receives plus
	// what it is told it lost is exactly what the child wrote to stderr.
	t.Run("flood", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
		const lines = 5000
		const written = 64 * lines
		req := helperReq("interactive-streams", strconv.Itoa(lines))
		req.SeparateStderr = true
		req.HeadBytes, req.TailBytes = 4096, 4096
		p := mustStart(t, m, req)
		// First live, as the child writes (a fast follower may lose
		// nothing), then again from 0 once final, when only 8 KiB of the
		// stream is left and the rest must be counted as lost.
		for pass, max := range []int{0, 1000} {
			received, lost := iaFollow(ctx, t, p, true, max, func(off int64, data []byte) { ecoCheckStreamBytes(t, "err", off, data) })
			if received+lost != written {
				t.Errorf("pass %d (max %d): received %d + lost %d = %d; want the %d bytes written to stderr",
					pass, max, received, lost, received+lost, written)
			}
			if pass == 1 && received != 8192 {
				t.Errorf("reading the final record from 0 received %d bytes; want the 8192 retained", received)
			}
		}
		if info := p.Info(); info.OutputBytes != 2*written {
			t.Errorf("Info().OutputBytes = %d; want %d (both streams)", info.OutputBytes, 2*written)
		}
		if c := p.ReadSince(0, 0); c.End != written {
			t.Errorf("ReadSince(0, 0).End = %d; want the %d bytes of stdout alone", c.End, written)
		}
	})

	t.Run("exact", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
		req := cvReq("out:to stdout\n", "err:hello\n")
		req.SeparateStderr = true
		p := mustStart(t, m, req)
		waitFinal(ctx, t, p)
		for _, tc := range []struct {
			cursor    int64
			max       int
			data      string
			next, end int64
		}{
			{0, 0, "hello\n", 6, 6},
			{3, 2, "lo", 5, 6},
			{-5, 1, "h", 1, 6},
			{6, 0, "", 6, 6},
			{100, 0, "", 100, 6},
		} {
			c := p.ReadStderrSince(tc.cursor, tc.max)
			if string(c.Data) != tc.data || c.Next != tc.next || c.End != tc.end || c.Lost != 0 || c.EOF != (tc.next >= tc.end) {
				t.Errorf("ReadStderrSince(%d, %d) = %q next %d end %d lost %d eof %v; want %q next %d end %d lost 0 eof %v",
					tc.cursor, tc.max, c.Data, c.Next, c.End, c.Lost, c.EOF, tc.data, tc.next, tc.end, tc.next >= tc.end)
			}
		}
	})

	// WaitStderr waits for stderr, not for stdout.
	t.Run("wait", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
		req := cvReq("out:first\n", "wait", "err:late\n", "sleep")
		req.SeparateStderr = true
		p := startStdin(t, m, req)
		if err := p.WaitOutput(ctx, 0); err != nil {
			t.Fatalf("WaitOutput(0) = %v", err)
		}
		over, cancel := context.WithCancel(ctx)
		cancel()
		if err := p.WaitStderr(over, 0); !errors.Is(err, context.Canceled) {
			t.Errorf("WaitStderr(ended ctx, 0) with stdout written and stderr empty = %v; want an error wrapping context.Canceled", err)
		}
		if _, err := p.Write([]byte("\n")); err != nil {
			t.Fatalf("Write = %v", err)
		}
		if err := p.WaitStderr(ctx, 0); err != nil {
			t.Fatalf("WaitStderr(0) = %v", err)
		}
		if c := p.ReadStderrSince(0, 0); string(c.Data) != "late\n" || c.EOF {
			t.Errorf("ReadStderrSince(0, 0) = %q, EOF %v; want %q, false while running", c.Data, c.EOF, "late\n")
		}
		if err := p.CloseStdin(); err != nil {
			t.Fatalf("CloseStdin = %v", err)
		}
		if err := p.WaitStderr(ctx, 5); err != nil {
			t.Fatalf("WaitStderr(5) until final = %v", err)
		}
		if c := p.ReadStderrSince(5, 0); !c.EOF || p.Info().Running {
			t.Errorf("after WaitStderr(5) returned at the end: EOF %v, running %v; want a final record and EOF", c.EOF, p.Info().Running)
		}
	})

	// Without SeparateStderr, stderr is in the Output stream and the stderr
	// stream is empty: no data, EOF only once the record is final, and
	// WaitStderr returns once it is.
	t.Run("without-separate-stderr", func(t *testing.T) {
		t.Parallel()
		ctx, m := testManager(t, proc.Options{})
		p := startStdin(t, m, cvReq("err:to stderr\n", "sleep"))
		waitText(ctx, t, p, "to stderr\n")
		if c := p.ReadStderrSince(0, 0); len(c.Data) != 0 || c.End != 0 || c.Lost != 0 || c.EOF {
			t.Errorf("ReadStderrSince(0, 0) while running = %q end %d lost %d eof %v; want empty, not EOF", c.Data, c.End, c.Lost, c.EOF)
		}
		over, cancel := context.WithCancel(ctx)
		cancel()
		if err := p.WaitStderr(over, 0); !errors.Is(err, context.Canceled) {
			t.Errorf("WaitStderr(ended ctx) while running = %v; want an error wrapping context.Canceled", err)
		}
		if err := p.CloseStdin(); err != nil {
			t.Fatalf("CloseStdin = %v", err)
		}
		if err := p.WaitStderr(ctx, 0); err != nil {
			t.Fatalf("WaitStderr(0) until final = %v", err)
		}
		if p.Info().Running {
			t.Errorf("WaitStderr(0) returned nil while the record is running")
		}
		if c := p.ReadStderrSince(0, 0); len(c.Data) != 0 || c.End != 0 || !c.EOF {
			t.Errorf("ReadStderrSince(0, 0) once final = %q end %d eof %v; want empty and EOF", c.Data, c.End, c.EOF)
		}
	})
}
