//go:build linux

package sandbox

import (
	"errors"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// Landlock, the filesystem half (and TCP as a second layer): a ruleset
// that handles every right the kernel's ABI knows, with read and execute
// allowed everywhere, everything beneath the writable roots, and a few
// devices read-write. Made on the caller's thread (it is only a
// descriptor) and enforced on the restricted thread.

// Rights grouped as the rules use them.
const (
	fsReadExec = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_EXECUTE
	// fsFileRights are the rights a rule on a file (not a directory) may
	// carry; the kernel refuses the others there.
	fsFileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	// fsDevice is a device the child may read and write, with its ioctls.
	// The null devices have none, but granting them makes isatty(3) there
	// fail with ENOTTY, as programs expect, not EACCES.
	fsDevice = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
)

// handledFS is every filesystem right Landlock ABI abi knows: all of them
// are denied except where a rule allows them.
func handledFS(abi int) uint64 {
	h := uint64(unix.LANDLOCK_ACCESS_FS_MAKE_SYM<<1 - 1) // ABI 1: EXECUTE .. MAKE_SYM
	if abi >= 2 {
		h |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		h |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		h |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return h
}

// rulesetAttr is the kernel's struct landlock_ruleset_attr, with the size
// ABI abi knows: access_fs (1-3), access_net (4-5), scoped (6 on).
func rulesetAttr(p Policy, abi int) (unix.LandlockRulesetAttr, uintptr) {
	attr := unix.LandlockRulesetAttr{Access_fs: handledFS(abi)}
	size := unsafe.Offsetof(attr.Access_net)
	if abi >= 4 {
		size = unsafe.Offsetof(attr.Scoped)
		if !p.Network {
			// No rule allows a port: every TCP bind and connect is denied,
			// beneath the seccomp filter that refuses the socket already.
			attr.Access_net = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
		}
	}
	if abi >= 6 {
		size = unsafe.Sizeof(attr)
		// Signals to processes outside the domain (the host above all)
		// are refused; with the network off, so are connections to
		// abstract Unix sockets outside it.
		attr.Scoped = unix.LANDLOCK_SCOPE_SIGNAL
		if !p.Network {
			attr.Scoped |= unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
		}
	}
	return attr, size
}

// newRuleset makes the Landlock ruleset of p for ABI abi and returns its
// descriptor (close-on-exec), which the caller closes.
func newRuleset(p Policy, abi int) (fd int, err error) {
	attr, size := rulesetAttr(p, abi)
	r, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if errno != 0 {
		return -1, xerrors.Errorf("landlock_create_ruleset: %w", errno)
	}
	fd = int(r)
	defer func() {
		if err != nil {
			_ = unix.Close(fd)
		}
	}()
	handled := attr.Access_fs
	if err := addReadRules(fd, handled); err != nil {
		return -1, err
	}
	for _, root := range p.WritableRoots {
		if err := addRule(fd, root, handled, false); err != nil {
			return -1, err
		}
	}
	// A terminal device of the record's own (and /dev/tty, which can be
	// only the caller's controlling terminal now), and /dev/ptmx, so that
	// a program may make a terminal of its own (its peer through
	// TIOCGPTPEER; opening the new /dev/pts/N by path is refused).
	devices := []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/ptmx"}
	if p.TTY != "" {
		devices = append(devices, p.TTY, "/dev/tty")
	}
	for i, dev := range devices {
		// A host without one of the null devices or ptmx has nothing to
		// allow; the terminal must exist.
		if err := addRule(fd, dev, fsDevice&handled, i < 4); err != nil {
			return -1, err
		}
	}
	if p.TTY == "" {
		// Readable as before (opening it without a controlling terminal
		// fails with ENXIO).
		if err := addRule(fd, "/dev/tty", fsReadExec&handled, true); err != nil {
			return -1, err
		}
	}
	return fd, nil
}

// addReadRules lets the tree read and execute everywhere but in other
// terminals: a terminal the tree could open could become its controlling
// terminal (and with /dev/tty its to write to), and reading one steals
// what is typed into it. Landlock has no rule that takes a right away, so
// read is granted on each entry of / but /dev, and of /dev but the
// terminals (terminalDev); listing directories is granted everywhere.
// Symbolic links need no rule: access is checked where they lead.
func addReadRules(fd int, handled uint64) error {
	if err := addRule(fd, "/", (unix.LANDLOCK_ACCESS_FS_READ_DIR|unix.LANDLOCK_ACCESS_FS_EXECUTE)&handled, false); err != nil {
		return err
	}
	for _, dir := range []string{"/", "/dev/"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return xerrors.Errorf("landlock read rules: %w", err)
		}
		for _, e := range entries {
			name := e.Name()
			if e.Type()&os.ModeSymlink != 0 || dir == "/" && name == "dev" || dir == "/dev/" && terminalDev(name) {
				continue
			}
			// An entry removed since it was listed has nothing to allow.
			if err := addRule(fd, dir+name, fsReadExec&handled, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// terminalDev reports whether the entry name of /dev is a terminal, a
// directory of terminals, or the input devices, none of which the tree
// may read but its own terminal (ptmx and tty get rules of their own).
func terminalDev(name string) bool {
	switch {
	case name == "pts", name == "ptmx", name == "tty", name == "console", name == "input":
		return true
	case strings.HasPrefix(name, "tty"), strings.HasPrefix(name, "vcs"), strings.HasPrefix(name, "hvc"):
		return true
	}
	return false
}

// addRule allows access beneath path (or on path, if it is not a
// directory: then only the rights a file can have). With optional, a path
// that does not exist is skipped.
func addRule(ruleset int, path string, access uint64, optional bool) error {
	pfd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if optional && errors.Is(err, unix.ENOENT) {
			return nil
		}
		return xerrors.Errorf("landlock rule for %s: %w", path, &os.PathError{Op: "open", Path: path, Err: err})
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return xerrors.Errorf("landlock rule for %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= fsFileRights
	}
	rule := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(pfd)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
	if errno != 0 {
		return xerrors.Errorf("landlock rule for %s: %w", path, errno)
	}
	return nil
}

// restrictSelf enforces the ruleset on the calling thread (only: without
// a flag that says otherwise, Landlock restricts one thread). The thread
// must have no-new-privileges already.
func restrictSelf(ruleset int) error {
	_, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(ruleset), 0, 0)
	if errno != 0 {
		return xerrors.Errorf("landlock_restrict_self: %w", errno)
	}
	return nil
}

// landlockABI asks the kernel for its Landlock ABI version.
func landlockABI() (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}
