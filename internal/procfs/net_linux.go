package procfs

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Listeners are the members' socket inodes (/proc/PID/fd links
// "socket:[INODE]") found among the listening sockets of their network
// namespace: from sock_diag for TCP in this process's namespace, from the
// socket tables (/proc/PID/net/tcp, tcp6, udp, udp6) otherwise.

// Socket is a socket a process listens on.
type Socket struct {
	// Network is "tcp", "tcp6", "udp" or "udp6": the table or sock_diag
	// family the socket was found in.
	Network string
	Addr    netip.AddrPort // its local address
	PID     int            // the lowest PID among the processes asked about that hold it
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

// Listeners lists the listening TCP sockets and bound, unconnected UDP
// sockets that the processes pids hold, in no particular order, each once.
// The socket tables are read only when a process holds a socket, once per
// network namespace of those that do. A process that is gone, or that the
// caller may not trace, holds none.
func (s *Scanner) Listeners(pids []int) []Socket {
	var h holders
	var inos []uint64
	for _, pid := range pids {
		var ns string
		inos, ns = s.sockets(pid, inos[:0])
		h.add(pid, inos, ns)
	}
	return s.tables(h, nil)
}

// holders are the sockets a set of processes hold, and their network
// namespaces. The zero value holds none.
type holders struct {
	socks map[uint64]int // socket inode: the lowest PID holding it
	netns map[string]int // a network namespace: a process in it that holds a socket
}

// add records that process pid, in network namespace ns, holds the
// sockets inos.
func (h *holders) add(pid int, inos []uint64, ns string) {
	if len(inos) == 0 {
		return
	}
	if h.socks == nil {
		h.socks = make(map[uint64]int)
		h.netns = make(map[string]int)
	}
	for _, ino := range inos {
		if held, ok := h.socks[ino]; !ok || pid < held {
			h.socks[ino] = pid
		}
	}
	if _, ok := h.netns[ns]; !ok {
		h.netns[ns] = pid
	}
}

// sockets appends to inos the inodes of the sockets process pid holds
// (its /proc/PID/fd links "socket:[INODE]") and returns them, with its
// network namespace (the /proc/PID/ns/net link) if it holds any.
func (s *Scanner) sockets(pid int, inos []uint64) ([]uint64, string) {
	s.pid = strconv.Itoa(pid)
	dir := "/proc/" + s.pid + "/fd/"
	fds, err := readDirNames(dir)
	if err != nil {
		return inos, ""
	}
	n := len(inos)
	for _, fd := range fds {
		if ino, ok := SocketInode(s.readlink(dir + fd)); ok {
			inos = append(inos, ino)
		}
	}
	if len(inos) == n {
		return inos, ""
	}
	return inos, string(s.readlink("/proc/" + s.pid + "/ns/net"))
}

// tables appends to ls the listeners among the sockets h holds, read from
// the socket tables of their network namespaces, and returns them.
func (s *Scanner) tables(h holders, ls []Socket) []Socket {
	if len(h.socks) == 0 {
		return ls
	}
	seen := make(map[uint64]bool, len(h.socks))
	self := string(s.readlink("/proc/self/ns/net"))
	for ns, pid := range h.netns {
		for _, table := range socketTables {
			if ns == self && strings.HasPrefix(table.network, "tcp") {
				// /proc/net/tcp walks the whole connection hash table
				// (1.5 ms here, however few sockets there are); sock_diag
				// asks for listening sockets alone. It answers for this
				// process's namespace only.
				var ok bool
				if ls, ok = diagListeners(table.network, h.socks, seen, ls); ok {
					continue
				}
			}
			data, ok := s.read("/proc/" + strconv.Itoa(pid) + "/net/" + table.network)
			if !ok {
				continue
			}
			ls = s.parseTable(data, table.network, table.listen, h.socks, seen, ls)
		}
	}
	return ls
}

// parseTable appends to ls the listeners of a socket table whose inodes
// are in socks and not yet seen, and marks them seen. After a header line,
// a line reads "sl local rem st tx:rx tr:when retrnsmt uid timeout inode
// ...", an address as hex words in host byte order, then ":" and the port
// in hex; a socket is listening when its state st is listen.
func (s *Scanner) parseTable(data []byte, network, listen string, socks map[uint64]int, seen map[uint64]bool, ls []Socket) []Socket {
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
		ls = append(ls, Socket{Network: network, Addr: addr, PID: pid})
	}
	return ls
}

// diagListeners appends the listening TCP sockets (network "tcp" or
// "tcp6") of this process's network namespace whose inodes are in socks
// and not yet seen, asking the kernel through NETLINK_SOCK_DIAG. ok is
// false when it could not ask.
func diagListeners(network string, socks map[uint64]int, seen map[uint64]bool, ls []Socket) (_ []Socket, ok bool) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return ls, false
	}
	defer unix.Close(fd)
	family := byte(unix.AF_INET)
	if network == "tcp6" {
		family = unix.AF_INET6
	}
	if err := unix.Sendto(fd, diagRequest(family), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
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

// diagRequest is a dump request for the listening TCP sockets of family:
// struct nlmsghdr, then struct inet_diag_req_v2: family, protocol,
// extensions, padding, the states wanted as a bit mask, and a zero struct
// inet_diag_sockid (48 bytes).
func diagRequest(family byte) []byte {
	const reqLen = unix.NLMSG_HDRLEN + 56
	req := make([]byte, reqLen)
	binary.NativeEndian.PutUint32(req[0:], reqLen)
	binary.NativeEndian.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	req[16], req[17] = family, unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(req[20:], 1<<tcpListen)
	return req
}

// appendDiag appends the listener a struct inet_diag_msg describes, if its
// inode is in socks and not yet seen, and marks it seen: family, state,
// timer, retransmits, then struct inet_diag_sockid (source port and
// destination port in network byte order, source and destination address
// of 16 bytes each, interface, cookie), then expires, rqueue, wqueue, uid
// and inode.
func appendDiag(m []byte, network string, socks map[uint64]int, seen map[uint64]bool, ls []Socket) []Socket {
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
	return append(ls, Socket{Network: network, Addr: netip.AddrPortFrom(addr, port), PID: pid})
}
