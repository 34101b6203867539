//go:build linux

package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The "ops" helper: the test binary, run as a sandboxed child, tries each
// operation its arguments name ("op" or "op=arg") and prints one line per
// operation, "op: ok" or "op: ERRNO" (the errno's name), so that a test
// sees exactly what the kernel refused and how.

func init() { helpers["ops"] = opsHelper }

func opsHelper(args []string) int {
	for _, a := range args {
		op, arg, _ := strings.Cut(a, "=")
		fn, ok := ops[op]
		if !ok {
			fmt.Printf("%s: unknown op\n", op)
			return 2
		}
		fmt.Printf("%s: %s\n", op, errName(fn(arg)))
		if op == "read" && os.Getenv("SANDBOX_TEST_PRINT_CGROUP") != "" {
			data, _ := os.ReadFile(arg)
			fmt.Printf("cgroup %s", data)
		}
	}
	return 0
}

// errName is "ok" for nil, else the errno's name (EACCES), else the text.
func errName(err error) string {
	var errno unix.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &errno):
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

var ops = map[string]func(arg string) error{
	"wait": func(string) error { // for a line on stdin
		_, err := bufio.NewReader(os.Stdin).ReadString('\n')
		return err
	},
	"read": func(path string) error {
		_, err := os.ReadFile(path)
		return err
	},
	"create": func(path string) error { return writeOpen(path, unix.O_CREAT|unix.O_EXCL) },
	"append": func(path string) error { return writeOpen(path, unix.O_APPEND) },
	"trunc-open": func(path string) error {
		return writeOpen(path, unix.O_TRUNC)
	},
	"truncate": func(path string) error { return unix.Truncate(path, 0) },
	"mkdir":    func(path string) error { return unix.Mkdir(path, 0o700) },
	"rm":       func(path string) error { return unix.Unlink(path) },
	"rename": func(arg string) error {
		src, dst, _ := strings.Cut(arg, ":")
		return unix.Rename(src, dst)
	},
	"link": func(arg string) error {
		src, dst, _ := strings.Cut(arg, ":")
		return unix.Link(src, dst)
	},
	"symlink": func(arg string) error {
		target, path, _ := strings.Cut(arg, ":")
		return unix.Symlink(target, path)
	},
	"mknod": func(path string) error {
		return unix.Mknod(path, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3)))
	},
	"mount": func(dir string) error { return unix.Mount("proc-sandbox", dir, "tmpfs", 0, "") },
	// rewrite writes a file's content back unchanged: a refused open is
	// what the test looks for, and a permitted one changes nothing.
	"rewrite": func(path string) error {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	},
	"environ": func(pid string) error {
		_, err := os.ReadFile("/proc/" + pid + "/environ")
		return err
	},
	"signal": func(pid string) error {
		n, _ := strconv.Atoi(pid)
		return unix.Kill(n, 0)
	},
	"ptrace": func(pid string) error {
		n, _ := strconv.Atoi(pid)
		// PTRACE_SEIZE does not stop the tracee; a success is undone.
		_, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(n), 0, 0, 0, 0)
		if errno != 0 {
			return errno
		}
		_ = unix.PtraceDetach(n)
		return nil
	},
	"tcp4-connect": func(addr string) error { return connectTCP(unix.AF_INET, addr, 0) },
	"tcp6-connect": func(addr string) error { return connectTCP(unix.AF_INET6, addr, 0) },
	"mptcp-connect": func(addr string) error {
		return connectTCP(unix.AF_INET, addr, unix.IPPROTO_MPTCP)
	},
	"tcp4-bind": func(string) error { return bindTCP(unix.AF_INET) },
	"tcp4-listen": func(string) error { // bind, listen, take one connection from the host
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			return err
		}
		if err := unix.Listen(fd, 1); err != nil {
			return err
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			return err
		}
		fmt.Printf("listening on %d\n", sa.(*unix.SockaddrInet4).Port)
		c, _, err := unix.Accept(fd)
		if err == nil {
			unix.Close(c)
		}
		return err
	},
	"fastopen": func(addr string) error { // a connect hidden in sendto(2)
		return sendOne(unix.SOCK_STREAM, 0x20000000, addr)
	},
	"tcp6-bind": func(string) error { return bindTCP(unix.AF_INET6) },
	"udp4":      func(addr string) error { return sendOne(unix.SOCK_DGRAM, 0, addr) },
	"raw": func(string) error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP)
		if err == nil {
			unix.Close(fd)
		}
		return err
	},
	"netlink": func(string) error {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
		if err == nil {
			unix.Close(fd)
		}
		return err
	},
	"io_uring": func(string) error {
		var params [120]byte // struct io_uring_params
		fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
		if errno != 0 {
			return errno
		}
		unix.Close(int(fd))
		return nil
	},
	"unix-connect": func(path string) error {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Connect(fd, &unix.SockaddrUnix{Name: path})
	},
	"unix-dgram": func(string) error {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
		}
		return err
	},
	"socketpair": func(string) error {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fds[0])
		defer unix.Close(fds[1])
		if _, err := unix.Write(fds[0], []byte("x")); err != nil {
			return err
		}
		buf := make([]byte, 1)
		_, err = unix.Read(fds[1], buf)
		return err
	},
	// The escapes of design section 17 beyond files: metadata, other
	// processes, the cgroup, terminals and keys. "path:arg" splits at the
	// last colon.
	"chmod": func(arg string) error {
		path, mode := splitArg(arg)
		return unix.Chmod(path, uint32(mode))
	},
	"chmod-storm": func(arg string) error { // "path:count" chmods, alternating modes
		path, n := splitArg(arg)
		for i := range n {
			if err := unix.Chmod(path, uint32(0o600|(i%2)*0o40)); err != nil {
				return err
			}
		}
		return nil
	},
	"fchmodat": func(arg string) error {
		path, mode := splitArg(arg)
		return unix.Fchmodat(unix.AT_FDCWD, path, uint32(mode), 0)
	},
	"fchmod-ro": func(arg string) error { return onOpen(arg, unix.O_RDONLY, unix.Fchmod) },
	"fchmod-w":  func(arg string) error { return onOpen(arg, unix.O_WRONLY, unix.Fchmod) },
	"chown": func(arg string) error {
		path, id := splitArg(arg)
		return unix.Chown(path, int(id), int(id))
	},
	"lchown": func(arg string) error {
		path, id := splitArg(arg)
		return unix.Lchown(path, int(id), int(id))
	},
	"utimes": func(path string) error {
		return unix.UtimesNano(path, []unix.Timespec{{Sec: 1}, {Sec: 1}})
	},
	"touch": func(path string) error { // times now (a NULL times pointer)
		cwd := unix.AT_FDCWD
		p, err := unix.BytePtrFromString(path)
		if err != nil {
			return err
		}
		_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(cwd), uintptr(unsafe.Pointer(p)), 0, 0, 0, 0)
		return errnoErr(errno)
	},
	"setxattr": func(path string) error { return unix.Setxattr(path, "user.proc", []byte("x"), 0) },
	"setfacl": func(path string) error {
		// An ACL (system.posix_acl_access) is an extended attribute too.
		return unix.Setxattr(path, "system.posix_acl_access", []byte{2, 0, 0, 0}, 0)
	},
	"setflags": func(path string) error {
		return onOpen(path+":0", unix.O_RDONLY, func(fd int, _ uint32) error {
			return unix.IoctlSetPointerInt(fd, unix.FS_IOC_SETFLAGS, 0x10) // FS_IMMUTABLE_FL
		})
	},
	"clone3": func(string) error {
		// Any clone3, with CLONE_INTO_CGROUP or not, fails with ENOSYS;
		// a zeroed argument would fork, so a bad size is passed: where
		// clone3 is allowed that is EINVAL.
		_, _, errno := unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)
		return errnoErr(errno)
	},
	"prlimit": func(pid string) error {
		n := pidArg(pid)
		var old unix.Rlimit
		if err := unix.Prlimit(n, unix.RLIMIT_NOFILE, nil, &old); err != nil {
			return err
		}
		return unix.Prlimit(n, unix.RLIMIT_NOFILE, &old, nil) // unchanged, if allowed
	},
	"prlimit-get": func(pid string) error {
		n := pidArg(pid)
		var old unix.Rlimit
		return unix.Prlimit(n, unix.RLIMIT_NOFILE, nil, &old)
	},
	"renice": func(pid string) error {
		n := pidArg(pid)
		prio, err := unix.Getpriority(unix.PRIO_PROCESS, n)
		if err != nil {
			return err
		}
		return unix.Setpriority(unix.PRIO_PROCESS, n, 20-prio) // unchanged, if allowed
	},
	"renice-user": func(string) error { return unix.Setpriority(unix.PRIO_USER, 0, 19) },
	"affinity": func(pid string) error {
		n := pidArg(pid)
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(n, &set); err != nil {
			return err
		}
		return unix.SchedSetaffinity(n, &set)
	},
	"keyctl": func(string) error {
		_, err := unix.AddKey("user", "proc-sandbox-test", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING)
		return err
	},
	"open-ro": func(path string) error {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
		}
		return err
	},
	"tiocsti": func(path string) error {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		c := byte('\n')
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))
		return errnoErr(errno)
	},
	"ptmx-peer": func(string) error {
		// A terminal of its own: the master (which must open), then the
		// peer through TIOCGPTPEER, whose errno is the result.
		fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open the master: %v", err)
		}
		defer unix.Close(fd)
		if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
			return fmt.Errorf("unlock the master: %v", err) // not an errno: "ptmx-peer" tells the two apart
		}
		peer, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY)
		if errno != 0 {
			return errno
		}
		unix.Close(int(peer))
		return nil
	},
	"socketpair-dgram": func(string) error {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
		return err
	},
}

// splitArg splits "path:n" at its last colon; n is octal if it starts
// with 0.
func splitArg(arg string) (string, int64) {
	i := strings.LastIndexByte(arg, ':')
	n, _ := strconv.ParseInt(arg[i+1:], 0, 64)
	return arg[:i], n
}

// onOpen opens the path of "path:mode" with flags and calls f with the
// descriptor and the mode.
func onOpen(arg string, flags int, f func(fd int, mode uint32) error) error {
	path, mode := splitArg(arg)
	fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return f(fd, uint32(mode))
}

// pidArg is a process ID argument: a number, "self" or "parent".
func pidArg(s string) int {
	switch s {
	case "self":
		return os.Getpid()
	case "parent":
		return os.Getppid()
	}
	n, _ := strconv.Atoi(s)
	return n
}

func errnoErr(errno unix.Errno) error {
	if errno != 0 {
		return errno
	}
	return nil
}

// writeOpen opens path for writing with flags and writes a byte.
func writeOpen(path string, flags int) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC|flags, 0o600)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, err = unix.Write(fd, []byte("x"))
	return err
}

// connectTCP connects a TCP socket of family (with protocol, 0 for TCP)
// to addr.
func connectTCP(family int, addr string, protocol int) error {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, protocol)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return err
	}
	if family == unix.AF_INET {
		return unix.Connect(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()})
	}
	return unix.Connect(fd, &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()})
}

// bindTCP binds a TCP socket of family to a free loopback port.
func bindTCP(family int) error {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if family == unix.AF_INET {
		return unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
	}
	return unix.Bind(fd, &unix.SockaddrInet6{Addr: [16]byte{15: 1}}) // ::1
}

// sendOne sends one byte with sendto(2) and flags on a new IPv4 socket of
// type typ to addr (a host:port).
func sendOne(typ, flags int, addr string) error {
	fd, err := unix.Socket(unix.AF_INET, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ap := netip.MustParseAddrPort(addr)
	return unix.Sendto(fd, []byte("x"), flags, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()})
}
