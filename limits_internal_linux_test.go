//go:build linux

package proc

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteLimitsFiles pins the values written into a cgroup laid out like
// one with the memory, pids and cpu controllers (these machines have none
// on their cgroup v2 mount, so the real files cannot be written here), and
// that a missing controller file is ErrUnsupported naming the controller.
func TestWriteLimitsFiles(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		limits Limits
		want   map[string]string
	}{
		{"all", Limits{MemoryBytes: 2 << 30, Pids: 256, CPUs: 1.5},
			map[string]string{"memory.max": "2147483648", "pids.max": "256", "cpu.max": "150000 100000"}},
		{"half-a-core", Limits{CPUs: 0.5}, map[string]string{"memory.max": "max", "pids.max": "max", "cpu.max": "50000 100000"}},
		{"tiny-cpu-gets-the-kernel-minimum", Limits{CPUs: 0.001}, map[string]string{"cpu.max": "1000 100000"}},
		{"memory-only", Limits{MemoryBytes: 64 << 20}, map[string]string{"memory.max": "67108864", "pids.max": "max"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for _, f := range []string{"memory.max", "pids.max", "cpu.max"} {
				if err := os.WriteFile(filepath.Join(dir, f), []byte("max"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := writeLimits(dir, tc.limits); err != nil {
				t.Fatalf("writeLimits(%+v) = %v", tc.limits, err)
			}
			for f, want := range tc.want {
				got, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil || string(got) != want {
					t.Errorf("%s = %q, %v; want %q", f, got, err, want)
				}
			}
		})
	}

	t.Run("missing-controller", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte("max"), 0o644); err != nil {
			t.Fatal(err)
		}
		err := writeLimits(dir, Limits{MemoryBytes: 1 << 20, Pids: 8})
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "pids controller") {
			t.Errorf("writeLimits with no pids.max = %v; want ErrUnsupported naming the pids controller", err)
		}
		if _, statErr := os.Stat(filepath.Join(dir, "pids.max")); !errors.Is(statErr, os.ErrNotExist) {
			t.Errorf("writeLimits created pids.max (%v); a missing controller must not be faked", statErr)
		}
	})
}

// TestParseCgroupName pins which names a Manager takes for another
// Manager's cgroup: only its own pattern, never anything else.
func TestParseCgroupName(t *testing.T) {
	t.Parallel()
	for name, ok := range map[string]bool{
		"procvisor-4026531836-123-4567-1":      true,
		"procvisor-keep-4026531836-123-4567-1": false, // kept: never parsed as a candidate
		"procvisor-123-4567-1":                 false, // no PID namespace
		"procvisor-4026531836-abc-4567-1":      false,
		"procvisor-4026531836-123-4567-1-x":    false,
		"system.slice":                         false,
		"":                                     false,
	} {
		ns, pid, start, got := parseCgroupName(name)
		if got != ok {
			t.Errorf("parseCgroupName(%q) = %s, %d, %q, %v; want ok %v", name, ns, pid, start, got, ok)
		}
		if got && (ns != "4026531836" || pid != 123 || start != "4567") {
			t.Errorf("parseCgroupName(%q) = %s, %d, %q; want 4026531836, 123, 4567", name, ns, pid, start)
		}
	}
}
