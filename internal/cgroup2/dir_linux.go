package cgroup2

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/procvisor/proc/internal/procfs"
	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// Dir is a cgroup v2 directory. Its methods are safe for concurrent use;
// a Dir that is gone (removed) reads as empty and unpopulated.
type Dir struct {
	// Path is the directory, absolute and clean (filepath.Clean).
	Path string
	// Rel is the cgroup as /proc/<pid>/cgroup names it (below the mount's
	// root); "" where it is not known, and then Holds is false.
	Rel string
	// At, if above 0, is a descriptor of the directory that the caller
	// holds open for as long as it uses d: d's files are opened relative
	// to it (openat), with no walk of Path. 0: none (descriptor 0 is never
	// a cgroup's).
	At int
	// Name, if not "", is d's name in its parent, and At (above 0) is the
	// parent's descriptor instead of d's: d's files are opened as
	// Name/file relative to it. So the caller holds no descriptor of d's
	// own while it uses d, for one more path element per open.
	Name string
}

// file is the path of d's file name: Path is clean and name one
// element, so no filepath.Join (which cleans, and showed in the start
// path's profile).
func (d Dir) file(name string) string { return d.Path + "/" + name }

// at returns the directory descriptor and path to open d's file name
// with: relative to At where d holds one (as Name/name where At is the
// parent's), else by path.
func (d Dir) at(name string) (int, string) {
	switch {
	case d.At > 0 && d.Name != "":
		return d.At, d.Name + "/" + name
	case d.At > 0:
		return d.At, name
	}
	return unix.AT_FDCWD, d.file(name)
}

// read reads d's file name whole into buf (procfs.ReadFileAt).
func (d Dir) read(name string, buf []byte) ([]byte, error) {
	dirfd, path := d.at(name)
	return procfs.ReadFileAt(dirfd, path, buf)
}

// readShow reads d's file name, made by one show that buf holds whole,
// in one read (procfs.ReadShowAt).
func (d Dir) readShow(name string, buf []byte) ([]byte, error) {
	dirfd, path := d.at(name)
	return procfs.ReadShowAt(dirfd, path, buf)
}

// write writes data to d's file name, which must exist.
func (d Dir) write(name string, data []byte) error {
	dirfd, path := d.at(name)
	fd, err := unix.Openat(dirfd, path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: d.file(name), Err: err}
	}
	defer unix.Close(fd)
	for {
		_, err = unix.Write(fd, data)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return &os.PathError{Op: "write", Path: d.file(name), Err: err}
	}
	return nil
}

// Procs lists cgroup.procs: every process in the cgroup.
func (d Dir) Procs() []int {
	var buf [256]byte
	data, err := d.read("cgroup.procs", buf[:0])
	if err != nil {
		return nil
	}
	return parseProcs(data)
}

// parseProcs reads the PIDs of cgroup.procs, one a line.
func parseProcs(data []byte) []int {
	var pids []int
	for _, f := range bytes.Fields(data) {
		if pid, err := strconv.Atoi(string(f)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Populated reads "populated" from cgroup.events: whether any live process
// is in the cgroup or below it.
func (d Dir) Populated() bool {
	var buf [128]byte
	data, err := d.readShow("cgroup.events", buf[:0])
	return err == nil && parsePopulated(data)
}

// parsePopulated reads the "populated" line of cgroup.events; a file
// without one is not populated.
func parsePopulated(data []byte) bool {
	for _, line := range bytes.Split(data, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("populated ")); ok {
			return string(bytes.TrimSpace(v)) != "0"
		}
	}
	return false
}

// heldFile is a kernel file held open and read again from offset 0 at
// each look (a kernfs file is made again by its show at every read from
// offset 0): one pread instead of an open, a read and a close. It is a
// bare, blocking descriptor, out of the runtime poller (os.Open would
// register it, and unregister it on close: four system calls a record
// saved) and without an *os.File (os.NewFile asks the descriptor's
// flags, one fcntl more, and sets a finalizer). Its methods must not be
// called concurrently with Close (a descriptor closed under a read could
// be another file's by then): its owner serialises them.
type heldFile struct{ fd int }

// openHeld opens d's file name as a heldFile.
func (d Dir) openHeld(name string) (heldFile, error) {
	dirfd, path := d.at(name)
	fd, err := unix.Openat(dirfd, path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return heldFile{fd: -1}, &os.PathError{Op: "open", Path: d.file(name), Err: err}
	}
	return heldFile{fd: fd}, nil
}

// openHeldAs opens d's file name as a held file of type T (Events,
// CPUStat): nil with the error where it cannot be opened.
func openHeldAs[T ~struct{ heldFile }](d Dir, name string) (*T, error) {
	f, err := d.openHeld(name)
	if err != nil {
		return nil, err
	}
	return &T{f}, nil
}

// read reads the file from offset 0 into buf; os.ErrClosed after Close.
func (f *heldFile) read(buf []byte) ([]byte, error) {
	if f.fd < 0 {
		return nil, os.ErrClosed
	}
	for {
		n, err := unix.Pread(f.fd, buf, 0)
		if !errors.Is(err, unix.EINTR) {
			return buf[:max(n, 0)], err
		}
	}
}

// Close closes the file.
func (f *heldFile) Close() {
	if f.fd >= 0 {
		_ = unix.Close(f.fd)
		f.fd = -1
	}
}

// Events is cgroup.events held open (heldFile), so that Populated costs
// one pread. Populated only ever reads it; WaitEmpty polls a file of its
// own.
type Events struct{ heldFile }

// OpenEvents opens d's cgroup.events.
func (d Dir) OpenEvents() (*Events, error) { return openHeldAs[Events](d, "cgroup.events") }

// Populated is [Dir.Populated] through the open file. After Close it
// reports false, and so it does when the read says the cgroup is gone
// (ENODEV, ENOENT); any other failed read counts as populated, so that
// a cgroup is never taken for empty (and reused) on a read that did not
// say so.
func (e *Events) Populated() bool {
	var buf [128]byte
	data, err := e.read(buf[:])
	if err != nil {
		return !errors.Is(err, os.ErrClosed) && !errors.Is(err, unix.ENODEV) && !errors.Is(err, unix.ENOENT)
	}
	return parsePopulated(data)
}

// Holds reports whether /proc/<pid>/cgroup names d.
func (d Dir) Holds(pid int) bool {
	var buf [256]byte
	data, err := procfs.ReadFileAt(unix.AT_FDCWD, "/proc/"+strconv.Itoa(pid)+"/cgroup", buf[:0])
	if err != nil || d.Rel == "" {
		return false
	}
	path, ok := parseCgroupFile(data)
	return ok && path == d.Rel
}

// SignalMember sends sig (then SIGCONT, unless sig is SIGKILL) to pid if
// it is still a member: a pidfd pins the process, and its cgroup is read
// after the pidfd was opened, so a PID reused by a stranger in between is
// never signalled.
func (d Dir) SignalMember(pid int, sig unix.Signal) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if !d.Holds(pid) {
		return
	}
	if unix.PidfdSendSignal(fd, sig, nil, 0) == nil && sig != unix.SIGKILL {
		_ = unix.PidfdSendSignal(fd, unix.SIGCONT, nil, 0)
	}
}

// SignalAll sends sig (and SIGCONT, unless sig is SIGKILL) to every
// member listed in cgroup.procs, in up to three passes so that a member
// started during a pass is caught by the next. It returns how many members
// it signalled. leader, if its PID is not 0, is a member the caller holds
// pinned (see Leader).
//
// A PID read from cgroup.procs may name a stranger by the time it is
// signalled (the member exited and the PID was reused), so each member but
// the leader is pinned with a pidfd and signalled only if the next read of
// cgroup.procs, made after the pidfd was opened, still lists it: a process
// the pidfd pins that is alive then holds the PID, so it is the one
// listed, in the cgroup; one that is dead is not signalled by its pidfd.
// One read per pass verifies every PID of the pass, where reading
// /proc/<pid>/cgroup for each would take the kernel's cgroup mutex once a
// member. The leader needs neither a pidfd nor the second read: a tree of
// one process, the common case, costs one read of cgroup.procs.
//
// Members are signalled in the order cgroup.procs lists them, which is
// the order they entered the cgroup (the kernel appends a forked child
// to its cgroup's task list), so a parent before its children; one
// forked during a pass comes in the next, after its parent. The leader,
// the ancestor of every member, comes first, when the first read lists
// it. That order matters: a member signalled before its parent may die,
// and the parent, reaping it, end on its own (`sleep 30 & wait` exits 0)
// in the moment before its own signal comes, if this goroutine is held up
// in between. Signalled parent first, it ends by the signal whatever
// follows.
func (d Dir) SignalAll(sig unix.Signal, leader Leader) int { return d.signalAll(sig, leader, nil) }

// Leader is the member of a cgroup that its caller started into it and
// has not reaped: its PID cannot name another process before the caller
// reaps it, so SignalAll signals it through Signal, with no pidfd of its
// own and no read to verify it. Signal sends one signal, unless the leader
// was reaped meanwhile, and reports whether it was sent (an *os.Process's
// Signal does so: it is excluded from the reap).
type Leader struct {
	PID    int
	Signal func(unix.Signal) bool
}

// signalAll is SignalAll; after is called (if not nil) after each member
// was signalled, with its PID and pidfd (-1 for the leader): tests hold
// the signaller there.
func (d Dir) signalAll(sig unix.Signal, leader Leader, after func(pid, pidfd int)) int {
	type pinned struct{ pid, fd int }
	seen := map[int]bool{}
	var pending []pinned // pidfds opened since the last read, as listed
	defer func() {
		for _, p := range pending {
			_ = unix.Close(p.fd)
		}
	}()
	signalled := 0
	send := func(pid, pidfd int, signal func(unix.Signal) bool) bool {
		if !signal(sig) {
			return false
		}
		signalled++
		if sig != unix.SIGKILL {
			signal(unix.SIGCONT)
		}
		if after != nil {
			after(pid, pidfd)
		}
		return true
	}
	for pass := 0; pass < 4; pass++ {
		pids := d.Procs()
		listed := make(map[int]bool, len(pids))
		for _, pid := range pids {
			listed[pid] = true
		}
		for _, p := range pending {
			if listed[p.pid] {
				send(p.pid, p.fd, func(s unix.Signal) bool { return unix.PidfdSendSignal(p.fd, s, nil, 0) == nil })
			}
		}
		for _, p := range pending {
			_ = unix.Close(p.fd)
		}
		pending = pending[:0]
		if pass == 3 {
			break // the fourth read only verifies the third pass
		}
		for _, pid := range pids {
			if seen[pid] {
				continue
			}
			seen[pid] = true
			if pid == leader.PID && send(pid, -1, leader.Signal) {
				continue
			}
			// Not the leader, or the leader was reaped before this read
			// and its PID now names another member: pinned and verified
			// like any other.
			if fd, err := unix.PidfdOpen(pid, 0); err == nil {
				pending = append(pending, pinned{pid, fd})
			}
		}
		if len(pending) == 0 {
			break
		}
	}
	return signalled
}

// ErrGone is Kill's error for a cgroup that is gone, or being removed:
// nothing in it is alive.
var ErrGone = errors.New("the cgroup is gone")

// Kill ends every member at once: cgroup.kill, or, on kernels before
// 5.14, freezing the cgroup and killing each member. A cgroup written
// cgroup.kill also kills what is cloned into it later: it must not be
// reused. For a cgroup that is gone it returns an error wrapping ErrGone.
func (d Dir) Kill() error {
	err := d.write("cgroup.kill", []byte("1"))
	if err == nil {
		// cgroup.kill signals each process through its leader thread; a
		// process whose leader thread already exited (pthread_exit) while
		// others run is missed. A process-directed kill reaches it.
		for _, pid := range d.Procs() {
			if zombie(pid) {
				d.SignalMember(pid, unix.SIGKILL)
			}
		}
		return nil
	}
	if d.goneBy(err) {
		return xerrors.Errorf("kill cgroup %s: %v: %w", d.Path, err, ErrGone)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return xerrors.Errorf("kill cgroup: %w", err)
	}
	// Frozen members cannot fork; a fatal signal still ends them.
	_ = d.write("cgroup.freeze", []byte("1"))
	defer func() { _ = d.write("cgroup.freeze", []byte("0")) }()
	for _, pid := range d.Procs() {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
	return nil
}

// goneBy reports whether err, from writing d's cgroup.kill, says that d
// is gone rather than that the kernel has no cgroup.kill (before 5.14):
// ENODEV (the file was removed with its cgroup while it was opened or
// written), or ENOENT where the directory is gone or cgroup.kill is there
// (the kernel refuses a dying cgroup's kill with ENOENT).
func (d Dir) goneBy(err error) bool {
	if errors.Is(err, unix.ENODEV) {
		return true
	}
	if !errors.Is(err, os.ErrNotExist) {
		return false
	}
	if _, err := os.Stat(d.file("cgroup.procs")); err != nil {
		return true // every cgroup v2 directory has it
	}
	_, err = os.Stat(d.file("cgroup.kill"))
	return err == nil
}

// zombie reports whether /proc/<pid>/stat says Z: for a member of a
// cgroup, a process whose leader thread exited while others run on.
func zombie(pid int) bool {
	st, ok := procfs.ReadStat(pid)
	return ok && st.State == 'Z'
}

// WaitEmpty returns once cgroup.events says "populated 0", the cgroup is
// gone, or ctx ends. It waits through the runtime poller, which the kernel
// wakes when "populated" flips: no thread is parked and nothing spins. A
// removed cgroup's file is never notified again: whoever removes it ends
// ctx first. It opens the file by Path, never through At: a caller's
// descriptor may be closed while it waits.
func (d Dir) WaitEmpty(ctx context.Context) {
	fd, err := unix.Open(d.file("cgroup.events"), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return // the cgroup is gone
	}
	f := os.NewFile(uintptr(fd), "cgroup.events")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	stop := context.AfterFunc(ctx, func() { _ = f.SetReadDeadline(pastDeadline) })
	defer stop()
	buf := make([]byte, 256)
	_ = rc.Read(func(fd uintptr) bool {
		n, err := unix.Pread(int(fd), buf, 0)
		return err != nil || !parsePopulated(buf[:max(n, 0)])
	})
}

// pastDeadline stops a blocked read at once.
var pastDeadline = time.Unix(1, 0)

// EnableControllers enables for d's children every controller of names
// that d has (cgroup.controllers). d must hold no process itself. What
// cannot be enabled is found missing when a limit needs it.
func (d Dir) EnableControllers(names []string) {
	data, err := d.read("cgroup.controllers", nil)
	if err != nil {
		return
	}
	have := strings.Fields(string(data))
	for _, c := range names {
		if slices.Contains(have, c) {
			_ = d.write("cgroup.subtree_control", []byte("+"+c))
		}
	}
}

// Remove removes the cgroup, and the cgroups a member made below it,
// deepest first. It fails (EBUSY) only if a member lives on that the
// kernel has not torn down; such a cgroup is left in place.
func (d Dir) Remove() { remove(d.Path) }

// MakeChild makes the cgroup name directly below d (mkdirat through At
// where d holds it).
func (d Dir) MakeChild(name string) error {
	dirfd, path := d.at(name)
	if err := unix.Mkdirat(dirfd, path, 0o755); err != nil {
		return &os.PathError{Op: "mkdir", Path: d.file(name), Err: err}
	}
	return nil
}

// OpenChild opens the cgroup name directly below d, a directory
// descriptor (the target of a clone into it, and a Dir's At).
func (d Dir) OpenChild(name string) (int, error) {
	dirfd, path := d.at(name)
	fd, err := unix.Openat(dirfd, path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: d.file(name), Err: err}
	}
	return fd, nil
}

// RemoveChild is Remove of the cgroup name directly below d: one
// unlinkat through At where d holds it, and Remove's walk only if a member
// left cgroups below it.
func (d Dir) RemoveChild(name string) {
	dirfd, path := d.at(name)
	err := unix.Unlinkat(dirfd, path, unix.AT_REMOVEDIR)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return
	}
	remove(d.file(name))
}

func remove(dir string) {
	err := unix.Rmdir(dir)
	if err == nil || errors.Is(err, unix.ENOENT) {
		return
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			remove(filepath.Join(dir, e.Name()))
		}
	}
	_ = unix.Rmdir(dir)
}

// ProbeClone starts a child inside d, to learn whether clone3 into a
// cgroup works here (seccomp refuses it in some containers). The child
// execs a path that cannot exist, inside the cgroup directory itself:
// ENOENT means it was cloned and ran (and is gone); anything else is the
// refusal. This is the only fork of the package.
func (d Dir) ProbeClone() error {
	fd, err := unix.Open(d.Path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return xerrors.Errorf("open cgroup: %w", err)
	}
	defer unix.Close(fd)
	_, err = syscall.ForkExec(d.file("absent"), []string{"absent"}, &syscall.ProcAttr{
		Sys: &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd},
	})
	if !errors.Is(err, syscall.ENOENT) {
		return xerrors.Errorf("starting a child inside a cgroup (clone3) failed: %v", err)
	}
	return nil
}

// SubtreeControl lists the controllers enabled for d's children
// (cgroup.subtree_control).
func (d Dir) SubtreeControl() []string {
	data, err := d.read("cgroup.subtree_control", nil)
	if err != nil {
		return nil
	}
	return strings.Fields(string(data))
}

// Children is the number of live cgroups directly below d (a removed
// one, even while the kernel still tears it down, is not counted); -1
// where it cannot be told. d has cgroups below it at any depth exactly
// when it has a child, so Children() == 0 is nr_descendants 0 in
// cgroup.stat. It is one stat of d's directory (fstat where d holds it)
// instead of an open, a read and a close of cgroup.stat, each a kernfs
// file that the open allocates and the close frees: kernfs keeps a
// directory's link count at 2 plus its subdirectories
// (kernfs_refresh_inode, at every stat), and a cgroup's only
// subdirectories are its children.
func (d Dir) Children() int64 {
	var st unix.Stat_t
	var err error
	switch {
	case d.At > 0 && d.Name == "":
		err = unix.Fstat(d.At, &st)
	case d.At > 0:
		err = unix.Fstatat(d.At, d.Name, &st, 0)
	default:
		err = unix.Stat(d.Path, &st)
	}
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Nlink < 2 {
		return -1
	}
	return int64(st.Nlink) - 2
}
