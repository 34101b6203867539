//go:build unix

package proc_test

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procvisor/proc"
)

var _ = helper("fuzz-out", fuzzOut)

// fuzzOut writes args[1] (hex) args[0] times, its even writes to stdout
// and its odd ones to stderr, and exits 0.
func fuzzOut(args []string) int {
	n, _ := strconv.Atoi(args[0])
	b, err := hex.DecodeString(args[1])
	if err != nil {
		return 2
	}
	for i := range n {
		w := os.Stdout
		if i%2 == 1 {
			w = os.Stderr
		}
		if _, err := w.Write(b); err != nil {
			return 1
		}
	}
	return 0
}

// FuzzStartRequest decodes a request from JSON, as a transport passes a
// client's body, and starts it with its command replaced by a child that
// writes the fuzzed output (its time, drain and terminal size bounded so
// that each case ends quickly; its log, if it asks for one, in a
// directory of the test's). Whatever the request and the output: no
// goroutine of the library panics (the test binary would die), Start
// either refuses with an error wrapping one of the package's sentinels
// or the operating system's refusal, or the record becomes final, its
// output, snapshot and events readable.
func FuzzStartRequest(f *testing.F) {
	f.Add([]byte(`{"command":"echo hi","max_line_length":9223372036854775807,"watch":[{"name":"a","pattern":"hi"}]}`), []byte("hi\n"), uint8(1))
	f.Add([]byte(`{"command":"x","head_bytes":1099511627776,"tail_bytes":16}`), []byte("x"), uint8(1))
	f.Add([]byte(`{"args":["x"],"max_line_length":8,"watch":[{"name":"d","pattern":"^\\d+$"},{"name":"e","pattern":"(?i)error","once":true}]}`), []byte("12\nan ERROR\n\xff\xfe\r\n"), uint8(40))
	f.Add([]byte(`{"command":"x","tty":true,"size":{"rows":30,"cols":100},"stdin":true,"watch":[{"name":"p","pattern":"\\$ $"}]}`), []byte("\x1b[2J$ \r\n"), uint8(3))
	f.Add([]byte(`{"command":"x","separate_stderr":true,"sandbox":{"writable_roots":["/tmp"]},"log_path":"x","timeout":1000000}`), []byte("out\n"), uint8(2))
	f.Add([]byte(`{"command":"x","limits":{"pids":64}}`), []byte("x\n"), uint8(1))
	f.Add([]byte(`{"command":"x","watch_activity":true,"env":{"A":"b"},"unset_env":["HOME"],"drop_env":["X*"],"owner":"o","id":"fuzz"}`), []byte(""), uint8(0))
	m := newManager(f, proc.Options{KillGrace: 100 * time.Millisecond, DrainQuiet: 5 * time.Millisecond, EventHistory: 64})
	f.Fuzz(func(t *testing.T, body, out []byte, repeat uint8) {
		var req proc.StartRequest
		if err := json.Unmarshal(body, &req); err != nil {
			return
		}
		fuzzBound(t, &req, out, int(repeat))
		p, err := m.Start(req)
		if err != nil {
			t.Logf("Start: %v", err)
			if !wrapsSentinelOrOS(err) {
				t.Fatalf("Start(%s) = %v; want an error wrapping a sentinel or the OS's", body, err)
			}
			return
		}
		defer func() { _ = m.Remove(p.ID()) }()
		if req.Stdin {
			_ = p.CloseStdin()
		}
		ctx := testCtx(t, 30*time.Second)
		snap := waitFinal(ctx, t, p)
		if snap.Info.ExitCode == nil {
			t.Fatalf("final snapshot of %s without an exit code: %+v", body, snap.Info)
		}
		_ = p.Output()
		if _, _, lost := m.Events(0, 0); lost < 0 {
			t.Fatalf("Events lost %d; want none negative", lost)
		}
	})
}

// fuzzBound makes req run the fuzz-out child instead of what it asks,
// and bounds what would make a case slow or reach outside the test.
func fuzzBound(t *testing.T, req *proc.StartRequest, out []byte, repeat int) {
	if len(out) > 64<<10 {
		out = out[:64<<10]
	}
	child := helperReq("fuzz-out", strconv.Itoa(repeat), hex.EncodeToString(out))
	req.Command, req.Args = "", child.Args
	env := map[string]string{}
	for name, value := range req.Env {
		// The child is a Go test binary: the runtime's and the dynamic
		// linker's variables would change what it is, not what proc does.
		if upper := strings.ToUpper(name); !strings.HasPrefix(upper, "GO") && !strings.HasPrefix(upper, "LD_") && name != helperEnv {
			env[name] = value
		}
	}
	for name, value := range child.Env {
		env[name] = value
	}
	req.Env = env
	unset := req.UnsetEnv[:0]
	for _, name := range req.UnsetEnv {
		if _, ours := child.Env[name]; !ours {
			unset = append(unset, name)
		}
	}
	req.UnsetEnv = unset
	if req.LogPath != "" {
		req.LogPath = filepath.Join(t.TempDir(), "log")
	}
	if req.Timeout <= 0 || req.Timeout > 3*time.Second {
		req.Timeout = 3 * time.Second
	}
	req.DrainQuiet = min(req.DrainQuiet, 50*time.Millisecond)
	req.DrainTimeout = min(req.DrainTimeout, 200*time.Millisecond)
	req.Size.Rows, req.Size.Cols = min(req.Size.Rows, 200), min(req.Size.Cols, 200)
}

// wrapsSentinelOrOS reports whether err wraps one of the package's
// sentinels, or is the operating system's refusal to start.
func wrapsSentinelOrOS(err error) bool {
	for _, sentinel := range []error{proc.ErrInvalid, proc.ErrUnsupported, proc.ErrLimit, proc.ErrDuplicateID, proc.ErrClosed} {
		if errors.Is(err, sentinel) {
			return true
		}
	}
	var errno syscall.Errno
	var pathErr *fs.PathError
	var execErr *exec.Error
	return errors.As(err, &errno) || errors.As(err, &pathErr) || errors.As(err, &execErr)
}
