//go:build linux

package proc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procvisor/proc"
	"golang.org/x/sys/unix"
)

// TestReviewWatchdogDuplicateGroupID: a group ID can be registered twice.
// A record's leader is reaped while a member of its group lives on; the
// member dies and is reaped before anything looks at the group again (here
// the record is not final yet: a member that left the group with setsid
// holds its stdout). The ID is free, and the next child the Manager starts
// may get it: guard(P) runs while the first group's slot still holds P.
// The watchdog kept one slot per ID, so the second registration orphaned
// the first slot, the first group's forget blanked the second group's
// slot, and the second group's forget found nothing: P stayed in the file
// after both groups were seen empty, and a stranger that later leads group
// P dies with the host (design section 14: never kill a tree already seen
// empty).
func TestReviewWatchdogDuplicateGroupID(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	host := startHost(t, helperCmd("review-dup-host"))
	vals := map[string]int{}
	for _, line := range host.linesUntil("ready") {
		k, v, _ := strings.Cut(line, " ")
		n, err := strconv.Atoi(v)
		if err != nil {
			host.fatalf(t, "host said %q", line)
		}
		vals[k] = n
	}
	if why, ok := vals["skip"]; ok {
		switch why {
		case 1:
			t.Skip("cannot write " + nsLastPID + " (needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE) to steer PIDs")
		default:
			t.Skipf("another process took the freed PID every time (%d tries)", recycleTries)
		}
	}
	stranger, watchdog := vals["stranger"], vals["watchdog"]
	if stranger == 0 || watchdog == 0 {
		host.fatalf(t, "host said %v", vals)
	}
	defer func() { _ = syscall.Kill(-stranger, syscall.SIGKILL) }()
	strangerFD := treePidfd(t, stranger)
	watchdogFD := treePidfd(t, watchdog)
	t.Logf("group %d was registered by two records in turn, both seen empty; stranger %d now leads group %d", stranger, stranger, stranger)

	_ = host.kill(ctx, t)
	treeWaitPidfd(ctx, t, watchdogFD, "the watchdog to act and exit")
	// SIGKILL is sent before the watchdog exits; give the stranger two
	// seconds to show it died.
	if diesWithin(strangerFD, 2*time.Second) {
		t.Errorf("the host-death watchdog killed process group %d, a stranger's: two records of the Manager had led a group of that ID in turn, and both were seen empty", stranger)
	}
}

var _ = helper("review-dup-host", reviewDupHost)

// reviewDupHost is the host of TestReviewWatchdogDuplicateGroupID. It is a
// subreaper, so that it reaps the first record's member itself (and so
// decides when the ID is free). It prints "skip 1" where PIDs cannot be
// steered, "skip 2" where the ID could not be recycled, otherwise the
// stranger's PID and the watchdog's; then "ready".
func reviewDupHost([]string) int {
	cur, err := os.ReadFile(nsLastPID)
	if err == nil {
		err = os.WriteFile(nsLastPID, bytes.TrimSpace(cur), 0)
	}
	if errors.Is(err, fs.ErrPermission) {
		fmt.Println("skip 1")
		fmt.Println("ready")
		return hostWait()
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return hostFail(err)
	}
	ctx := context.Background()
	// The first record's drain never ends on its own: it stays not final
	// until its stdout closes.
	m := proc.NewManager(proc.Options{Containment: proc.ContainGroup, DrainQuiet: time.Hour, DrainTimeout: time.Hour})
	// A holder out of the group (setsid) keeps stdout open; a member in
	// the group outlives the leader.
	p1, err := m.Start(proc.StartRequest{Command: `setsid sleep 600 & echo holder $!; sleep 600 & echo member $!; echo ok`})
	if err != nil {
		return hostFail(err)
	}
	if _, err := p1.WaitFor(ctx, regexp.MustCompile(`^ok$`), true); err != nil {
		return hostFail(err)
	}
	pids := map[string]int{}
	for _, line := range strings.Split(p1.Output().Text, "\n") {
		k, v, _ := strings.Cut(line, " ")
		pids[k], _ = strconv.Atoi(v)
	}
	leader, holder, member := p1.Info().PID, pids["holder"], pids["member"]
	if holder == 0 || member == 0 {
		return hostFail(fmt.Errorf("first record said %q", p1.Output().Text))
	}
	// The leader exits after "ok" and the exit goroutine reaps it (then
	// looks at the group once: the member lives). kill(leader, 0) fails
	// once it is reaped: its group still holds the ID, so nobody else has
	// it yet.
	for !errors.Is(unix.Kill(leader, 0), unix.ESRCH) {
		runtime.Gosched()
	}
	// The member dies; the host reaps it: group `leader` is gone, its ID
	// free, and nothing looked (the record is not final).
	_ = unix.Kill(member, unix.SIGKILL)
	if _, err := unix.Wait4(member, nil, 0, nil); err != nil {
		return hostFail(fmt.Errorf("reap member %d: %w", member, err))
	}
	// The Manager's next child takes the ID.
	var p2 *proc.Process
	for range recycleTries {
		if err := os.WriteFile(nsLastPID, []byte(strconv.Itoa(leader-1)), 0); err != nil {
			return hostFail(err)
		}
		p, err := m.Start(proc.StartRequest{Args: []string{"sleep", "600"}})
		if err != nil {
			return hostFail(err)
		}
		if p.Info().PID == leader {
			p2 = p
			break
		}
		_ = p.Signal(proc.Kill)
		_ = p.Wait(ctx)
	}
	if p2 == nil {
		fmt.Println("skip 2")
		fmt.Println("ready")
		return hostWait()
	}
	// The first record becomes final: its stdout closes. Its tree is
	// settled (the leader's PID names a newcomer: gone).
	_ = unix.Kill(holder, unix.SIGKILL)
	if _, err := unix.Wait4(holder, nil, 0, nil); err != nil {
		return hostFail(fmt.Errorf("reap holder %d: %w", holder, err))
	}
	if err := p1.Wait(ctx); err != nil {
		return hostFail(err)
	}
	// The second record's group dies and is seen empty.
	if err := p2.Signal(proc.Kill); err != nil {
		return hostFail(err)
	}
	if err := p2.Wait(ctx); err != nil {
		return hostFail(err)
	}
	if err := p2.Signal(proc.Kill); !errors.Is(err, proc.ErrNotRunning) {
		return hostFail(fmt.Errorf("Signal after final = %v; want ErrNotRunning", err))
	}
	// A stranger takes the ID and leads a group of its own.
	stranger, err := recycle(leader, "exec sleep 600")
	switch {
	case errors.Is(err, errNoRecycle):
		fmt.Println("skip 2")
	case err != nil:
		return hostFail(err)
	default:
		fmt.Println("stranger", stranger.Process.Pid)
		fmt.Println("watchdog", findWatchdog())
	}
	fmt.Println("ready")
	return hostWait()
}
