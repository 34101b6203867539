package proc_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/procvisor/proc"
)

// TestSandboxInvalid: a relative, empty or missing root is ErrInvalid
// before anything starts, in a request or in Options; on every OS.
func TestSandboxInvalid(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing")
	for name, sb := range map[string]*proc.Sandbox{
		"relative": {WritableRoots: []string{"src"}},
		"empty":    {WritableRoots: []string{""}},
		"missing":  {WritableRoots: []string{missing}},
		"nul":      {WritableRoots: []string{"/tmp\x00x"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, proc.Options{})
			req := proc.StartRequest{Args: []string{"true"}, Sandbox: sb}
			if p, err := m.Start(req); !errors.Is(err, proc.ErrInvalid) {
				t.Fatalf("Start(Sandbox %q) = %v, %v; want ErrInvalid", sb.WritableRoots, p, err)
			}
			def := newManager(t, proc.Options{Sandbox: sb})
			if p, err := def.Start(proc.StartRequest{Args: []string{"true"}}); !errors.Is(err, proc.ErrInvalid) {
				t.Fatalf("Start with Options.Sandbox %q = %v, %v; want ErrInvalid", sb.WritableRoots, p, err)
			}
			if n := len(m.List()) + len(def.List()); n != 0 {
				t.Fatalf("%d records after refused starts; want none", n)
			}
		})
	}
}

func TestSandboxJSON(t *testing.T) {
	t.Parallel()
	var req proc.StartRequest
	if err := json.Unmarshal([]byte(`{"args":["make"],"sandbox":{"writable_roots":["/src","/tmp"],"network":true}}`), &req); err != nil {
		t.Fatal(err)
	}
	want := &proc.Sandbox{WritableRoots: []string{"/src", "/tmp"}, Network: true}
	if !reflect.DeepEqual(req.Sandbox, want) {
		t.Fatalf("decoded Sandbox %+v; want %+v", req.Sandbox, want)
	}
	out, err := json.Marshal(proc.StartRequest{Args: []string{"make"}, Sandbox: &proc.Sandbox{}})
	if err != nil {
		t.Fatal(err)
	}
	if !containsKey(out, "sandbox") {
		t.Fatalf("a read-only Sandbox encodes as %s; want a sandbox key", out)
	}
	if out, _ := json.Marshal(proc.StartRequest{Args: []string{"make"}}); containsKey(out, "sandbox") {
		t.Fatalf("no Sandbox encodes as %s; want no sandbox key", out)
	}
	if out, _ := json.Marshal(proc.Info{}); containsKey(out, "sandbox") {
		t.Fatalf("Info{} encodes as %s; want no sandbox key (unrestricted)", out)
	}
}

func containsKey(b []byte, key string) bool {
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	_, ok := m[key]
	return ok
}
