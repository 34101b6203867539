//go:build linux

package sandbox

import (
	"bytes"
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/coder/quartz"
	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// The host's half of the calls the filter routes to it (seccomp user
// notification): changes of mode, owner and times, which Landlock does
// not cover, and calls that name another process. Each sandboxed start
// has a listener of its own, served by one goroutine (a notifier) from
// its first routed call on, so a tree that floods routed calls waits
// only for itself; until then it waits in its Manager's watch
// (listeners), as most trees route none.
//
// A metadata call is done by the host on the caller's behalf, with no
// more rights than the caller has (the caller's filesystem IDs and
// groups, no capabilities), and only on an object beneath a writable
// root. The host reads the caller's arguments once, opens the object
// itself (relative to the caller's working directory or descriptor, with
// no magic link followed) and decides by where the opened object lies,
// never by a path or pointer read again after deciding. An f* call
// applies to the object its descriptor refers to: a file the caller
// opened for writing (Landlock let it do that only beneath a root, or
// the host gave it), or any object beneath a root.
//
// A call that names another process goes on (the kernel then does it) only
// if that process belongs to the same tree (member). The process ID is a
// value in a register, which the caller cannot change once it is routed;
// the kernel could in principle give the ID to another process between
// the check and the call if the member died in that instant, which the
// tree cannot steer.
//
// If the notifier stops (the tree was released, or the host died), the
// calls it had not answered fail with EPERM and later ones with the
// kernel's ENOSYS: none is ever let through unchecked.

// seccompNotif and seccompResp are the kernel's struct seccomp_notif
// (with its struct seccomp_data) and struct seccomp_notif_resp.
type seccompNotif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

type seccompResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// notifier serves one listener until every task that uses its filter is
// gone (the listener hangs up) or Stop.
type notifier struct {
	listener int
	// watch holds the listener until a call comes (nil: served from the
	// start); served says that it was handed to serve since. watch's mu
	// guards served, and file once served.
	watch   *listeners
	watchID uint64 // n's in watch.waiting
	served  bool
	file    *os.File // the listener, in Go's poller, once served
	roots   []string // the writable roots, clean and free of symlinks
	member  func(caller, pid int) bool
	// root is the host's root directory: a caller whose root differs (a
	// chroot in a namespace of its own) is refused. Read at the first
	// call that needs it (rootKnown): most trees route none.
	root      unix.Stat_t
	rootKnown bool
	// creds are the IDs every member of the tree has (without
	// capabilities and with no-new-privileges none can take others), read
	// from the first caller: a root host (switchCreds) takes them for each
	// call, unless they are its own (creds nil then). A host of another
	// user has them already. dropCaps: the host has capabilities to set
	// aside (caps).
	switchCreds bool
	credsRead   bool
	creds       *callerCreds
	dropCaps    bool
	caps        [2]unix.CapUserData

	clock    quartz.Clock  // paces routed calls (pace)
	window   time.Time     // the start of pace's current window
	spent    time.Duration // in routed calls since window
	stopping atomic.Bool
	stop     chan struct{} // closed by Stop
	done     chan struct{} // closed when the listener is closed
}

var (
	metaByNr    = map[int32]*metaCall{}
	processByNr = map[int32]processCall{}
)

func init() {
	for i := range metaCalls {
		metaByNr[int32(metaCalls[i].nr)] = &metaCalls[i]
	}
	for _, c := range processCalls {
		processByNr[int32(c.nr)] = c
	}
}

// newNotifier serves listener (which it owns from now on) for a tree
// whose writable roots are roots and whose members member tells (given a
// member that asks, and the process it names): from its first routed
// call on if w (a Manager's watch, nil: none) takes it, else from now.
func newNotifier(listener int, roots []string, member func(caller, pid int) bool, w *listeners) (*notifier, error) {
	host, err := hostCreds()
	if err != nil {
		unix.Close(listener)
		return nil, xerrors.Errorf("seccomp listener: %w", err)
	}
	n := &notifier{listener: listener, roots: roots, member: member, clock: quartz.NewReal(),
		stop: make(chan struct{}), done: make(chan struct{})}
	n.caps = host.caps
	n.dropCaps = host.caps[0].Effective|host.caps[1].Effective != 0
	n.switchCreds = host.root
	if w != nil && w.add(n) {
		return n, nil
	}
	if err := n.serveFromNow(); err != nil {
		return nil, err
	}
	return n, nil
}

// serveFromNow puts the listener in Go's poller and starts serving it;
// on error the listener is closed. Called before n is shared, or with
// its watch's mu held.
func (n *notifier) serveFromNow() error {
	// The listener's only status flag is its access mode, which F_SETFL
	// keeps: setting O_NONBLOCK alone is unix.SetNonblock without its
	// F_GETFL.
	if _, err := unix.FcntlInt(uintptr(n.listener), unix.F_SETFL, unix.O_NONBLOCK); err != nil {
		unix.Close(n.listener)
		return xerrors.Errorf("seccomp listener: %w", err)
	}
	f := os.NewFile(uintptr(n.listener), "seccomp-listener")
	// The listener must be in Go's poller: serve waits there, and Stop
	// wakes it with a deadline.
	if err := f.SetReadDeadline(time.Time{}); err != nil {
		f.Close()
		return xerrors.Errorf("seccomp listener cannot be polled: %w", err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return xerrors.Errorf("seccomp listener: %w", err)
	}
	n.file = f
	// Stopped when the listener hangs up (no task uses the filter any
	// more) or by Stop.
	go n.serve(rc)
	return nil
}

// Stop ends serving: calls not answered yet fail with EPERM, later ones
// with ENOSYS. It returns once the listener is closed. Safe to call more
// than once and concurrently.
func (n *notifier) Stop() {
	if n.stopping.CompareAndSwap(false, true) {
		close(n.stop)
		if n.servedNow() {
			// Wakes serve's wait; the deadline is in the past.
			_ = n.file.SetReadDeadline(time.Unix(1, 0))
		}
	}
	<-n.done
}

// servedNow reports whether serve serves the listener; if not, the
// listener is ended now, or by its watch, which took it (it hung up, or
// could not be served).
func (n *notifier) servedNow() bool {
	w := n.watch
	if w == nil {
		return true
	}
	w.mu.Lock()
	if n.served {
		w.mu.Unlock()
		return true
	}
	waiting := w.remove(n)
	w.mu.Unlock()
	if waiting {
		refusePending(n.listener)
		n.end()
	}
	return false
}

// end closes a listener that was never served.
func (n *notifier) end() {
	unix.Close(n.listener)
	close(n.done)
}

// serve receives and answers routed calls one at a time.
func (n *notifier) serve(rc syscall.RawConn) {
	if n.serveOn(rc) {
		n.file.Close()
		close(n.done)
	}
}

// serveOn is serve's loop; it reports whether it ended serving (false:
// it handed the service to a new goroutine).
func (n *notifier) serveOn(rc syscall.RawConn) (ended bool) {
	for {
		var req seccompNotif
		var got, hup bool
		err := rc.Read(func(fd uintptr) bool {
			if n.stopping.Load() {
				return true
			}
			got, hup = receive(int(fd), &req)
			return got || hup
		})
		switch {
		case err != nil || n.stopping.Load():
			_ = rc.Control(func(fd uintptr) { refusePending(int(fd)) })
			return true
		case hup:
			return true
		}
		retire := false
		began := n.clock.Now("sandbox", "routed")
		_ = rc.Control(func(fd uintptr) { retire = !n.answer(int(fd), &req) })
		n.pace(n.clock.Since(began, "sandbox", "routed"))
		if retire {
			// This goroutine's thread could not be given its credentials
			// back and stays locked: it ends with the goroutine, and a
			// new one serves on.
			go n.serve(rc) // stopped as this one would have been
			return false
		}
	}
}

// The host does a tree's routed calls outside the tree's cgroup, so the
// tree's limits do not hold that work back: pace gives each tree at most
// a quarter of one of the host's cores for them, measured over windows of
// paceWindow. Calls within the budget run at once (a burst of chmods
// waits for nothing); a tree that spends its budget waits for the rest
// of the window, one long pause rather than many short ones. Only this
// tree's next call waits.
const (
	paceWindow = 100 * time.Millisecond
	paceBudget = paceWindow / 4
)

// pace adds spent, the time a routed call took, to the current window,
// and waits out the window once its budget is spent. Stop ends the wait.
func (n *notifier) pace(spent time.Duration) {
	now := n.clock.Now("sandbox", "pace")
	if now.Sub(n.window) >= paceWindow {
		n.window, n.spent = now, 0
	}
	if n.spent += spent; n.spent < paceBudget {
		return
	}
	t := n.clock.NewTimer(n.window.Add(paceWindow).Sub(now), "sandbox", "pace")
	defer t.Stop("sandbox", "pace")
	select {
	case <-t.C:
	case <-n.stop:
	}
	n.window, n.spent = n.clock.Now("sandbox", "pace"), 0
}

// receive takes one routed call off the listener if one is waiting; hup
// reports that no task uses the filter any more.
func receive(fd int, req *seccompNotif) (got, hup bool) {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	if k, err := unix.Poll(pfd, 0); err != nil || k == 0 {
		return false, false
	}
	if pfd[0].Revents&unix.POLLIN == 0 {
		return false, pfd[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0
	}
	*req = seccompNotif{}
	// A waiting call was announced, so this does not block; ENOENT: its
	// caller was killed in between.
	return ioctl(fd, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(req)) == nil, false
}

// refusePending answers every call waiting on the listener with EPERM.
func refusePending(fd int) {
	for {
		var req seccompNotif
		got, _ := receive(fd, &req)
		if !got {
			return
		}
		respond(fd, req.ID, unix.EPERM, false)
	}
}

// answer decides one routed call and answers it. It reports false if the
// calling thread could not be given back the host's credentials: it is
// locked then, and must end.
func (n *notifier) answer(fd int, req *seccompNotif) (restored bool) {
	if c, ok := processByNr[req.Nr]; ok {
		target := int(int32(req.Args[c.target]))
		cont := target > 0 && n.member(int(req.Pid), target)
		respond(fd, req.ID, unix.EPERM, cont)
		return true
	}
	c, ok := metaByNr[req.Nr]
	if !ok {
		respond(fd, req.ID, unix.EPERM, false)
		return true
	}
	errno, restored := n.meta(fd, req, c)
	respond(fd, req.ID, errno, false)
	return restored
}

// respond answers call id: it goes on in the kernel (cont), or returns
// errno (0: success, 0).
func respond(fd int, id uint64, errno unix.Errno, cont bool) {
	resp := seccompResp{ID: id}
	switch {
	case cont:
		resp.Flags = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE
	case errno != 0:
		resp.Error = -int32(errno)
	}
	// ENOENT: the caller is gone (killed, or interrupted by a signal, in
	// which case the call starts again as a new one).
	_ = ioctl(fd, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&resp))
}

// valid reports whether call id still waits, so that what was read about
// its caller (by its process ID) was about the caller.
func valid(fd int, id uint64) bool {
	return ioctl(fd, unix.SECCOMP_IOCTL_NOTIF_ID_VALID, unsafe.Pointer(&id)) == nil
}

func ioctl(fd int, req uint, arg unsafe.Pointer) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
	if errno != 0 {
		return errno
	}
	return nil
}

// meta does the metadata call req (of shape c) on its caller's behalf, or
// refuses it, and returns the errno to answer; restored as asCaller says.
func (n *notifier) meta(fd int, req *seccompNotif, c *metaCall) (errno unix.Errno, restored bool) {
	call, errno := n.readCall(fd, req, c)
	if errno != 0 {
		return errno, true
	}
	defer call.close()
	if n.switchCreds && !n.credsRead {
		creds, err := readCreds(int(req.Pid))
		if err != nil || !valid(fd, req.ID) {
			return unix.EPERM, true
		}
		n.credsRead = true
		if !creds.sameAsHost() {
			n.creds = creds
		}
	}
	return n.asCaller(func() unix.Errno {
		obj := call.obj
		if call.path != "" {
			how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_MAGICLINKS}
			if call.nofollow {
				how.Flags |= unix.O_NOFOLLOW
			}
			o, err := unix.Openat2(call.base, call.path, &how)
			if err != nil {
				return errnoOf(err)
			}
			defer unix.Close(o)
			obj = o
		}
		if !n.allowed(obj, call.path == "") {
			return unix.EPERM
		}
		return apply(obj, c, req.Args, call.times)
	})
}

// routedCall is what the host read of a routed metadata call: the object
// of an f* call (obj), or a path relative to base; its times, if any.
type routedCall struct {
	obj, base int // -1 where not open (base AT_FDCWD: an absolute path)
	path      string
	nofollow  bool
	times     *[2]unix.Timespec
}

func (r *routedCall) close() {
	for _, fd := range []int{r.obj, r.base} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// readCall reads the arguments of req (of shape c) from its caller, once,
// and opens what they name the path relative to: the caller's working
// directory or descriptor, or the descriptor an f* call applies to.
func (n *notifier) readCall(fd int, req *seccompNotif, c *metaCall) (*routedCall, unix.Errno) {
	pid := int(req.Pid)
	a := req.Args
	flags := 0
	if c.flags >= 0 {
		flags = int(int32(a[c.flags]))
	}
	call := &routedCall{obj: -1, base: -1, nofollow: c.nofollow || flags&unix.AT_SYMLINK_NOFOLLOW != 0}
	if c.path >= 0 && a[c.path] != 0 {
		var errno unix.Errno
		if call.path, errno = readString(pid, uintptr(a[c.path])); errno != 0 {
			return nil, errno
		}
		if call.path == "" && flags&unix.AT_EMPTY_PATH == 0 {
			return nil, unix.ENOENT
		}
	} else if c.path >= 0 && c.op != opTimes {
		return nil, unix.EFAULT // only utimensat takes a NULL path
	}
	if c.op == opTimes && a[c.arg] != 0 {
		var errno unix.Errno
		if call.times, errno = readTimes(pid, uintptr(a[c.arg]), c.times); errno != 0 {
			return nil, errno
		}
	}
	dirfd := unix.AT_FDCWD
	if c.dir >= 0 {
		dirfd = int(int32(a[c.dir]))
	}
	// What is opened below is the caller's only if the call still waits
	// afterwards (its process ID was not another's meanwhile).
	var err error
	switch {
	case !n.sameRoot(pid):
		return nil, unix.EPERM
	case call.path != "" && call.path[0] == '/':
		// The caller's root is the host's (sameRoot).
		call.base = -1
	case call.path != "" && dirfd == unix.AT_FDCWD:
		if call.base, err = unix.Open("/proc/"+strconv.Itoa(pid)+"/cwd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return nil, unix.EPERM
		}
	default:
		pidfd, err := pidfdOf(pid)
		if err != nil {
			return nil, unix.EPERM
		}
		target, err := unix.PidfdGetfd(pidfd, dirfd, 0)
		unix.Close(pidfd)
		if err != nil {
			return nil, unix.EBADF
		}
		if call.path == "" {
			call.obj = target
		} else {
			call.base = target
		}
	}
	if call.base < 0 && call.path != "" {
		call.base = unix.AT_FDCWD
	}
	if !valid(fd, req.ID) {
		call.close()
		return nil, unix.EPERM
	}
	return call, 0
}

// sameRoot reports whether pid's root directory is the host's.
func (n *notifier) sameRoot(pid int) bool {
	if !n.rootKnown {
		if unix.Stat("/", &n.root) != nil {
			return false
		}
		n.rootKnown = true
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(pid)+"/root", &st); err != nil {
		return false
	}
	return st.Dev == n.root.Dev && st.Ino == n.root.Ino
}

// allowed decides by the object obj refers to: beneath a writable root,
// or, for an f* call, a file (not a device) its caller opened for writing.
func (n *notifier) allowed(obj int, fcall bool) bool {
	if fcall {
		fl, err := unix.FcntlInt(uintptr(obj), unix.F_GETFL, 0)
		var st unix.Stat_t
		if err == nil && fl&unix.O_PATH == 0 && fl&unix.O_ACCMODE != unix.O_RDONLY && unix.Fstat(obj, &st) == nil {
			if t := st.Mode & unix.S_IFMT; t != unix.S_IFCHR && t != unix.S_IFBLK {
				return true
			}
		}
	}
	where, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(obj))
	if err != nil || !beneath(where, n.roots) {
		return false
	}
	// The name is the kernel's for the object, relative to the root of
	// whatever mount tree holds it: a detached one (open_tree) or another
	// namespace's names "/<root>/..." for objects that are not there. The
	// object is beneath a root only if that name, resolved in the host's
	// namespace with no link followed, leads to the object itself.
	return sameObject(obj, where)
}

// sameObject reports whether path, resolved from the host's root with no
// symlink followed, is the object obj refers to (same mount, same inode).
func sameObject(obj int, path string) bool {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &how)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	const mask = unix.STATX_INO | unix.STATX_MNT_ID
	var a, b unix.Statx_t
	if unix.Statx(obj, "", unix.AT_EMPTY_PATH, mask, &a) != nil || unix.Statx(fd, "", unix.AT_EMPTY_PATH, mask, &b) != nil {
		return false
	}
	return a.Mnt_id == b.Mnt_id && a.Ino == b.Ino && a.Dev_major == b.Dev_major && a.Dev_minor == b.Dev_minor
}

// beneath reports whether path is one of roots or lies beneath one.
func beneath(path string, roots []string) bool {
	for _, r := range roots {
		if path == r || strings.HasPrefix(path, r) && (strings.HasSuffix(r, "/") || path[len(r)] == '/') {
			return true
		}
	}
	return false
}

// apply does call c, with the caller's arguments a, on the object obj.
func apply(obj int, c *metaCall, a [6]uint64, times *[2]unix.Timespec) unix.Errno {
	switch c.op {
	case opMode:
		mode := uint32(a[c.arg]) & 0o7777
		if mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
			return unix.EPERM // the filter refused these already
		}
		var st unix.Stat_t
		if err := unix.Fstat(obj, &st); err != nil {
			return errnoOf(err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return unix.EOPNOTSUPP // as Linux answers for a symlink's mode
		}
		// The descriptor's own entry in /proc names the object itself.
		return errnoOf(unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(obj), mode, 0))
	case opOwner:
		uid, gid := int(int32(a[c.arg])), int(int32(a[c.arg+1]))
		return errnoOf(unix.Fchownat(obj, "", uid, gid, unix.AT_EMPTY_PATH))
	case opTimes:
		empty := []byte{0}
		_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(obj), uintptr(unsafe.Pointer(&empty[0])),
			uintptr(unsafe.Pointer(times)), unix.AT_EMPTY_PATH, 0, 0)
		runtime.KeepAlive(empty)
		runtime.KeepAlive(times)
		return errno
	}
	return unix.EPERM
}

// errnoOf is err's errno, or EPERM for an error without one.
func errnoOf(err error) unix.Errno {
	if err == nil {
		return 0
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return unix.EPERM
}

// pidfdOf opens a pidfd of the task pid (a thread's, where the kernel
// has PIDFD_THREAD, else its process's; the two share descriptors).
func pidfdOf(pid int) (int, error) {
	const pidfdThread = unix.O_EXCL // PIDFD_THREAD, Linux 6.9
	fd, err := unix.PidfdOpen(pid, pidfdThread)
	if errors.Is(err, unix.EINVAL) {
		fd, err = unix.PidfdOpen(pid, 0)
	}
	return fd, err
}

// readString reads the NUL-terminated string at addr in pid's memory, a
// page at a time, PATH_MAX bytes at most.
func readString(pid int, addr uintptr) (string, unix.Errno) {
	buf := make([]byte, 0, 256)
	page := uintptr(os.Getpagesize())
	for len(buf) < unix.PathMax {
		n := page - (addr % page) // to the end of addr's page
		if rest := uintptr(unix.PathMax - len(buf)); n > rest {
			n = rest
		}
		chunk := make([]byte, n)
		got, err := unix.ProcessVMReadv(pid, []unix.Iovec{{Base: &chunk[0], Len: uint64(n)}},
			[]unix.RemoteIovec{{Base: addr, Len: int(n)}}, 0)
		if err != nil || got == 0 {
			return "", unix.EFAULT
		}
		if i := bytes.IndexByte(chunk[:got], 0); i >= 0 {
			return string(append(buf, chunk[:i]...)), 0
		}
		buf = append(buf, chunk[:got]...)
		addr += uintptr(got)
	}
	return "", unix.ENAMETOOLONG
}

// readTimes reads a times argument of layout k at addr in pid's memory,
// as the timespecs utimensat takes.
func readTimes(pid int, addr uintptr, k timesKind) (*[2]unix.Timespec, unix.Errno) {
	var raw [4]int64
	size := 32 // two timespecs or timevals
	if k == timesBuf {
		size = 16
	}
	got, err := unix.ProcessVMReadv(pid, []unix.Iovec{{Base: (*byte)(unsafe.Pointer(&raw[0])), Len: uint64(size)}},
		[]unix.RemoteIovec{{Base: addr, Len: size}}, 0)
	if err != nil || got != size {
		return nil, unix.EFAULT
	}
	var ts [2]unix.Timespec
	switch k {
	case timesSpec:
		ts = [2]unix.Timespec{{Sec: raw[0], Nsec: raw[1]}, {Sec: raw[2], Nsec: raw[3]}}
	case timesVal:
		for i := range ts {
			usec := raw[2*i+1]
			if usec < 0 || usec >= 1e6 {
				return nil, unix.EINVAL
			}
			ts[i] = unix.Timespec{Sec: raw[2*i], Nsec: usec * 1000}
		}
	case timesBuf:
		ts = [2]unix.Timespec{{Sec: raw[0]}, {Sec: raw[1]}}
	}
	return &ts, 0
}
