//go:build linux

package sandbox

// rev-34: attack probes against the issue 34 fixes. Each TestAttack* test
// asserts what the contract (design section 17) promises; a failing test
// is a finding.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	sysFileGetattr = 468 // file_getattr (Linux 6.17), every architecture
	fsXflagNodump  = 0x80
	fsXflagNoatime = 0x40
)

// fileAttr is struct file_attr (FILE_ATTR_SIZE_VER0, 24 bytes).
type fileAttr struct {
	Xflags     uint64
	Extsize    uint32
	Nextents   uint32
	Projid     uint32
	Cowextsize uint32
}

func init() {
	// creat-mode=path:mode creates path with the mode given to open(2)
	// itself (umask 0): no chmod at all.
	ops["creat-mode"] = func(arg string) error {
		path, mode := splitArg(arg)
		unix.Umask(0)
		fd, err := unix.Open(path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, uint32(mode))
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
	// mknod-mode=path:mode: a regular file made by mknod(2) with mode.
	ops["mknod-mode"] = func(arg string) error {
		path, mode := splitArg(arg)
		unix.Umask(0)
		return unix.Mknod(path, unix.S_IFREG|uint32(mode), 0)
	}
	// file-setattr=path: file_setattr(2) (Linux 6.17) adding NODUMP and
	// NOATIME to path's inode flags (fsxattr), no ioctl involved.
	ops["file-setattr"] = func(path string) error {
		p, err := unix.BytePtrFromString(path)
		if err != nil {
			return err
		}
		var fa fileAttr
		_, _, errno := unix.Syscall6(sysFileGetattr, uintptr(atFDCWD), uintptr(unsafe.Pointer(p)),
			uintptr(unsafe.Pointer(&fa)), unsafe.Sizeof(fa), 0, 0)
		if errno != 0 {
			return errno
		}
		fa.Xflags |= fsXflagNodump | fsXflagNoatime
		_, _, errno = unix.Syscall6(sysFileSetattr, uintptr(atFDCWD), uintptr(unsafe.Pointer(p)),
			uintptr(unsafe.Pointer(&fa)), unsafe.Sizeof(fa), 0, 0)
		return errnoErr(errno)
	}
	// setversion=path: FS_IOC_SETVERSION (the inode's generation) on a
	// read-only descriptor.
	ops["setversion"] = func(path string) error {
		return onOpen(path+":0", unix.O_RDONLY, func(fd int, _ uint32) error {
			return unix.IoctlSetPointerInt(fd, iocSetVersion, 0x5eed)
		})
	}
}

// statOf returns what stat(2) says of path, or fails t.
func statOf(t *testing.T, path string) os.FileInfo {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// openTreeBin builds testdata/attack/opentree.c: in a user and mount
// namespace of its own (unshare(2) in a single-threaded C program, no
// exec, so its capabilities there stay), open_tree(DIR,
// OPEN_TREE_CLONE), then fchmodat, utimensat and fchownat of REL in it.
func openTreeBin(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	bin := filepath.Join(sharedDir(t), "opentree")
	if out, err := exec.Command(cc, "-O", "-o", bin, "testdata/attack/opentree.c").CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	return bin
}

func openTreeCmd(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd
}

// TestAttackFileSetattr: inode flags are refused only as ioctls; Linux 6.17's
// file_setattr(2) sets the same fsxattr flags by path, on a root-owned
// file outside the roots (a root child owns it). FS_IOC_SETVERSION
// changes the inode's generation with a read-only descriptor.
func TestAttackFileSetattr(t *testing.T) {
	support(t)
	ctx := testCtx(t)
	root, outside := sharedDir(t), sharedDir(t)
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	var before fileAttr
	attrOf := func(fa *fileAttr) {
		p, _ := unix.BytePtrFromString(victim)
		if _, _, errno := unix.Syscall6(sysFileGetattr, uintptr(atFDCWD), uintptr(unsafe.Pointer(p)),
			uintptr(unsafe.Pointer(fa)), unsafe.Sizeof(*fa), 0, 0); errno != 0 {
			t.Skipf("file_getattr: %v", errno)
		}
	}
	attrOf(&before)
	args := []string{"file-setattr=" + victim, "setversion=" + victim}
	res := run(ctx, t, opsCmd(nil, args...), Policy{WritableRoots: []string{root}}, true)
	t.Logf("child:\n%s", res.out)
	var after fileAttr
	attrOf(&after)
	if after.Xflags != before.Xflags {
		t.Errorf("%s outside the root: fsxattr flags %#x -> %#x (file_setattr)", victim, before.Xflags, after.Xflags)
	}
	if got := res.line(t, "file-setattr"); got != "EPERM" {
		t.Errorf("file-setattr: %s; want EPERM", got)
	}
	if got := res.line(t, "setversion"); got == "ok" {
		t.Errorf("setversion (FS_IOC_SETVERSION) on a file outside the roots: ok")
	}
}

// TestAttackOpenTreeNested: the host decides a routed call by the path the
// kernel gives for the opened object. Inside a detached mount (open_tree
// OPEN_TREE_CLONE, in a user and mount namespace of the tree's own, which
// Landlock does not forbid: nothing is mounted) that path is relative to
// the detached tree's root. So any outside directory D that holds
// D/<writable root path>/... lets the tree chmod, chown and touch what is
// there: the host reads "/<root>/..." and does it.
func TestAttackOpenTreeNested(t *testing.T) {
	support(t)
	ctx := testCtx(t)
	base := sharedDir(t)
	root := filepath.Join(base, "ws")
	outside := filepath.Join(base, "out")
	mirror := filepath.Join(outside, root) // outside/<root path>
	if err := os.MkdirAll(root, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(mirror, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(mirror, "victim")
	if err := os.WriteFile(victim, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	rel := strings.TrimPrefix(root, "/") + "/victim"
	res := run(ctx, t, openTreeCmd(openTreeBin(t), outside, rel, "0777"), Policy{WritableRoots: []string{root}}, true)
	attempted(t, res.out)
	st := statOf(t, victim)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s, outside the root: mode %v (was 0600; 0640 is the working-directory route)", victim, st.Mode())
	}
	if st.ModTime().Unix() == 1 {
		t.Errorf("%s, outside the root: times set to 1", victim)
	}
}

// TestAttackOpenTreeVarTmp: the same with a plausible policy: /tmp writable.
// /var holds tmp/, so every file in /var/tmp (systemd's private tmp
// directories, other users' files) can be chmodded by a tree that may
// write /tmp only.
func TestAttackOpenTreeVarTmp(t *testing.T) {
	support(t)
	ctx := testCtx(t)
	dir, err := os.MkdirTemp("/var/tmp", "attack-")
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	rel := strings.TrimPrefix(victim, "/var/")
	res := run(ctx, t, openTreeCmd(openTreeBin(t), "/var", rel, "0666"), Policy{WritableRoots: []string{"/tmp"}}, true)
	attempted(t, res.out)
	st := statOf(t, victim)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s (root /tmp only): mode %v (was 0600)", victim, st.Mode())
	}
}

var atFDCWD = unix.AT_FDCWD

func init() {
	// opentree-probe=dir:rel: open_tree and an O_PATH open inside, printing
	// what /proc/self/fd says of it.
	ops["opentree-probe"] = func(arg string) error {
		dir, rel, _ := strings.Cut(arg, ":")
		tree, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return fmt.Errorf("open_tree: %w", err)
		}
		defer unix.Close(tree)
		fd, err := unix.Openat(tree, rel, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("openat: %w", err)
		}
		defer unix.Close(fd)
		where, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		fmt.Printf("opentree-probe sees %q\n", where)
		return nil
	}
}

// TestAttackHostThreads (E3): the host's threads by TID, not only its PID,
// and a PID with high bits set, are refused.
func TestAttackHostThreads(t *testing.T) {
	support(t)
	ctx := testCtx(t)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	want := map[string]string{}
	for _, e := range tasks {
		for _, op := range []string{"prlimit", "renice", "affinity"} {
			a := op + "=" + e.Name()
			args = append(args, a)
			want[a] = "EPERM"
		}
	}
	for _, a := range []string{"prlimit-hi=parent", "setattr-hi=parent"} {
		args = append(args, a)
		want[a] = "EPERM"
	}
	res := run(ctx, t, opsCmd(nil, args...), Policy{WritableRoots: []string{t.TempDir()}}, true)
	lines := strings.Split(strings.TrimSpace(res.out), "\n")
	if len(lines) != len(args) {
		t.Fatalf("output %q for %d ops", res.out, len(args))
	}
	for i, a := range args {
		_, got, _ := strings.Cut(lines[i], ": ")
		// ESRCH: the thread ended (the restricted thread, say).
		if got != want[a] && got != "ESRCH" {
			t.Errorf("%s: %s; want EPERM", a, got)
		}
	}
}

func init() {
	// prlimit-hi=pid: prlimit64 with the PID in the low word and junk in
	// the high word (the kernel reads an int).
	ops["prlimit-hi"] = func(pid string) error {
		n := pidArg(pid)
		var old unix.Rlimit
		if err := unix.Prlimit(n, unix.RLIMIT_NOFILE, nil, &old); err != nil {
			return err
		}
		_, _, errno := unix.RawSyscall6(unix.SYS_PRLIMIT64, uintptr(n)|1<<32, unix.RLIMIT_NOFILE, uintptr(unsafe.Pointer(&old)), 0, 0, 0)
		return errnoErr(errno)
	}
	// setattr-hi=pid: sched_setattr(SCHED_OTHER, nice 0) with junk in the
	// PID's high word.
	ops["setattr-hi"] = func(pid string) error {
		n := pidArg(pid)
		attr := [14]uint32{0: 56} // size; policy 0, flags 0, nice 0
		_, _, errno := unix.RawSyscall(unix.SYS_SCHED_SETATTR, uintptr(n)|1<<32, uintptr(unsafe.Pointer(&attr)), 0)
		return errnoErr(errno)
	}
}

// TestAttackOpenTreeNonRootHost: the open_tree attack from a uid 65534 host,
// on a file of that user's outside the root (as ~/.ssh is a user's).
func TestAttackOpenTreeNonRootHost(t *testing.T) {
	support(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a uid 65534 host")
	}
	ctx := testCtx(t)
	base := sharedDir(t)
	root := filepath.Join(base, "ws")
	outside := filepath.Join(base, "out")
	mirror := filepath.Join(outside, root)
	for _, d := range []string{root, mirror} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	victim := filepath.Join(mirror, "victim")
	if err := os.WriteFile(victim, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{root, victim} {
		if err := os.Chown(f, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	rel := strings.TrimPrefix(root, "/") + "/victim"
	out := runAsNobody(ctx, t, "exec:"+openTreeBin(t), root, outside, rel, "0666")
	attempted(t, out)
	st := statOf(t, victim)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s, the host user's file outside the root: mode %v (was 0600)", victim, st.Mode())
	}
}

// attempted fails the test unless the open_tree attack's output shows it
// ran and was refused: open_tree itself, or the routed call it set up.
func attempted(t *testing.T, out string) {
	t.Helper()
	if !strings.Contains(out, "open_tree: Operation not permitted") && !strings.Contains(out, "fchmodat: Operation not permitted") {
		t.Errorf("the attack's output shows no refusal:\n%s", out)
	}
}

func init() {
	// copy-mode=src:dst:mode: dst made by open(O_CREAT, mode) with umask
	// 0, then src's bytes written into it.
	ops["copy-mode"] = func(arg string) error {
		rest, mode := splitArg(arg)
		src, dst, _ := strings.Cut(rest, ":")
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		unix.Umask(0)
		fd, err := unix.Open(dst, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, uint32(mode))
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		_, err = unix.Write(fd, data)
		return err
	}
}

// TestAttackSetgidProgram: the E2 exploit without chmod. A write by a task
// without CAP_FSETID clears the setuid bit, but the setgid bit only if
// the writer is not in the file's group: a root child's program created
// with mode 02755 stays setgid root after its bytes are written, and
// uid 65534 runs it with egid 0.
func TestAttackSetgidProgram(t *testing.T) {
	support(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	ctx := testCtx(t)
	root := sharedDir(t)
	ids := filepath.Join(sharedDir(t), "ids")
	if out, err := exec.Command(cc, "-o", ids, "testdata/attack/ids.c").CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	sgid, suid := filepath.Join(root, "sgid"), filepath.Join(root, "suid")
	args := []string{"copy-mode=" + ids + ":" + sgid + ":02755", "copy-mode=" + ids + ":" + suid + ":04755"}
	res := run(ctx, t, opsCmd(nil, args...), Policy{WritableRoots: []string{root}}, true)
	t.Logf("child:\n%s", res.out)
	for _, f := range []string{sgid, suid} {
		st, err := os.Stat(f)
		if err != nil {
			continue
		}
		cmd := exec.Command(f)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		t.Logf("%s (%v) run as uid 65534: %s %v", f, st.Mode(), out, err)
		if st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s: %v after the child wrote it; as uid 65534 it runs with %s", f, st.Mode(), strings.TrimSpace(string(out)))
		}
	}
}

func init() {
	// read-tty=path: open path read-only (no controlling terminal taken)
	// and read what is waiting there, within a second; prints it.
	ops["read-tty"] = func(path string) error {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if n, err := unix.Poll(pfd, 1000); err != nil || n == 0 {
			return fmt.Errorf("nothing to read (%v)", err)
		}
		buf := make([]byte, 256)
		n, err := unix.Read(fd, buf)
		if err != nil {
			return err
		}
		fmt.Printf("read-tty got %q\n", buf[:n])
		return nil
	}
}

// TestAttackTerminalElsewhere (E4): the read rules leave out terminals by
// their names in /dev, and a terminal file system mounted anywhere else:
// a chroot's /dev/pts bind-mounted (as schroot and build sandboxes do
// while a session is open) would let the tree read another record's
// terminal, keystrokes meant for it. (A device node copied into an
// ordinary directory stays readable: making one needs CAP_MKNOD, which no
// tree has; docs/sandbox.md says so.)
func TestAttackTerminalElsewhere(t *testing.T) {
	support(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a bind mount (CI runs as root)")
	}
	ctx := testCtx(t)
	master, pts := openPty(t)
	chroot := t.TempDir() // as /srv/chroot/bookworm would be
	bound := filepath.Join(chroot, "dev", "pts")
	if err := os.MkdirAll(bound, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("/dev/pts", bound, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(bound, unix.MNT_DETACH) })
	if _, err := master.Write([]byte("secret-typed-line\n")); err != nil {
		t.Fatal(err)
	}
	args := []string{"read-tty=" + filepath.Join(bound, filepath.Base(pts)), "open-ro=" + filepath.Join(chroot, "dev")}
	res := run(ctx, t, opsCmd(nil, args...), Policy{WritableRoots: []string{t.TempDir()}}, true)
	checkOps(t, res, args, map[string]string{args[0]: "EACCES", args[1]: "ok"})
}
