//go:build linux

package sandbox

import (
	"cmp"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// The seccomp half. Landlock covers what the tree may write and, from ABI
// 4, TCP; the filter covers the rest of what a sandboxed tree may not do
// (design section 17), and is installed for every sandboxed start:
//
//   - clone3 fails with ENOSYS, so that libc and Go fall back to clone,
//     which cannot name a cgroup (CLONE_INTO_CGROUP would let the tree
//     leave its cgroup);
//   - the kernel keyring calls, setting or removing extended attributes
//     (ACLs included), and the ioctls that set inode flags or push input
//     into a terminal (TIOCSTI, TIOCLINUX) fail with EPERM;
//   - a mode with the setuid or setgid bit fails with EPERM; any other
//     change of mode, owner or times is routed to the host (user
//     notification), which does it only beneath a writable root
//     (notify_linux.go);
//   - prlimit, setpriority, sched_set{scheduler,param,attr,affinity} and
//     ioprio_set act on the caller (target 0) at once; another process
//     target is routed to the host, which lets the call go on only for a
//     member of the same tree; user and process-group targets fail with
//     EPERM;
//   - with the network off, socket(2) and socketpair(2) are allowed only
//     for AF_UNIX stream and seqpacket sockets (and with Listen or
//     ConnectPorts TCP sockets, whose ports Landlock rules, with no
//     MSG_FASTOPEN send, a connect Landlock does not see; with
//     ConnectPorts connect(2) is allowed, and socket(2) refuses AF_UNIX
//     instead); otherwise connect(2) is refused
//     outright (below Landlock ABI 9 the kernel cannot tell a Unix socket
//     the tree made from a host daemon's, and seccomp cannot read the
//     path); datagram Unix sockets are refused because sendto(2) reaches
//     any of them by path without a connect; io_uring is refused with
//     EPERM, as a kernel with io_uring disabled does, so that programs
//     fall back to plain system calls.
//
// A system call of another architecture (i386 or x32 on amd64) kills the
// process: its numbers mean other calls, so the filter could not tell
// what it asks for. A call newer than the filter (above maxReviewedCall)
// fails with ENOSYS. Modes, process IDs and ioctl requests are compared in
// their low 32 bits, the only ones the kernel reads.

// filterArch is the AUDIT_ARCH_* value of the architectures the filter is
// written for; 0 elsewhere.
var filterArch = map[string]uint32{
	"amd64": unix.AUDIT_ARCH_X86_64,
	"arm64": unix.AUDIT_ARCH_AARCH64,
}[runtime.GOARCH]

// x32Bit marks the x32 system calls on amd64.
const x32Bit = 0x40000000

// Offsets in struct seccomp_data: nr, arch, then the arguments (64-bit;
// their low words come first on both little-endian architectures).
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
	offArg1 = 24
	offArg2 = 32
)

// offArg is the offset of argument i's low word.
func offArg(i int) uint32 { return offArg0 + 8*uint32(i) }

// Return values of the filter.
const (
	retAllow  = unix.SECCOMP_RET_ALLOW
	retKill   = unix.SECCOMP_RET_KILL_PROCESS
	retEACCES = unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)
	retEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	retNotify = unix.SECCOMP_RET_USER_NOTIF
)

// The ioctl requests refused in every sandboxed tree: pushing input into
// a terminal; setting inode flags (immutable, append-only, ...) by either
// interface, the inode generation, fs-verity (a file read-only for good)
// and an encryption policy.
const (
	iocSetFlags32          = 0x40046602 // FS_IOC32_SETFLAGS
	iocFSSetXattr          = 0x401c5820 // FS_IOC_FSSETXATTR
	iocSetVersion          = 0x40087602 // FS_IOC_SETVERSION
	iocSetVersion32        = 0x40047602 // FS_IOC32_SETVERSION
	iocExt4SetVersion      = 0x40086604 // EXT4_IOC_SETVERSION
	iocEnableVerity        = 0x40806685 // FS_IOC_ENABLE_VERITY
	iocSetEncryptionPolicy = 0x800c6613 // FS_IOC_SET_ENCRYPTION_POLICY
)

var refusedIoctls = []uint32{
	unix.TIOCSTI, unix.TIOCLINUX, unix.FS_IOC_SETFLAGS, iocSetFlags32, iocFSSetXattr,
	iocSetVersion, iocSetVersion32, iocExt4SetVersion, iocEnableVerity, iocSetEncryptionPolicy,
}

// Targets of setpriority(2) and ioprio_set(2): only a process may be
// named (PRIO_PROCESS, IOPRIO_WHO_PROCESS), not a group or a user.
const (
	prioProcess      = 0
	ioprioWhoProcess = 1
)

// bpf assembles a classic BPF program whose conditional jumps go forward
// to labels, resolved by prog.
type bpf struct {
	ins    []unix.SockFilter
	labels map[string]int
	jumps  []bpfJump
}

type bpfJump struct {
	at     int
	jt, jf string // "" falls through
}

func (b *bpf) stmt(code uint16, k uint32) {
	b.ins = append(b.ins, unix.SockFilter{Code: code, K: k})
}

func (b *bpf) load(off uint32) { b.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, off) }
func (b *bpf) ret(v uint32)    { b.stmt(unix.BPF_RET|unix.BPF_K, v) }
func (b *bpf) label(name string) {
	b.labels[name] = len(b.ins)
}

// jump compares the accumulator with k (op BPF_JEQ or BPF_JGE) and goes
// to jt if true, jf if false.
func (b *bpf) jump(op uint16, k uint32, jt, jf string) {
	b.jumps = append(b.jumps, bpfJump{at: len(b.ins), jt: jt, jf: jf})
	b.stmt(unix.BPF_JMP|op|unix.BPF_K, k)
}

// route sends system call nr to label.
type route struct {
	nr    uint32
	label string
}

// dispatch jumps on the call number in the accumulator to the label of
// its route in rs (sorted by number), or to otherwise: a binary search
// down to a few compares.
func (b *bpf) dispatch(rs []route, otherwise string) {
	if len(rs) <= 3 {
		for i, r := range rs {
			next := ""
			if i == len(rs)-1 {
				next = otherwise
			}
			b.jump(unix.BPF_JEQ, r.nr, r.label, next)
		}
		if len(rs) == 0 {
			b.jump(unix.BPF_JEQ, 0, otherwise, otherwise)
		}
		return
	}
	mid := len(rs) / 2
	high := "high" + strconv.Itoa(len(b.ins))
	b.jump(unix.BPF_JGE, rs[mid].nr, high, "")
	b.dispatch(rs[:mid], otherwise)
	b.label(high)
	b.dispatch(rs[mid:], otherwise)
}

// prog resolves the jumps.
func (b *bpf) prog() ([]unix.SockFilter, error) {
	rel := func(from int, to string) (uint8, error) {
		if to == "" {
			return 0, nil
		}
		d := b.labels[to] - from - 1
		if _, ok := b.labels[to]; !ok || d < 0 || d > 255 {
			return 0, xerrors.Errorf("seccomp filter: bad jump to %q", to)
		}
		return uint8(d), nil
	}
	for _, j := range b.jumps {
		var err error
		if b.ins[j.at].Jt, err = rel(j.at, j.jt); err != nil {
			return nil, err
		}
		if b.ins[j.at].Jf, err = rel(j.at, j.jf); err != nil {
			return nil, err
		}
	}
	return b.ins, nil
}

// netMode is what a policy lets the tree do on the network, as the
// filter sees it.
type netMode struct {
	network bool // everything
	tcp     bool // TCP sockets (Listen or ConnectPorts; Landlock rules the ports)
	connect bool // connect(2) (ConnectPorts): no AF_UNIX sockets then
}

func netModeOf(p Policy) netMode {
	if p.Network {
		return netMode{network: true}
	}
	return netMode{tcp: p.Listen || len(p.ConnectPorts) > 0, connect: len(p.ConnectPorts) > 0}
}

// filter is the seccomp program of p, made once for each netMode (the
// kernel copies a program as it installs it).
func filter(p Policy) ([]unix.SockFilter, error) {
	m := netModeOf(p)
	f, ok := filters.Load(m)
	if !ok {
		f, _ = filters.LoadOrStore(m, sync.OnceValues(func() ([]unix.SockFilter, error) { return makeFilter(m) }))
	}
	return f.(func() ([]unix.SockFilter, error))()
}

var filters sync.Map // netMode to its program's maker

// The sockets and flags the network rules name.
const (
	msgFastOpen = 0x20000000 // MSG_FASTOPEN: a connect in sendto(2) that Landlock does not see
	ipprotoTCP  = 6
)

// makeFilter assembles the seccomp program for the network mode m.
func makeFilter(m netMode) ([]unix.SockFilter, error) {
	if filterArch == 0 {
		return nil, xerrors.New("seccomp filter: no filter for " + runtime.GOARCH)
	}
	b := &bpf{labels: map[string]int{}}
	b.load(offArch)
	b.jump(unix.BPF_JEQ, filterArch, "", "kill")
	b.load(offNr)
	if runtime.GOARCH == "amd64" {
		b.jump(unix.BPF_JGE, x32Bit, "kill", "")
	}
	b.jump(unix.BPF_JGE, maxReviewedCall+1, "enosys", "")
	// Each call the filter looks at goes to the label of its check; the
	// calls are found by a binary search, so that every system call of
	// the tree passes few instructions (and the kernel, which runs the
	// program for every call number as it installs it, few steps).
	routes := []route{{unix.SYS_CLONE3, "enosys"}, {unix.SYS_IOCTL, "ioctl"}}
	for _, nr := range refusedCalls {
		routes = append(routes, route{nr, "eperm"})
	}
	for _, c := range metaCalls {
		target := "notify"
		if c.op == opMode {
			target = "mode" + strconv.Itoa(int(c.arg))
		}
		routes = append(routes, route{c.nr, target})
	}
	for _, c := range processCalls {
		routes = append(routes, route{c.nr, c.label()})
	}
	if !m.network {
		connect := "eacces"
		if m.connect {
			connect = "allow" // Landlock rules the ports
		}
		routes = append(routes, route{unix.SYS_CONNECT, connect}, route{unix.SYS_SOCKET, "socket"}, route{unix.SYS_SOCKETPAIR, "socketpair"})
		for _, nr := range []uint32{unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER} {
			routes = append(routes, route{nr, "eperm"})
		}
		if m.tcp {
			routes = append(routes, route{unix.SYS_SENDTO, "flags3"}, route{unix.SYS_SENDMSG, "flags2"}, route{unix.SYS_SENDMMSG, "flags3"})
		}
	}
	slices.SortFunc(routes, func(a, b route) int { return cmp.Compare(a.nr, b.nr) })
	b.dispatch(routes, "allow")

	if !m.network {
		unixSock := "unixtype"
		if m.connect {
			unixSock = "eacces" // connect(2) is allowed: no socket that could reach a path
		}
		inetSock := "eacces"
		if m.tcp {
			inetSock = "tcp"
		}
		b.label("socket")
		b.load(offArg0) // the domain
		b.jump(unix.BPF_JEQ, unix.AF_UNIX, unixSock, "")
		b.jump(unix.BPF_JEQ, unix.AF_INET, inetSock, "")
		b.jump(unix.BPF_JEQ, unix.AF_INET6, inetSock, "eacces")
		b.label("socketpair")
		b.load(offArg0)
		b.jump(unix.BPF_JEQ, unix.AF_UNIX, "unixtype", "eacces")
		b.label("unixtype")
		b.load(offArg1) // the type, with SOCK_NONBLOCK and SOCK_CLOEXEC
		b.stmt(unix.BPF_ALU|unix.BPF_AND|unix.BPF_K, 0xf)
		b.jump(unix.BPF_JEQ, unix.SOCK_STREAM, "allow", "")
		b.jump(unix.BPF_JEQ, unix.SOCK_SEQPACKET, "allow", "eacces")
		if m.tcp {
			// TCP only (not UDP, raw or MPTCP, which Landlock's port rules
			// do not cover), and no connect hidden in a send.
			b.label("tcp")
			b.load(offArg1)
			b.stmt(unix.BPF_ALU|unix.BPF_AND|unix.BPF_K, 0xf)
			b.jump(unix.BPF_JEQ, unix.SOCK_STREAM, "", "eacces")
			b.load(offArg2) // the protocol
			b.jump(unix.BPF_JEQ, 0, "allow", "")
			b.jump(unix.BPF_JEQ, ipprotoTCP, "allow", "eacces")
			for _, i := range []int{2, 3} {
				b.label("flags" + strconv.Itoa(i))
				b.load(offArg(i))
				b.stmt(unix.BPF_ALU|unix.BPF_AND|unix.BPF_K, msgFastOpen)
				b.jump(unix.BPF_JEQ, 0, "allow", "eperm")
			}
		}
	}

	b.label("ioctl")
	b.load(offArg1) // the request
	for i, req := range refusedIoctls {
		next := ""
		if i == len(refusedIoctls)-1 {
			next = "allow"
		}
		b.jump(unix.BPF_JEQ, req, "eperm", next)
	}
	for _, i := range []int{1, 2} {
		// A mode with the setuid or setgid bit is refused; any other
		// goes to the host.
		b.label("mode" + strconv.Itoa(i))
		b.load(offArg(i))
		b.stmt(unix.BPF_ALU|unix.BPF_AND|unix.BPF_K, unix.S_ISUID|unix.S_ISGID)
		b.jump(unix.BPF_JEQ, 0, "notify", "eperm")
	}
	// prlimit with no new limit only reads one: allowed on any process
	// the kernel lets the caller see.
	b.label("prlimit")
	b.load(offArg2)
	b.jump(unix.BPF_JEQ, 0, "", "pid0")
	b.load(offArg2 + 4)
	b.jump(unix.BPF_JEQ, 0, "allow", "pid0")
	b.label("which")
	b.load(offArg0) // the kind of target
	b.jump(unix.BPF_JEQ, prioProcess, "pid1", "eperm")
	b.label("ioprio")
	b.load(offArg0)
	b.jump(unix.BPF_JEQ, ioprioWhoProcess, "pid1", "eperm")
	// Target 0 is the caller; another is routed to the host.
	b.label("pid0")
	b.load(offArg0)
	b.jump(unix.BPF_JEQ, 0, "allow", "notify")
	b.label("pid1")
	b.load(offArg1)
	b.jump(unix.BPF_JEQ, 0, "allow", "notify")

	b.label("notify")
	b.ret(retNotify)
	b.label("enosys")
	b.ret(retENOSYS)
	b.label("eacces")
	b.ret(retEACCES)
	b.label("eperm")
	b.ret(retEPERM)
	b.label("kill")
	b.ret(retKill)
	b.label("allow")
	b.ret(retAllow)
	return b.prog()
}

// installFilter installs prog on the calling thread only (no TSYNC flag)
// and returns the descriptor of its listener (close-on-exec), on which
// the host receives the calls the filter routes to it. The thread must
// have no-new-privileges already.
func installFilter(prog []unix.SockFilter) (listener int, err error) {
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER,
		uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return -1, xerrors.Errorf("seccomp: %w", errno)
	}
	return int(r), nil
}

// seccompActionAvail reports whether the kernel's seccomp filters know
// action (SECCOMP_GET_ACTION_AVAIL, Linux 4.14).
func seccompActionAvail(action uint32) error {
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
	if errno != 0 {
		return errno
	}
	return nil
}
