//go:build linux

package proc

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Activity on Linux, from /proc alone. Whether a member waits for input is
// decided from the kernel's view of each of its threads: the system call it
// is blocked in (/proc/PID/task/TID/syscall: its number and arguments) and
// the descriptors that call waits on, compared with the stdin pipe or the
// terminal the record was given (inputID) through their /proc/PID/fd links.
// A read names its descriptor; poll and select name theirs in the waiting
// process's memory (/proc/PID/mem at the address the call was given, which
// the kernel leaves untouched until the call returns); an epoll instance
// lists what it watches in /proc/PID/fdinfo. Listeners are the members'
// socket inodes (/proc/PID/fd links "socket:[INODE]") found in the socket
// tables of their network namespace (/proc/PID/net/tcp, tcp6, udp, udp6).

const activitySupported = true

// inputID tells the stdin pipe or terminal proc gave a record from any
// other file: a member waits for input only when it waits on one of these.
// It is set once, at launch, and never changes. The zero value is a record
// with neither.
type inputID struct {
	pipeIno uint64 // the stdin pipe's inode; 0 without Stdin (or with TTY)
	tty     string // the terminal's slave, "/dev/pts/N"; "" without TTY
	ttyIno  uint64 // the slave's inode in its devpts
	ttyDev  uint64 // the slave's device number (as /proc/PID/stat's tty_nr)
}

func (in inputID) none() bool { return in.pipeIno == 0 && in.tty == "" }

// inputOf identifies the child's end of its stdin: a pipe, or the slave of
// its terminal. Anything else (or an error) identifies nothing.
func inputOf(f *os.File) inputID {
	fi, err := f.Stat()
	if err != nil {
		return inputID{}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !ok:
		return inputID{}
	case fi.Mode()&os.ModeNamedPipe != 0:
		return inputID{pipeIno: uint64(st.Ino)}
	case fi.Mode()&os.ModeCharDevice != 0 && strings.HasPrefix(f.Name(), "/dev/pts/"):
		// creack/pty names the slave by its path, as /proc/PID/fd links
		// read it.
		return inputID{tty: f.Name(), ttyIno: uint64(st.Ino), ttyDev: uint64(st.Rdev)}
	}
	return inputID{}
}

// inputPending reports whether the stdin pipe whose write end is w holds
// bytes nobody has read yet. FIONREAD (TIOCINQ in x/sys/unix) counts the pipe's contents from
// either end. A closed w holds nothing of ours any more.
func inputPending(w *os.File) bool {
	rc, err := w.SyscallConn()
	if err != nil {
		return false
	}
	n := 0
	if rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }) != nil {
		return false
	}
	return n > 0
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

// inputCalls are the system calls, by this architecture's numbers, that
// can wait for input. activity_linux_amd64.go adds the older calls that
// only some architectures have.
var inputCalls = map[int64]callKind{
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

// treeActivity reads the activity of the members pids of a tree whose
// record was given in; the listeners only if listeners is set. A member
// that is gone, or that the host may not trace, shows nothing.
func treeActivity(pids []int, in inputID, listeners bool) Activity {
	a := Activity{Members: len(pids)}
	s := &scan{in: in, buf: make([]byte, 0, 4096)}
	if in.pipeIno != 0 {
		s.pipeLink = "pipe:[" + strconv.FormatUint(in.pipeIno, 10) + "]"
	}
	if !in.none() {
		for _, pid := range pids {
			if s.waitsForInput(pid) {
				a.WaitingForInput = true
				break
			}
		}
	}
	if listeners {
		a.Listeners = s.listeners(pids)
	}
	return a
}

// scan is one look at a tree. It is used by one goroutine.
type scan struct {
	in       inputID
	pipeLink string // "pipe:[INODE]" of the stdin pipe, or ""
	buf      []byte // file contents, reused
	link     [256]byte
	fields   [][]byte // fields of a line, reused

	// The member being looked at.
	pid  string
	ctty uint64 // its controlling terminal, as tty_nr
}

// read reads the whole file at path into s.buf, which it returns; the
// result is valid until the next read.
func (s *scan) read(path string) ([]byte, bool) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	s.buf = s.buf[:0]
	for {
		if len(s.buf) == cap(s.buf) {
			s.buf = slices.Grow(s.buf, cap(s.buf))
		}
		n, err := unix.Read(fd, s.buf[len(s.buf):cap(s.buf)])
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return nil, false
		case n == 0:
			return s.buf, true
		}
		s.buf = s.buf[:len(s.buf)+n]
	}
}

// readlink returns the target of the link at path, valid until the next
// readlink; a target longer than the buffer is cut, which no comparison
// below can mistake for a match.
func (s *scan) readlink(path string) []byte {
	n, err := unix.Readlink(path, s.link[:])
	if err != nil {
		return nil
	}
	return s.link[:n]
}

// waitsForInput reports whether a thread of pid is blocked waiting on the
// record's stdin pipe or terminal.
func (s *scan) waitsForInput(pid int) bool {
	s.pid = strconv.Itoa(pid)
	dir := "/proc/" + s.pid
	data, ok := s.read(dir + "/stat")
	if !ok {
		return false
	}
	// "pid (comm) state ppid pgrp session tty_nr ... num_threads ...":
	// comm may hold spaces and parens.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return false
	}
	f := s.split(data[i+1:])
	if len(f) < 18 || len(f[0]) != 1 || f[0][0] == 'Z' || f[0][0] == 'X' {
		return false
	}
	tty, err := strconv.ParseInt(string(f[4]), 10, 64)
	if err != nil {
		return false
	}
	s.ctty = uint64(uint32(tty))
	if threads, _ := strconv.Atoi(string(f[17])); threads <= 1 {
		return s.threadWaits(dir)
	}
	tasks, err := readDirNames(dir + "/task")
	if err != nil {
		return false
	}
	for _, tid := range tasks {
		if s.threadWaits(dir + "/task/" + tid) {
			return true
		}
	}
	return false
}

// threadWaits reports whether the thread whose /proc directory is dir is
// blocked in a system call waiting on the record's stdin or terminal.
// /proc/.../syscall reads "running", "-1 SP PC" (blocked, not in a system
// call), or "NR ARG0 ... ARG5 SP PC" with the arguments in hex.
func (s *scan) threadWaits(dir string) bool {
	data, ok := s.read(dir + "/syscall")
	if !ok {
		return false
	}
	f := s.split(data)
	if len(f) < 7 {
		return false
	}
	nr, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil {
		return false
	}
	kind := inputCalls[nr]
	if kind == callOther {
		return false
	}
	var args [3]uint64
	for i := range args {
		if args[i], err = strconv.ParseUint(string(f[1+i]), 0, 64); err != nil {
			return false
		}
	}
	switch kind {
	case callRead:
		return args[0] <= math.MaxInt32 && s.ours(int(args[0]))
	case callPoll:
		return s.pollWaits(args[0], args[1])
	case callSelect:
		return s.selectWaits(args[0], args[1])
	case callEpoll:
		return args[0] <= math.MaxInt32 && s.epollWaits(int(args[0]))
	}
	return false
}

// ours reports whether descriptor fd of the member is the record's stdin
// pipe or terminal. /dev/tty is the member's controlling terminal, which
// is ours when its tty_nr is our slave.
func (s *scan) ours(fd int) bool {
	link := s.readlink("/proc/" + s.pid + "/fd/" + strconv.Itoa(fd))
	switch {
	case link == nil:
		return false
	case s.pipeLink != "" && string(link) == s.pipeLink:
		return true
	case s.in.tty == "":
		return false
	case string(link) == s.in.tty:
		return true
	case string(link) == "/dev/tty":
		return s.ctty == s.in.ttyDev
	}
	return false
}

// mem reads len(b) bytes of the member's memory at addr, as far as it
// can; it returns how many it read.
func (s *scan) mem(addr uint64, b []byte) int {
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

// pollWaits reports whether a poll of nfds descriptors at addr (struct
// pollfd: int fd; short events; short revents) waits to read ours.
func (s *scan) pollWaits(addr, nfds uint64) bool {
	const size = 8
	nfds = min(nfds, maxPollFds)
	b := make([]byte, nfds*size)
	n := s.mem(addr, b) / size
	for i := range n {
		e := b[i*size:]
		fd := int32(binary.NativeEndian.Uint32(e))
		events := binary.NativeEndian.Uint16(e[4:])
		if fd >= 0 && events&(unix.POLLIN|pollRDNORM) != 0 && s.ours(int(fd)) {
			return true
		}
	}
	return false
}

// selectWaits reports whether a select of nfds descriptors whose read set
// is at addr waits to read ours. A set is an array of longs, descriptor
// fd at bit fd%bits of long fd/bits.
func (s *scan) selectWaits(nfds, addr uint64) bool {
	const word = bits.UintSize / 8
	nfds = min(nfds, maxSelectFds)
	b := make([]byte, (nfds+bits.UintSize-1)/bits.UintSize*word)
	n := s.mem(addr, b) / word
	for w := range n {
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
			if uint64(fd) < nfds && s.ours(fd) {
				return true
			}
		}
	}
	return false
}

// epollWaits reports whether the member's epoll instance epfd watches ours
// for reading. Its fdinfo lists a line per watched file:
// "tfd: FD events: MASK data: DATA  pos:POS ino:INODE sdev:DEV", the mask
// and inode in hex. FD is the number the file was added under; the inode
// guards against that number naming another file by now.
func (s *scan) epollWaits(epfd int) bool {
	data, ok := s.read("/proc/" + s.pid + "/fdinfo/" + strconv.Itoa(epfd))
	if !ok {
		return false
	}
	// s.buf is reused by later reads: keep the lines apart.
	data = slices.Clone(data)
	for line := range bytes.Lines(data) {
		if !bytes.HasPrefix(line, []byte("tfd:")) {
			continue
		}
		f := s.split(line)
		var tfd int64 = -1
		var events, ino uint64
		for i, field := range f {
			switch {
			case string(field) == "tfd:" && i+1 < len(f):
				tfd, _ = strconv.ParseInt(string(f[i+1]), 10, 32)
			case string(field) == "events:" && i+1 < len(f):
				events, _ = strconv.ParseUint(string(f[i+1]), 16, 32)
			case bytes.HasPrefix(field, []byte("ino:")):
				ino, _ = strconv.ParseUint(string(field[4:]), 16, 64)
			}
		}
		if tfd < 0 || events&(unix.EPOLLIN|unix.EPOLLRDNORM) == 0 {
			continue
		}
		if ino != s.in.pipeIno && ino != s.in.ttyIno && !s.opensTTY(int(tfd)) {
			continue
		}
		if s.ours(int(tfd)) {
			return true
		}
	}
	return false
}

// opensTTY reports whether the member's descriptor fd is /dev/tty, whose
// inode is not the slave's.
func (s *scan) opensTTY(fd int) bool {
	return s.in.tty != "" && string(s.readlink("/proc/"+s.pid+"/fd/"+strconv.Itoa(fd))) == "/dev/tty"
}

// split cuts line into its space-separated fields, reusing s.fields.
func (s *scan) split(line []byte) [][]byte {
	f := s.fields[:0]
	for {
		line = bytes.TrimLeft(line, " \t\n")
		if len(line) == 0 {
			break
		}
		end := bytes.IndexAny(line, " \t\n")
		if end < 0 {
			end = len(line)
		}
		f = append(f, line[:end])
		line = line[end:]
	}
	s.fields = f
	return f
}

// socketTables are the socket tables of a network namespace, and the
// state that makes a socket in each a listener: TCP_LISTEN, and for UDP
// TCP_CLOSE, which is a socket not connected to a peer.
var socketTables = [...]struct {
	network string
	listen  string
}{
	{"tcp", "0A"},
	{"tcp6", "0A"},
	{"udp", "07"},
	{"udp6", "07"},
}

// listeners lists the listening sockets the members pids hold. The socket
// tables are read only when a member holds a socket, once per network
// namespace the members holding sockets are in.
func (s *scan) listeners(pids []int) []Listener {
	var socks map[uint64]int // socket inode: the lowest member PID holding it
	var netns map[string]int // a network namespace: a member in it
	for _, pid := range pids {
		s.pid = strconv.Itoa(pid)
		dir := "/proc/" + s.pid + "/fd/"
		fds, err := readDirNames(dir)
		if err != nil {
			continue
		}
		found := false
		for _, fd := range fds {
			ino, ok := socketInode(s.readlink(dir + fd))
			if !ok {
				continue
			}
			if socks == nil {
				socks = make(map[uint64]int)
			}
			if held, ok := socks[ino]; !ok || pid < held {
				socks[ino] = pid
			}
			found = true
		}
		if !found {
			continue
		}
		ns := string(s.readlink("/proc/" + s.pid + "/ns/net"))
		if netns == nil {
			netns = make(map[string]int)
		}
		if _, ok := netns[ns]; !ok {
			netns[ns] = pid
		}
	}
	if len(socks) == 0 {
		return nil
	}
	var ls []Listener
	seen := make(map[uint64]bool, len(socks))
	self := string(s.readlink("/proc/self/ns/net"))
	for ns, pid := range netns {
		for _, table := range socketTables {
			if ns == self && strings.HasPrefix(table.network, "tcp") {
				// /proc/net/tcp walks the whole connection hash table
				// (1.5 ms here, however few sockets there are); sock_diag
				// asks for listening sockets alone. It answers for this
				// process's namespace only.
				var ok bool
				if ls, ok = diagListeners(table.network, socks, seen, ls); ok {
					continue
				}
			}
			data, ok := s.read("/proc/" + strconv.Itoa(pid) + "/net/" + table.network)
			if !ok {
				continue
			}
			ls = s.parseTable(data, table.network, table.listen, socks, seen, ls)
		}
	}
	slices.SortFunc(ls, func(a, b Listener) int {
		if a.Port != b.Port {
			return a.Port - b.Port
		}
		if c := strings.Compare(a.Network, b.Network); c != 0 {
			return c
		}
		if c := strings.Compare(a.Address, b.Address); c != 0 {
			return c
		}
		return a.PID - b.PID
	})
	return ls
}

// socketInode returns INODE of a "socket:[INODE]" link.
func socketInode(link []byte) (uint64, bool) {
	rest, ok := bytes.CutPrefix(link, []byte("socket:["))
	if !ok || len(rest) < 2 || rest[len(rest)-1] != ']' {
		return 0, false
	}
	ino, err := strconv.ParseUint(string(rest[:len(rest)-1]), 10, 64)
	return ino, err == nil
}

// parseTable appends to ls the listeners of a socket table whose inodes
// are in socks and not yet seen. A line reads "sl local rem st tx:rx tr:when
// retrnsmt uid timeout inode ...", an address as hex words in host byte
// order, then ":" and the port in hex.
func (s *scan) parseTable(data []byte, network, listen string, socks map[uint64]int, seen map[uint64]bool, ls []Listener) []Listener {
	first := true
	for line := range bytes.Lines(data) {
		if first { // the header
			first = false
			continue
		}
		f := s.split(line)
		if len(f) < 10 || string(f[3]) != listen {
			continue
		}
		ino, err := strconv.ParseUint(string(f[9]), 10, 64)
		if err != nil || seen[ino] {
			continue
		}
		pid, ok := socks[ino]
		if !ok {
			continue
		}
		addr, ok := parseSocketAddr(f[1])
		if !ok || addr.Port() == 0 {
			continue
		}
		seen[ino] = true
		ls = append(ls, Listener{Network: network, Address: addr.String(), Port: int(addr.Port()), PID: pid})
	}
	return ls
}

// parseSocketAddr reads "0100007F:1F90" (IPv4) or 32 hex digits and a port
// (IPv6): each 32-bit word of the address printed as a number in host
// byte order.
func parseSocketAddr(field []byte) (netip.AddrPort, bool) {
	hexAddr, hexPort, ok := bytes.Cut(field, []byte(":"))
	if !ok || len(hexAddr)%8 != 0 {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(string(hexPort), 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	var b [16]byte
	words := len(hexAddr) / 8
	if words != 1 && words != 4 {
		return netip.AddrPort{}, false
	}
	for i := range words {
		w, err := strconv.ParseUint(string(hexAddr[i*8:i*8+8]), 16, 32)
		if err != nil {
			return netip.AddrPort{}, false
		}
		binary.NativeEndian.PutUint32(b[i*4:], uint32(w))
	}
	var addr netip.Addr
	if words == 1 {
		addr = netip.AddrFrom4([4]byte(b[:4]))
	} else {
		addr = netip.AddrFrom16(b)
	}
	return netip.AddrPortFrom(addr, uint16(port)), true
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

// diagListeners appends the listening TCP sockets (network "tcp" or
// "tcp6") of this process's network namespace whose inodes are in socks
// and not yet seen, asking the kernel through NETLINK_SOCK_DIAG. ok is
// false when it could not ask.
func diagListeners(network string, socks map[uint64]int, seen map[uint64]bool, ls []Listener) (_ []Listener, ok bool) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return ls, false
	}
	defer unix.Close(fd)
	family := byte(unix.AF_INET)
	if network == "tcp6" {
		family = unix.AF_INET6
	}
	// struct nlmsghdr, then struct inet_diag_req_v2: family, protocol,
	// extensions, padding, the states wanted as a bit mask, and a zero
	// struct inet_diag_sockid (48 bytes).
	const reqLen = unix.NLMSG_HDRLEN + 56
	req := make([]byte, reqLen)
	binary.NativeEndian.PutUint32(req[0:], reqLen)
	binary.NativeEndian.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	req[16], req[17] = family, unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(req[20:], 1<<tcpListen)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return ls, false
	}
	buf := make([]byte, 32<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return ls, false
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return ls, false
		}
		for _, msg := range msgs {
			switch msg.Header.Type {
			case unix.NLMSG_DONE:
				return ls, true
			case unix.NLMSG_ERROR:
				return ls, false
			}
			ls = appendDiag(msg.Data, network, socks, seen, ls)
		}
	}
}

// tcpListen is TCP_LISTEN, the state of a listening socket.
const tcpListen = 10

// appendDiag appends the listener a struct inet_diag_msg describes, if its
// inode is in socks and not yet seen: family, state, timer, retransmits,
// then struct inet_diag_sockid (source port and destination port in
// network byte order, source and destination address of 16 bytes each,
// interface, cookie), then expires, rqueue, wqueue, uid and inode.
func appendDiag(m []byte, network string, socks map[uint64]int, seen map[uint64]bool, ls []Listener) []Listener {
	if len(m) < 72 {
		return ls
	}
	ino := uint64(binary.NativeEndian.Uint32(m[68:]))
	pid, ok := socks[ino]
	if !ok || seen[ino] {
		return ls
	}
	port := binary.BigEndian.Uint16(m[4:])
	var addr netip.Addr
	if m[0] == unix.AF_INET {
		addr = netip.AddrFrom4([4]byte(m[8:12]))
	} else {
		addr = netip.AddrFrom16([16]byte(m[8:24]))
	}
	seen[ino] = true
	return append(ls, Listener{Network: network, Address: netip.AddrPortFrom(addr, port).String(), Port: int(port), PID: pid})
}
