package proc_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
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

// TestSandboxNetInvalid: ConnectPorts outside 1-65535, and Listen or
// ConnectPorts together with Network, are ErrInvalid naming the field, and
// nothing starts; on every OS.
func TestSandboxNetInvalid(t *testing.T) {
	t.Parallel()
	for name, sb := range map[string]*proc.Sandbox{
		"port 0":             {ConnectPorts: []int{0}},
		"port 65536":         {ConnectPorts: []int{80, 65536}},
		"listen and network": {Listen: true, Network: true},
		"ports and network":  {ConnectPorts: []int{80}, Network: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := newManager(t, proc.Options{})
			p, err := m.Start(proc.StartRequest{Args: []string{"true"}, Sandbox: sb})
			if !errors.Is(err, proc.ErrInvalid) || !strings.Contains(err.Error(), "Sandbox") {
				t.Fatalf("Start(%+v) = %v, %v; want ErrInvalid naming the field", sb, p, err)
			}
			if n := len(m.List()); n != 0 {
				t.Fatalf("%d records after a refused start; want none", n)
			}
		})
	}
}

// TestSandboxNetJSON: Listen and ConnectPorts decode from listen and
// connect_ports, and are left out when unset.
func TestSandboxNetJSON(t *testing.T) {
	t.Parallel()
	var sb proc.Sandbox
	if err := json.Unmarshal([]byte(`{"listen":true,"connect_ports":[3000,443]}`), &sb); err != nil {
		t.Fatal(err)
	}
	if !sb.Listen || !reflect.DeepEqual(sb.ConnectPorts, []int{3000, 443}) {
		t.Fatalf("decoded %+v; want Listen and ports 3000, 443", sb)
	}
	out, err := json.Marshal(proc.Sandbox{})
	if err != nil {
		t.Fatal(err)
	}
	if containsKey(out, "listen") || containsKey(out, "connect_ports") {
		t.Fatalf("an empty Sandbox encodes as %s; want neither key", out)
	}
}
