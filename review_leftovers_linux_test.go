//go:build linux

package proc_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/procvisor/proc"
)

func init() {
	helpers["review-ns-host"] = reviewNSHost
}

// TestReviewLeftoversKillLiveManagerInOtherPIDNamespace: removeLeftovers
// decides that a Manager's host is dead from the PID and start time in the
// cgroup's name, looked up in the caller's /proc. A host in another PID
// namespace (a container sharing a delegated CgroupParent, a sandbox made
// with unshare) names its cgroup with its own namespace's PID, which the
// other Manager reads as some unrelated process (or none) — so a new
// Manager on the same parent kills the live host's trees and removes its
// cgroups. Design section 13: "It never touches a cgroup of a live
// Manager."
func TestReviewLeftoversKillLiveManagerInOtherPIDNamespace(t *testing.T) {
	t.Parallel()
	useHelper("review-ns-host") // the unused-helper check: also where unshare is missing
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare")
	}
	ctx := testCtx(t)
	parent := treeOptions(t, treeModes[1]).CgroupParent
	host := exec.Command(unshare, "--pid", "--fork", "--mount-proc", os.Args[0], parent)
	host.Env = helperCmd("review-ns-host").Env
	host.Stderr = os.Stderr
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := host.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		t.Skipf("unshare: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- host.Wait() }()
	defer func() {
		_ = in.Close() // the host closes its Manager and exits
		recv(ctx, t, exited, "the host's end")
	}()
	sc := bufio.NewScanner(out)
	var record string
	for sc.Scan() && sc.Text() != "ready" {
		record = strings.TrimPrefix(sc.Text(), "cgroup ")
	}
	if record == "" {
		t.Fatalf("the host said nothing")
	}
	record = filepath.Join(filepath.Dir(parent), record)
	t.Logf("live host in another PID namespace; its record's cgroup: %s", record)

	// Another Manager on the same parent, in this namespace.
	m := newManager(t, proc.Options{Containment: proc.ContainCgroup, CgroupParent: parent})
	if _, err := m.Run(ctx, proc.StartRequest{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	events, err := os.ReadFile(filepath.Join(record, "cgroup.events"))
	if err != nil || !bytes.Contains(events, []byte("populated 1")) {
		t.Errorf("after a second Manager opened on the parent, the live host's record cgroup %s: %q, %v; want it untouched and populated (its sleep killed as a leftover)", record, events, err)
	}
}

// reviewNSHost runs in a PID namespace of its own: it starts `sleep 600`
// in cgroup mode below args[0], prints the record's cgroup (relative to
// the mount), and waits for its stdin to close, then Closes.
func reviewNSHost(args []string) int {
	m := proc.NewManager(proc.Options{Containment: proc.ContainCgroup, CgroupParent: args[0]})
	defer m.Close()
	p, err := m.Start(proc.StartRequest{Args: []string{"sleep", "600"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "host:", err)
		return 1
	}
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.Info().PID))
	line := strings.TrimSpace(string(data[bytes.Index(data, []byte("0::"))+3:]))
	// Relative to the parent's parent: the test knows the parent's path.
	fmt.Println("cgroup", filepath.Join(filepath.Base(args[0]), reviewAfter(line, filepath.Base(args[0]))))
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

func reviewAfter(s, sep string) string {
	_, after, _ := strings.Cut(s, sep)
	return after
}
