package procfs

import (
	"errors"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// ReadFileAt reads the file at path (relative to the directory dirfd, or
// to the working directory with unix.AT_FDCWD, or absolute) whole into
// buf, grown if it is too small, and returns what it read: one open,
// reads until end of file, one close. It is the one reader of the
// kernel's pseudo-files (/proc, cgroupfs) here: os.ReadFile makes five
// more system calls a file (it sets the descriptor non-blocking,
// registers it with the runtime poller, which kernfs files accept, fstats
// it, and unregisters it), more than twice this one's cost. Errors are
// *os.PathError naming path.
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
