package procfs

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// ReadFileAt reads the file at path (relative to the directory dirfd, or
// to the working directory with unix.AT_FDCWD, or absolute) whole into
// buf, grown if it is too small, and returns what it read: one open,
// reads until end of file, one close. It is the one reader of the
// kernel's pseudo-files (/proc, cgroupfs) here: os.ReadFile makes five
// more system calls a file (it sets the descriptor non-blocking,
// registers it with the runtime poller, which kernfs files accept, fstats
// it, and unregisters it), 24 us against 10 us a file on the machines
// this was measured on. Errors are *os.PathError naming path.
func ReadFileAt(dirfd int, path string, buf []byte) ([]byte, error) {
	return readFileAt(dirfd, path, buf, false)
}

// ReadShowAt is ReadFileAt for a file the kernel makes with one show
// that buf holds whole (cgroup.events, cpu.stat, a file of one value):
// a read that returns less than buf has room for reached the end, so the
// read that would return 0 is not made. A read that fills buf goes on to
// the end, as ReadFileAt's.
func ReadShowAt(dirfd int, path string, buf []byte) ([]byte, error) {
	return readFileAt(dirfd, path, buf, true)
}

func readFileAt(dirfd int, path string, buf []byte, show bool) ([]byte, error) {
	fd, err := unix.Openat(dirfd, path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(cap(buf), 512))
		}
		room := cap(buf) - len(buf)
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		case n == 0:
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		if show && n < room {
			return buf, nil
		}
	}
}

// LastPID is the PID the kernel gave last in the caller's PID namespace,
// to a process or a thread, from the last field of /proc/loadavg; ok is
// false when it cannot be read. PIDs are given in turn, so while it reads
// the same, no process was made, however briefly it lived.
func LastPID() (pid int, ok bool) {
	var buf [128]byte
	data, err := ReadShowAt(unix.AT_FDCWD, "/proc/loadavg", buf[:0])
	if err != nil {
		return 0, false
	}
	return parseLoadavgPID(data)
}

// parseLoadavgPID reads the last field of a /proc/loadavg line, "0.70
// 0.18 0.06 1/94 8727".
func parseLoadavgPID(data []byte) (int, bool) {
	data = bytes.TrimRight(data, "\n")
	i := bytes.LastIndexByte(data, ' ')
	if i < 0 {
		return 0, false
	}
	pid, err := strconv.Atoi(string(data[i+1:]))
	return pid, err == nil && pid > 0
}
