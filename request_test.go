package proc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/procvisor/proc"
)

// A request as a transport decodes it, and its sizes.

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
	withManager(t, "decode-and-run", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
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

// TestBufferSizesPerRequest pins that a request's HeadBytes and TailBytes
// override the manager's, for both streams.
func TestBufferSizesPerRequest(t *testing.T) {
	t.Parallel()
	const size = 1 << 20
	tests := []struct {
		name       string
		head, tail int
		wantHead   int64
		wantTail   int64
	}{
		{name: "manager-sizes", wantHead: 100, wantTail: 200},
		{name: "both", head: 1000, tail: 3000, wantHead: 1000, wantTail: 3000},
		{name: "head-only", head: 1000, wantHead: 1000, wantTail: 200},
		{name: "tail-only", tail: 3000, wantHead: 100, wantTail: 3000},
	}
	for _, tt := range tests {
		withManager(t, tt.name, proc.Options{HeadBytes: 100, TailBytes: 200}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
			req := helperReq("interactive-pattern", strconv.Itoa(size), strconv.Itoa(64<<10), "0")
			req.HeadBytes, req.TailBytes = tt.head, tt.tail
			p := mustStart(t, m, req)
			snap := waitFinal(ctx, t, p)
			tr := snap.Output.Truncation
			if tr == nil || tr.OriginalBytes != size || tr.RetainedBytes != tt.wantHead+tt.wantTail ||
				tr.OmittedBytes != size-tt.wantHead-tt.wantTail {
				t.Fatalf("Truncation = %+v; want original %d, retained %d, omitted %d",
					tr, size, tt.wantHead+tt.wantTail, size-tt.wantHead-tt.wantTail)
			}
			want := string(iaPattern(0, int(tt.wantHead))) + iaMarker(size-tt.wantHead-tt.wantTail) +
				string(iaPattern(size-tt.wantTail, int(tt.wantTail)))
			if snap.Output.Text != want {
				t.Errorf("Output().Text = %q; want %q", snap.Output.Text, want)
			}
		})
	}

	withManager(t, "stderr", proc.Options{}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
		const n = 1000 // 64-byte lines per stream
		req := helperReq("interactive-streams", strconv.Itoa(n))
		req.SeparateStderr = true
		req.HeadBytes, req.TailBytes = 640, 1280
		p := mustStart(t, m, req)
		snap := waitFinal(ctx, t, p)
		for _, s := range []struct {
			name string
			out  proc.Output
		}{{"out", snap.Output}, {"err", snap.Stderr}} {
			tr := s.out.Truncation
			if tr == nil || tr.OriginalBytes != n*64 || tr.RetainedBytes != 640+1280 {
				t.Errorf("%s: Truncation = %+v; want original %d, retained %d", s.name, tr, n*64, 640+1280)
				continue
			}
			var want strings.Builder
			for i := range 10 {
				want.WriteString(iaStreamLine(s.name, i))
			}
			want.WriteString(iaMarker(n*64 - 640 - 1280))
			for i := n - 20; i < n; i++ {
				want.WriteString(iaStreamLine(s.name, i))
			}
			if s.out.Text != want.String() {
				t.Errorf("%s: Text = %q; want %q", s.name, s.out.Text, want.String())
			}
		}
		if snap.Info.OutputBytes != 2*n*64 {
			t.Errorf("Info.OutputBytes = %d; want %d", snap.Info.OutputBytes, 2*n*64)
		}
	})
}
