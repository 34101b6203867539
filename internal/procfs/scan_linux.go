package procfs

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// Whether a process waits to read a file is decided from the kernel's
// view of each of its threads: the system call it is blocked in
// (/proc/PID/task/TID/syscall: its number and arguments) and the
// descriptors that call waits on, compared with the files asked about
// through their /proc/PID/fd links. A read names its descriptor; poll and
// select name theirs in the waiting process's memory (/proc/PID/mem at the
// address the call was given, which the kernel leaves untouched until the
// call returns); an epoll instance lists what it watches in
// /proc/PID/fdinfo.

// Files names the files a [Scanner] looks for a process waiting to read:
// a pipe, a terminal, or both. The zero value names none.
type Files struct {
	PipeIno uint64 // a pipe's inode; 0 for none
	TTY     string // a terminal's slave, "/dev/pts/N"; "" for none
	TTYIno  uint64 // the slave's inode in its devpts
	TTYDev  uint64 // the slave's device number (as Stat.TTYNr reads it)
}

// None reports whether f names no file.
func (f Files) None() bool { return f.PipeIno == 0 && f.TTY == "" }

// Scanner reads /proc for one look at a set of processes, reusing its
// buffers from one read to the next. The zero value is ready to use. It is
// used by one goroutine at a time.
type Scanner struct {
	buf    []byte // file contents, reused
	link   [256]byte
	fields [][]byte // fields of a line, reused

	// The process being looked at, and what is looked for.
	files    Files
	pipeLink string // "pipe:[INODE]" of files.PipeIno, or ""
	pid      string
	ctty     uint64 // its controlling terminal, as Stat.TTYNr
}

// What a blocked system call may be waiting on.
type callKind uint8

const (
	callOther  callKind = iota
	callRead            // read, readv, pread64, preadv, preadv2: fd in arg 0
	callPoll            // poll, ppoll: pollfd array at arg 0, count in arg 1
	callSelect          // select, pselect6: nfds in arg 0, read set at arg 1
	callEpoll           // epoll_wait, epoll_pwait, epoll_pwait2: epoll fd in arg 0
)

// readCalls are the system calls, by this architecture's numbers, that
// can wait to read. calls_linux_amd64.go adds the older calls that only
// some architectures have.
var readCalls = map[int64]callKind{
	unix.SYS_READ:         callRead,
	unix.SYS_READV:        callRead,
	unix.SYS_PREAD64:      callRead,
	unix.SYS_PREADV:       callRead,
	unix.SYS_PREADV2:      callRead,
	unix.SYS_PPOLL:        callPoll,
	unix.SYS_PSELECT6:     callSelect,
	unix.SYS_EPOLL_PWAIT:  callEpoll,
	unix.SYS_EPOLL_PWAIT2: callEpoll,
}

// Bounds on what is read from a waiting process's memory: a poll of more
// descriptors is judged by its first maxPollFds.
const (
	// pollRDNORM is POLLRDNORM, which x/sys/unix does not name.
	pollRDNORM = 0x40

	maxPollFds   = 4096
	maxSelectFds = 65536
)

// read reads the whole file at path into s.buf (ReadFileAt), which it
// returns; the result is valid until the next read.
func (s *Scanner) read(path string) ([]byte, bool) {
	if s.buf == nil {
		s.buf = make([]byte, 0, 4096)
	}
	data, err := ReadFileAt(unix.AT_FDCWD, path, s.buf)
	if err != nil {
		return nil, false
	}
	s.buf = data
	return data, true
}

// readlink returns the target of the link at path, valid until the next
// readlink; a target longer than the buffer is cut, which no comparison
// below can mistake for a match.
func (s *Scanner) readlink(path string) []byte {
	n, err := unix.Readlink(path, s.link[:])
	if err != nil {
		return nil
	}
	return s.link[:n]
}

// split cuts line into its fields, reusing s.fields.
func (s *Scanner) split(line []byte) [][]byte {
	f := s.fields[:0]
	for field := range fields(line) {
		f = append(f, field)
	}
	s.fields = f
	return f
}

// WaitsToRead reports whether a thread of process pid is blocked waiting
// to read one of files: in a read of it, or in a poll, select or epoll
// wait that includes it for reading. /dev/tty counts as files.TTY when
// that is the process's controlling terminal. A process that is gone, a
// zombie, or one the caller may not trace (its syscall and mem files are
// closed to it) waits for nothing.
func (s *Scanner) WaitsToRead(pid int, files Files) bool {
	if files.None() {
		return false
	}
	st, ok := s.begin(pid, files)
	if !ok || st.State == 'Z' || st.State == 'X' {
		return false
	}
	dir := "/proc/" + s.pid
	if st.Threads <= 1 {
		waits, _ := s.threadCall(dir)
		return waits
	}
	tasks, err := readDirNames(dir + "/task")
	if err != nil {
		return false
	}
	for _, tid := range tasks {
		if waits, _ := s.threadCall(dir + "/task/" + tid); waits {
			return true
		}
	}
	return false
}

// begin sets the scanner to look at process pid for files and reads its
// stat line; ok is false when the process is gone.
func (s *Scanner) begin(pid int, files Files) (_ Stat, ok bool) {
	if s.files.PipeIno != files.PipeIno {
		s.pipeLink = ""
		if files.PipeIno != 0 {
			s.pipeLink = "pipe:[" + strconv.FormatUint(files.PipeIno, 10) + "]"
		}
	}
	s.files = files
	s.pid = strconv.Itoa(pid)
	data, ok := s.read("/proc/" + s.pid + "/stat")
	if !ok {
		return Stat{}, false
	}
	st, ok := ParseStat(data)
	if !ok {
		return Stat{}, false
	}
	s.ctty = st.TTYNr
	return st, true
}

// threadCall reads the system call the thread whose /proc directory is
// dir is blocked in. waits reports whether it waits to read one of
// s.files (none when s.files is zero). blocked reports whether the kernel
// showed the thread off its CPU: its syscall file names a call, or -1 for
// a thread blocked outside one; it reads "running" for a thread that runs
// or may run at once, and cannot be read by a caller that may not trace
// it.
func (s *Scanner) threadCall(dir string) (waits, blocked bool) {
	data, ok := s.read(dir + "/syscall")
	if !ok || !offCPU(data) {
		return false, false
	}
	if s.files.None() {
		return false, true
	}
	nr, args, ok := parseSyscall(s.split(data))
	if !ok {
		return false, true
	}
	switch readCalls[nr] {
	case callRead:
		return args[0] <= math.MaxInt32 && s.ours(int(args[0])), true
	case callPoll:
		return s.pollWaits(args[0], args[1]), true
	case callSelect:
		return s.selectWaits(args[0], args[1]), true
	case callEpoll:
		return args[0] <= math.MaxInt32 && s.epollWaits(int(args[0])), true
	}
	return false, true
}

// offCPU reports whether a /proc/.../syscall line shows its thread off
// its CPU: it names a call, or reads -1 for a thread blocked outside one,
// and not "running".
func offCPU(line []byte) bool {
	return len(line) > 0 && (line[0] == '-' || line[0] >= '0' && line[0] <= '9')
}

// parseSyscall reads the fields of a /proc/.../syscall line: "running",
// "-1 SP PC" (blocked, not in a system call), or "NR ARG0 ... ARG5 SP PC"
// with the arguments in hex. ok is false unless it names a call.
func parseSyscall(f [][]byte) (nr int64, args [6]uint64, ok bool) {
	if len(f) < 9 {
		return 0, args, false
	}
	nr, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil || nr < 0 {
		return 0, args, false
	}
	for i := range args {
		if args[i], err = strconv.ParseUint(string(f[1+i]), 0, 64); err != nil {
			return 0, args, false
		}
	}
	return nr, args, true
}

// ours reports whether descriptor fd of the process is one of s.files.
// /dev/tty is the process's controlling terminal, which is ours when its
// tty_nr is our slave.
func (s *Scanner) ours(fd int) bool {
	link := s.readlink("/proc/" + s.pid + "/fd/" + strconv.Itoa(fd))
	switch {
	case link == nil:
		return false
	case s.pipeLink != "" && string(link) == s.pipeLink:
		return true
	case s.files.TTY == "":
		return false
	case string(link) == s.files.TTY:
		return true
	case string(link) == "/dev/tty":
		return s.ctty == s.files.TTYDev
	}
	return false
}

// mem reads len(b) bytes of the process's memory at addr, as far as it
// can; it returns how many it read.
func (s *Scanner) mem(addr uint64, b []byte) int {
	if addr == 0 || addr > math.MaxInt64-uint64(len(b)) {
		return 0
	}
	fd, err := unix.Open("/proc/"+s.pid+"/mem", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(fd)
	n := 0
	for n < len(b) {
		m, err := unix.Pread(fd, b[n:], int64(addr)+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil || m == 0 {
			break
		}
		n += m
	}
	return n
}

// pollWaits reports whether a poll of nfds descriptors at addr waits to
// read one of ours.
func (s *Scanner) pollWaits(addr, nfds uint64) bool {
	b := make([]byte, min(nfds, maxPollFds)*pollFdSize)
	return pollReads(b[:s.mem(addr, b)], s.ours)
}

// pollFdSize is the size of a struct pollfd: int fd; short events; short
// revents.
const pollFdSize = 8

// pollReads reports whether yes holds for a descriptor that the array of
// struct pollfd in b polls for reading (POLLIN or POLLRDNORM). A partial
// entry at the end is ignored.
func pollReads(b []byte, yes func(fd int) bool) bool {
	for i := range len(b) / pollFdSize {
		e := b[i*pollFdSize:]
		fd := int32(binary.NativeEndian.Uint32(e))
		events := binary.NativeEndian.Uint16(e[4:])
		if fd >= 0 && events&(unix.POLLIN|pollRDNORM) != 0 && yes(int(fd)) {
			return true
		}
	}
	return false
}

// selectWaits reports whether a select of nfds descriptors whose read set
// is at addr waits to read one of ours.
func (s *Scanner) selectWaits(nfds, addr uint64) bool {
	const word = bits.UintSize / 8
	nfds = min(nfds, maxSelectFds)
	b := make([]byte, (nfds+bits.UintSize-1)/bits.UintSize*word)
	return selectReads(b[:s.mem(addr, b)], nfds, s.ours)
}

// selectReads reports whether yes holds for a descriptor below nfds in
// the select set b: an array of longs, descriptor fd at bit fd%bits of
// long fd/bits. A partial long at the end is ignored.
func selectReads(b []byte, nfds uint64, yes func(fd int) bool) bool {
	const word = bits.UintSize / 8
	for w := range len(b) / word {
		var v uint64
		if word == 8 {
			v = binary.NativeEndian.Uint64(b[w*word:])
		} else {
			v = uint64(binary.NativeEndian.Uint32(b[w*word:]))
		}
		for v != 0 {
			bit := bits.TrailingZeros64(v)
			v &^= 1 << bit
			fd := w*bits.UintSize + bit
			if uint64(fd) < nfds && yes(fd) {
				return true
			}
		}
	}
	return false
}

// epollWaits reports whether the process's epoll instance epfd watches
// one of ours for reading.
func (s *Scanner) epollWaits(epfd int) bool {
	data, ok := s.read("/proc/" + s.pid + "/fdinfo/" + strconv.Itoa(epfd))
	if !ok {
		return false
	}
	// s.buf is reused by later reads: keep the lines apart.
	data = slices.Clone(data)
	for line := range bytes.Lines(data) {
		w, ok := parseEpollWatch(s.split(line))
		if !ok || w.events&(unix.EPOLLIN|unix.EPOLLRDNORM) == 0 {
			continue
		}
		// The inode is checked first: a readlink per watched descriptor
		// would cost more, and the number may name another file by now.
		if w.ino != s.files.PipeIno && w.ino != s.files.TTYIno && !s.opensTTY(w.fd) {
			continue
		}
		if s.ours(w.fd) {
			return true
		}
	}
	return false
}

// epollWatch is a file an epoll instance watches.
type epollWatch struct {
	fd     int    // the number it was added under
	events uint64 // the events it is watched for
	ino    uint64 // its inode
}

// parseEpollWatch reads the fields of an epoll fdinfo line for a watched
// file: "tfd: FD events: MASK data: DATA  pos:POS ino:INODE sdev:DEV", the
// mask and inode in hex. ok is false for any other line.
func parseEpollWatch(f [][]byte) (w epollWatch, ok bool) {
	if len(f) < 2 || string(f[0]) != "tfd:" {
		return w, false
	}
	tfd, err := strconv.ParseInt(string(f[1]), 10, 32)
	if err != nil || tfd < 0 {
		return w, false
	}
	w.fd = int(tfd)
	for i, field := range f {
		switch {
		case string(field) == "events:" && i+1 < len(f):
			w.events, _ = strconv.ParseUint(string(f[i+1]), 16, 32)
		case bytes.HasPrefix(field, []byte("ino:")):
			w.ino, _ = strconv.ParseUint(string(field[4:]), 16, 64)
		}
	}
	return w, true
}

// opensTTY reports whether the process's descriptor fd is /dev/tty, whose
// inode is not the slave's.
func (s *Scanner) opensTTY(fd int) bool {
	return s.files.TTY != "" && string(s.readlink("/proc/"+s.pid+"/fd/"+strconv.Itoa(fd))) == "/dev/tty"
}

// readDirNames lists the names in dir.
func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
