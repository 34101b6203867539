//go:build linux

package sandbox

import (
	"errors"
	"os"
	"slices"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"

	"github.com/procvisor/proc/internal/procfs"
)

// Landlock, the filesystem half (and TCP as a second layer): rulesets
// that together handle every right the kernel's ABI knows, with read and
// execute allowed everywhere but in other terminals, everything beneath
// the writable roots, and a few devices read-write. Made on the caller's
// thread (they are only descriptors) and enforced on the restricted
// thread.

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

// fsRead are the rights of the read layer; the write layer handles the
// others.
const fsRead = fsReadExec

// rulesetAttr is the kernel's struct landlock_ruleset_attr of the write
// layer, with the size ABI abi knows: access_fs (1-3), access_net (4-5),
// scoped (6 on).
func rulesetAttr(p Policy, abi int) (unix.LandlockRulesetAttr, uintptr) {
	attr := unix.LandlockRulesetAttr{Access_fs: handledFS(abi) &^ fsRead}
	size := unsafe.Offsetof(attr.Access_net)
	if abi >= 4 {
		size = unsafe.Offsetof(attr.Scoped)
		if !p.Network {
			// Only ConnectPorts' rules allow a port to connect to; binding
			// any port is allowed with Listen, else denied. The seccomp
			// filter refuses TCP sockets without either.
			attr.Access_net = unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
			if !p.Listen {
				attr.Access_net |= unix.LANDLOCK_ACCESS_NET_BIND_TCP
			}
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

// A sandboxed thread is restricted by two Landlock layers, each of which
// must allow an access (the kernel intersects them):
//
//   - the read layer handles reading and executing: allowed everywhere
//     but in terminals other than the record's own, entry by entry of /
//     and /dev (readEntries). It is the same for every start without a
//     terminal, so it is made once and kept (one descriptor), and made
//     again only when / or /dev changes; a start with a terminal makes
//     its own;
//   - the write layer handles everything else: writing beneath the roots
//     and to a few devices, and the network and scopes of the policy. It
//     is the same for every start of a policy while its paths name the
//     same objects, so it is kept too (layers, ReadRules.write).

// newRuleset makes the write layer of p for ABI abi and returns its
// descriptor (close-on-exec), which the caller closes, and the objects its
// rules were added on: the roots', then the devices'.
func newRuleset(p Policy, abi int) (fd int, ids []fileID, err error) {
	attr, size := rulesetAttr(p, abi)
	if fd, err = createRuleset(&attr, size); err != nil {
		return -1, nil, err
	}
	defer func() {
		if err != nil {
			_ = unix.Close(fd)
		}
	}()
	handled := attr.Access_fs
	ids = make([]fileID, 0, len(p.WritableRoots)+6)
	for _, root := range p.WritableRoots {
		id, err := addRule(fd, root, handled, false)
		if err != nil {
			return -1, nil, err
		}
		ids = append(ids, id)
	}
	if !p.Network {
		for _, port := range p.ConnectPorts {
			if err := addPortRule(fd, port); err != nil {
				return -1, nil, err
			}
		}
	}
	for i, dev := range devices(p) {
		// A host without one of the null devices or ptmx has nothing to
		// allow; the terminal must exist.
		id, err := addRule(fd, dev, fsDevice&handled, i < 4)
		if err != nil {
			return -1, nil, err
		}
		ids = append(ids, id)
	}
	return fd, ids, nil
}

// fileID is an object a rule was added on, as fstat found it; absent: an
// optional device that did not exist, so no rule was added.
type fileID struct {
	dev, ino uint64
	absent   bool
}

// idOf is the object st describes.
func idOf(st *unix.Stat_t) fileID { return fileID{dev: st.Dev, ino: st.Ino} }

// devices are the devices the tree may read and write, with their ioctls:
// the null devices, /dev/ptmx (a program may open a terminal's master,
// though Landlock refuses its peer, a /dev/pts/N), and a terminal of the
// record's own with /dev/tty (which can be only the caller's controlling
// terminal: no other is readable to become one).
func devices(p Policy) []string {
	devs := []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/ptmx"}
	if p.TTY != "" {
		devs = append(devs, p.TTY, "/dev/tty")
	}
	return devs
}

func createRuleset(attr *unix.LandlockRulesetAttr, size uintptr) (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(attr)), size, 0)
	if errno != 0 {
		return -1, xerrors.Errorf("landlock_create_ruleset: %w", errno)
	}
	return int(r), nil
}

// readEntry is a path the tree may read beneath, open as O_PATH.
type readEntry struct {
	fd  int
	dir bool
}

func closeEntries(entries []readEntry) {
	for _, e := range entries {
		unix.Close(e.fd)
	}
}

// makeReadLayer makes a read layer of entries, and tty's read if any.
func makeReadLayer(entries []readEntry, tty string) (fd int, err error) {
	attr := unix.LandlockRulesetAttr{Access_fs: fsRead}
	if fd, err = createRuleset(&attr, unsafe.Offsetof(attr.Access_net)); err != nil {
		return -1, err
	}
	defer func() {
		if err != nil {
			_ = unix.Close(fd)
		}
	}()
	// Directories may be listed everywhere (/dev/pts included), and
	// programs executed from anywhere.
	if _, err := addRule(fd, "/", unix.LANDLOCK_ACCESS_FS_READ_DIR|unix.LANDLOCK_ACCESS_FS_EXECUTE, false); err != nil {
		return -1, err
	}
	for _, e := range entries {
		access := uint64(fsRead)
		if !e.dir {
			access &= fsFileRights
		}
		if err := addRuleFD(fd, e.fd, access); err != nil {
			return -1, err
		}
	}
	devs := []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/ptmx", "/dev/tty"}
	if tty != "" {
		devs = append(devs, tty)
	}
	for i, dev := range devs {
		if _, err := addRule(fd, dev, unix.LANDLOCK_ACCESS_FS_READ_FILE, i < 5); err != nil {
			return -1, err
		}
	}
	return fd, nil
}

// readEntries opens what the read layer grants: the entries of / and,
// where a terminal lies below one, of the directories down to it, but
// the terminals themselves: those named in /dev (terminalDev), and every
// mount of a terminal file system elsewhere (terminalMounts: a bind mount
// of /dev/pts, a chroot's /dev). Landlock has no rule that takes a right
// away, so read is granted entry by entry. Symbolic links need no rule:
// access is checked where they lead. A device node copied into an
// ordinary directory cannot be found this way (making one needs
// CAP_MKNOD, which no tree has).
func readEntries() (entries []readEntry, err error) {
	defer func() {
		if err != nil {
			closeEntries(entries)
		}
	}()
	excluded, err := terminalMounts()
	if err != nil {
		return nil, err
	}
	var walk func(dir string) error
	walk = func(dir string) error {
		names, err := os.ReadDir(dir)
		if err != nil {
			return xerrors.Errorf("landlock read layer: %w", err)
		}
		for _, e := range names {
			path := dir + e.Name()
			switch {
			case e.Type()&os.ModeSymlink != 0, dir == "/dev/" && terminalDev(e.Name()), excluded[path]:
				continue
			case path == "/dev" || hasBelow(excluded, path):
				if err := walk(path + "/"); err != nil {
					return err
				}
				continue
			}
			fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if errors.Is(err, unix.ENOENT) {
				continue // removed since it was listed
			}
			if err != nil {
				return xerrors.Errorf("landlock read layer: %w", &os.PathError{Op: "open", Path: path, Err: err})
			}
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				unix.Close(fd)
				return xerrors.Errorf("landlock read layer: %w", err)
			}
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				unix.Close(fd)
				continue
			}
			entries = append(entries, readEntry{fd: fd, dir: st.Mode&unix.S_IFMT == unix.S_IFDIR})
		}
		return nil
	}
	return entries, walk("/")
}

// hasBelow reports whether a path in set lies below dir.
func hasBelow(set map[string]bool, dir string) bool {
	for p := range set {
		if strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

// terminalMounts returns the mount points of terminal file systems
// (devpts, and devtmpfs, which holds the consoles and ttys) other than
// /dev and /dev/pts, which terminalDev covers, as the host sees them.
func terminalMounts() (map[string]bool, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, xerrors.Errorf("landlock read layer: %w", err)
	}
	mounts := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		// ID parent major:minor root mount-point options [optional...] - type source options
		fields := strings.Fields(line)
		sep := slices.Index(fields, "-")
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		if fstype := fields[sep+1]; fstype != "devpts" && fstype != "devtmpfs" {
			continue
		}
		if point := procfs.UnescapeMount(fields[4]); point != "/dev" && point != "/dev/pts" {
			mounts[point] = true
		}
	}
	return mounts, nil
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
// directory: then only the rights a file can have), and returns the
// object the rule holds. With optional, a path that does not exist is
// skipped (absent).
func addRule(ruleset int, path string, access uint64, optional bool) (fileID, error) {
	pfd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if optional && errors.Is(err, unix.ENOENT) {
			return fileID{absent: true}, nil
		}
		return fileID{}, xerrors.Errorf("landlock rule for %s: %w", path, &os.PathError{Op: "open", Path: path, Err: err})
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return fileID{}, xerrors.Errorf("landlock rule for %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= fsFileRights
	}
	if err := addRuleFD(ruleset, pfd, access); err != nil {
		return fileID{}, xerrors.Errorf("landlock rule for %s: %w", path, err)
	}
	return idOf(&st), nil
}

// netPortAttr is the kernel's struct landlock_net_port_attr (ABI 4).
type netPortAttr struct {
	allowedAccess uint64
	port          uint64
}

// ruleNetPort is LANDLOCK_RULE_NET_PORT.
const ruleNetPort = 2

// addPortRule allows connecting to TCP port.
func addPortRule(ruleset, port int) error {
	rule := netPortAttr{allowedAccess: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(port)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), ruleNetPort,
		uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
	if errno != 0 {
		return xerrors.Errorf("landlock rule for port %d: %w", port, errno)
	}
	return nil
}

// addRuleFD allows access beneath the object pfd (O_PATH) refers to.
func addRuleFD(ruleset, pfd int, access uint64) error {
	rule := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(pfd)}
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(ruleset), unix.LANDLOCK_RULE_PATH_BENEATH,
		uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
	if errno != 0 {
		return xerrors.Errorf("landlock_add_rule: %w", errno)
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
