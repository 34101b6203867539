//go:build linux

package sandbox

import (
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// The credentials a routed call is done with: the caller's filesystem
// IDs and groups, and no capabilities (notifier.asCaller).

// hostIDs are what the host's credentials are, read once.
type hostIDs struct {
	root bool // euid 0
	caps [2]unix.CapUserData
}

var hostCreds = sync.OnceValues(func() (hostIDs, error) {
	h := hostIDs{root: unix.Geteuid() == 0}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	if err := unix.Capget(&hdr, &h.caps[0]); err != nil {
		return h, xerrors.Errorf("capget: %w", err)
	}
	return h, nil
})

// sameAsHost reports whether c are the host's own filesystem IDs and
// groups, which need no switch.
func (c *callerCreds) sameAsHost() bool {
	if c.fsuid != unix.Geteuid() || c.fsgid != unix.Getegid() {
		return false
	}
	n, err := rawGetgroups(nil)
	if err != nil || n != len(c.groups) {
		return false
	}
	gs := make([]uint32, n)
	if _, err := rawGetgroups(gs); err != nil {
		return false
	}
	return slices.Equal(gs, c.groups)
}

// callerCreds are the IDs the kernel checks a caller's file operations
// with.
type callerCreds struct {
	fsuid, fsgid int
	groups       []uint32
}

// readCreds reads pid's filesystem IDs and groups from /proc.
func readCreds(pid int) (*callerCreds, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil, err
	}
	c := &callerCreds{fsuid: -1, fsgid: -1}
	for _, line := range strings.Split(string(data), "\n") {
		key, val, _ := strings.Cut(line, ":")
		f := strings.Fields(val)
		switch {
		case key == "Uid" && len(f) == 4:
			c.fsuid, _ = strconv.Atoi(f[3])
		case key == "Gid" && len(f) == 4:
			c.fsgid, _ = strconv.Atoi(f[3])
		case key == "Groups":
			for _, g := range f {
				v, err := strconv.ParseUint(g, 10, 32)
				if err != nil {
					return nil, err
				}
				c.groups = append(c.groups, uint32(v))
			}
		}
	}
	if c.fsuid < 0 || c.fsgid < 0 {
		return nil, xerrors.Errorf("no IDs in /proc/%d/status", pid)
	}
	return c, nil
}

// asCaller runs f on the calling goroutine's thread, locked, with the
// tree's filesystem IDs and groups (on a root host) and no effective
// capabilities, and returns what f returned. restored is false if the
// thread could not be given back the host's credentials: it stays locked
// then, and the caller's goroutine must end (Go then ends the thread).
func (n *notifier) asCaller(f func() unix.Errno) (errno unix.Errno, restored bool) {
	if n.creds == nil && !n.dropCaps {
		return f(), true
	}
	runtime.LockOSThread()
	undo, err := takeCreds(n.creds, n.caps)
	if err != nil {
		return unix.EPERM, false
	}
	errno = f()
	if undo() != nil {
		return errno, false
	}
	runtime.UnlockOSThread()
	return errno, true
}

// takeCreds gives the calling (locked) thread creds, if any, and empties
// its effective capabilities (saved: the host's); undo gives back what it
// had.
func takeCreds(creds *callerCreds, saved [2]unix.CapUserData) (undo func() error, err error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	fsuid, fsgid := unix.Geteuid(), unix.Getegid()
	var groups []uint32
	if creds != nil {
		n, err := rawGetgroups(nil)
		if err != nil {
			return nil, err
		}
		groups = make([]uint32, n)
		if _, err := rawGetgroups(groups); err != nil {
			return nil, err
		}
	}
	undo = func() error {
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		if err := unix.Capset(&hdr, &saved[0]); err != nil {
			return err
		}
		if creds == nil {
			return nil
		}
		_ = unix.Setfsuid(fsuid)
		_ = unix.Setfsgid(fsgid)
		if err := rawSetgroups(groups); err != nil {
			return err
		}
		if cur, _ := unix.SetfsuidRetUid(-1); cur != fsuid {
			return xerrors.New("fsuid not restored")
		}
		if cur, _ := unix.SetfsgidRetGid(-1); cur != fsgid {
			return xerrors.New("fsgid not restored")
		}
		return nil
	}
	if creds != nil {
		if err := rawSetgroups(creds.groups); err != nil {
			return nil, err
		}
		_ = unix.Setfsgid(creds.fsgid)
		_ = unix.Setfsuid(creds.fsuid)
		cu, _ := unix.SetfsuidRetUid(-1)
		cg, _ := unix.SetfsgidRetGid(-1)
		if cu != creds.fsuid || cg != creds.fsgid {
			_ = undo()
			return nil, xerrors.New("the caller's filesystem IDs could not be taken")
		}
	}
	none := saved
	none[0].Effective, none[1].Effective = 0, 0
	if err := unix.Capset(&hdr, &none[0]); err != nil {
		_ = undo()
		return nil, err
	}
	return undo, nil
}

// rawGetgroups and rawSetgroups read and set the calling thread's groups
// only (the system call is per thread; libc and Go's syscall package set
// every thread's).
func rawGetgroups(gs []uint32) (int, error) {
	var p unsafe.Pointer
	if len(gs) > 0 {
		p = unsafe.Pointer(&gs[0])
	}
	n, _, errno := unix.RawSyscall(unix.SYS_GETGROUPS, uintptr(len(gs)), uintptr(p), 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

func rawSetgroups(gs []uint32) error {
	var p unsafe.Pointer
	if len(gs) > 0 {
		p = unsafe.Pointer(&gs[0])
	}
	_, _, errno := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(gs)), uintptr(p), 0)
	if errno != 0 {
		return errno
	}
	return nil
}
