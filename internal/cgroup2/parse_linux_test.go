package cgroup2

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseMountinfo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in    string
		mount, root string
		wantErr     bool
	}{
		{"unified", "24 1 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n", "/sys/fs/cgroup", "/", false},
		{"hybrid-after-v1",
			"30 25 0:26 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n" +
				"31 25 0:27 / /sys/fs/cgroup/unified rw shared:9 - cgroup2 cgroup2 rw\n",
			"/sys/fs/cgroup/unified", "/", false},
		{"container-root", "40 30 0:27 /docker/abc /sys/fs/cgroup ro master:9 - cgroup2 cgroup2 rw\n", "/sys/fs/cgroup", "/docker/abc", false},
		{"escaped", `40 30 0:27 /a\040b /mnt/c\011g\134x rw - cgroup2 none rw` + "\n", "/mnt/c\tg\\x", "/a b", false},
		{"optional-fields-with-dash", "41 30 0:27 / /m rw shared:1 master:2 - cgroup2 x rw\n", "/m", "/", false},
		{"none", "24 1 0:22 / /proc rw - proc proc rw\n", "", "", true},
		{"short-line", "24 1 0:22 / - cgroup2 x rw\n", "", "", true},
		{"empty", "", "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mount, root, err := parseMountinfo(strings.NewReader(tc.in))
			if (err != nil) != tc.wantErr || mount != tc.mount || root != tc.root {
				t.Errorf("parseMountinfo = %q, %q, %v; want %q, %q, error %v", mount, root, err, tc.mount, tc.root, tc.wantErr)
			}
		})
	}
}

func TestParseCgroupFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"0::/user.slice/session-1.scope\n", "/user.slice/session-1.scope", true},
		{"12:memory:/x\n1:name=systemd:/y\n0::/z\n", "/z", true},
		{"0::/\n", "/", true},
		{"0::/with space\n", "/with space", true},
		{"12:memory:/x\n", "", false},
		{"", "", false},
	} {
		got, ok := parseCgroupFile([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseCgroupFile(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParsePopulated(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{
		"populated 1\nfrozen 0\n": true,
		"populated 0\nfrozen 0\n": false,
		"frozen 1\npopulated 1\n": true,
		"populated 0":             false,
		"populated 1":             true,
		"frozen 0\n":              false, // no populated line: not populated
		"":                        false,
		"unpopulated 1\n":         false,
	} {
		if got := parsePopulated([]byte(in)); got != want {
			t.Errorf("parsePopulated(%q) = %v; want %v", in, got, want)
		}
	}
}

func TestParseKeyed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   string
		want map[string]int64
	}{
		{"cpu.stat",
			"usage_usec 1520\nuser_usec 1000\nsystem_usec 520\nnr_periods 0\nnr_throttled 0\nthrottled_usec 0\nnr_bursts 0\nburst_usec 0\n",
			map[string]int64{"usage_usec": 1520, "user_usec": 1000, "system_usec": 520, "nr_periods": 0, "nr_throttled": 0, "throttled_usec": 0, "nr_bursts": 0, "burst_usec": 0}},
		{"memory.events",
			"low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n",
			map[string]int64{"low": 0, "high": 0, "max": 12, "oom": 2, "oom_kill": 1, "oom_group_kill": 0}},
		{"no-trailing-newline", "oom_kill 3", map[string]int64{"oom_kill": 3}},
		{"junk-left-out", "user_usec x\nnope\n\nsystem_usec 7\n", map[string]int64{"system_usec": 7}},
		{"empty", "", map[string]int64{}},
		{"no-value", "oom_kill\nmax 1\n", map[string]int64{"max": 1}},
	} {
		got := map[string]int64{}
		parseKeyed([]byte(tc.in), func(k []byte, v int64) { got[string(k)] = v })
		if !maps.Equal(got, tc.want) {
			t.Errorf("%s: parseKeyed = %v; want %v", tc.name, got, tc.want)
		}
	}
}

func TestParseProcs(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]int{
		"12\n345\n":  {12, 345},
		"":           nil,
		"7":          {7},
		"1\nx\n2\n":  {1, 2},
		"\n\n99\n\n": {99},
	} {
		if got := parseProcs([]byte(in)); !slices.Equal(got, want) {
			t.Errorf("parseProcs(%q) = %v; want %v", in, got, want)
		}
	}
}

// TestSetLimits pins the values written into a cgroup laid out like one
// with the memory, pids and cpu controllers (the development machines have
// none on their cgroup v2 mount, so the real files cannot be written
// there), and that a missing controller file is ErrNoController naming
// the controller, and is never created.
func TestSetLimits(t *testing.T) {
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
			if err := (Dir{Path: dir}).SetLimits(tc.limits); err != nil {
				t.Fatalf("SetLimits(%+v) = %v", tc.limits, err)
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
		err := Dir{Path: dir}.SetLimits(Limits{MemoryBytes: 1 << 20, Pids: 8})
		if !errors.Is(err, ErrNoController) || !strings.Contains(err.Error(), "pids controller") {
			t.Errorf("SetLimits with no pids.max = %v; want ErrNoController naming the pids controller", err)
		}
		if _, statErr := os.Stat(filepath.Join(dir, "pids.max")); !errors.Is(statErr, os.ErrNotExist) {
			t.Errorf("SetLimits created pids.max (%v); a missing controller must not be faked", statErr)
		}
	})
}

func TestKeyedValue(t *testing.T) {
	t.Parallel()
	data := []byte("nr_descendants 3\nnr_dying_descendants 1\nnr_descendants 9\n")
	if n, ok := keyedValue(data, "nr_descendants"); n != 3 || !ok {
		t.Errorf("keyedValue(nr_descendants) = %d, %v; want 3, true (the first line)", n, ok)
	}
	if n, ok := keyedValue(data, "nr_descendant"); n != 0 || ok {
		t.Errorf("keyedValue(nr_descendant) = %d, %v; want 0, false (no line has that key)", n, ok)
	}
}
