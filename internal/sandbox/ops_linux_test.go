//go:build linux

package sandbox

import (
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
	"tcp6-bind": func(string) error { return bindTCP(unix.AF_INET6) },
	"udp4": func(addr string) error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		ap := netip.MustParseAddrPort(addr)
		return unix.Sendto(fd, []byte("x"), 0, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()})
	},
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
	"socketpair-dgram": func(string) error {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
		return err
	},
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
