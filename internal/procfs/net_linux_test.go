package procfs

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tcpTable is /proc/net/tcp as the kernel writes it: a listener on
// 0.0.0.0:2024, an established connection, and a listener on
// 127.0.0.1:8080.
const tcpTable = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode                                                     
   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1530 1 000000009816917c 100 0 0 10 0                      
   1: 020200C0:8E32 507100CB:01BB 01 00000000:00000000 02:00000C0F 00000000     0        0 1531 3 00000000687dd0ba 20 4 30 10 -1                     
   2: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1532 1 0000000038d16a7e 100 0 0 10 0                      
`

// udp6Table is /proc/net/udp6: a socket bound to [::]:53 and one
// connected to a peer.
const udp6Table = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  100: 00000000000000000000000000000000:0035 00000000000000000000000000000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 2001 2 00000000a1b2c3d4 0
  101: 00000000000000000000000001000000:A1B2 00000000000000000000000001000000:0035 01 00000000:00000000 00:00000000 00000000     0        0 2002 2 00000000a1b2c3d5 0
`

// TestParseTable reads socket tables: a socket is listed when it is in the
// listening state, held by a process asked about, not seen already and
// bound to a port; the header is skipped.
func TestParseTable(t *testing.T) {
	t.Parallel()
	littleEndian(t)
	tests := []struct {
		name    string
		table   string
		network string
		listen  string
		socks   map[uint64]int
		seen    []uint64
		want    []Socket
	}{
		{"tcp-listeners", tcpTable, "tcp", "0A", map[uint64]int{1530: 10, 1531: 11, 1532: 12}, nil, []Socket{
			{"tcp", mustAddrPort(t, "0.0.0.0:2024"), 10},
			{"tcp", mustAddrPort(t, "127.0.0.1:8080"), 12},
		}},
		{"tcp-not-ours", tcpTable, "tcp", "0A", map[uint64]int{1532: 12}, nil, []Socket{
			{"tcp", mustAddrPort(t, "127.0.0.1:8080"), 12},
		}},
		{"tcp-seen", tcpTable, "tcp", "0A", map[uint64]int{1530: 10, 1532: 12}, []uint64{1530}, []Socket{
			{"tcp", mustAddrPort(t, "127.0.0.1:8080"), 12},
		}},
		{"udp6-bound", udp6Table, "udp6", "07", map[uint64]int{2001: 20, 2002: 20}, nil, []Socket{
			{"udp6", mustAddrPort(t, "[::]:53"), 20},
		}},
		{"header-only", "  sl  local_address rem_address   st\n", "tcp", "0A", map[uint64]int{1530: 10}, nil, nil},
	}
	for _, tt := range tests {
		seen := make(map[uint64]bool)
		for _, ino := range tt.seen {
			seen[ino] = true
		}
		var s Scanner
		got := s.parseTable([]byte(tt.table), tt.network, tt.listen, tt.socks, seen, nil)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: parseTable = %v; want %v", tt.name, got, tt.want)
		}
		// What was listed is marked seen: a second read lists nothing.
		if again := s.parseTable([]byte(tt.table), tt.network, tt.listen, tt.socks, seen, nil); len(again) != 0 {
			t.Errorf("%s: parseTable again = %v; want nothing (all seen)", tt.name, again)
		}
	}
}

// diagMsg builds a struct inet_diag_msg for a socket of family on addr
// with inode ino.
func diagMsg(family byte, addr []byte, port uint16, ino uint32) []byte {
	m := make([]byte, 72)
	m[0], m[1] = family, tcpListen
	binary.BigEndian.PutUint16(m[4:], port)
	copy(m[8:], addr)
	binary.NativeEndian.PutUint32(m[68:], ino)
	return m
}

// TestAppendDiag reads sock_diag answers: the socket is listed when its
// inode is held and not seen yet; a short message is ignored.
func TestAppendDiag(t *testing.T) {
	t.Parallel()
	socks := map[uint64]int{7: 70, 8: 80}
	seen := map[uint64]bool{}
	v6 := make([]byte, 16)
	v6[15] = 1
	var ls []Socket
	ls = appendDiag(diagMsg(unix.AF_INET, []byte{127, 0, 0, 1}, 8080, 7), "tcp", socks, seen, ls)
	ls = appendDiag(diagMsg(unix.AF_INET6, v6, 3000, 8), "tcp6", socks, seen, ls)
	ls = appendDiag(diagMsg(unix.AF_INET, []byte{10, 0, 0, 1}, 22, 9), "tcp", socks, seen, ls)    // not held
	ls = appendDiag(diagMsg(unix.AF_INET, []byte{127, 0, 0, 1}, 8080, 7), "tcp", socks, seen, ls) // seen
	ls = appendDiag(diagMsg(unix.AF_INET, []byte{127, 0, 0, 1}, 9, 8)[:71], "tcp", socks, seen, ls)
	want := []Socket{
		{"tcp", mustAddrPort(t, "127.0.0.1:8080"), 70},
		{"tcp6", mustAddrPort(t, "[::1]:3000"), 80},
	}
	if !slices.Equal(ls, want) {
		t.Errorf("appendDiag = %v; want %v", ls, want)
	}
	if !seen[7] || !seen[8] || seen[9] {
		t.Errorf("seen = %v; want 7 and 8", seen)
	}
}

// TestDiagRequest checks the dump request's header and the states asked
// for.
func TestDiagRequest(t *testing.T) {
	t.Parallel()
	req := diagRequest(unix.AF_INET6)
	if n := binary.NativeEndian.Uint32(req); int(n) != len(req) || n != unix.NLMSG_HDRLEN+56 {
		t.Errorf("length %d, buffer %d; want %d", n, len(req), unix.NLMSG_HDRLEN+56)
	}
	if typ := binary.NativeEndian.Uint16(req[4:]); typ != unix.SOCK_DIAG_BY_FAMILY {
		t.Errorf("type %d; want SOCK_DIAG_BY_FAMILY", typ)
	}
	if req[16] != unix.AF_INET6 || req[17] != unix.IPPROTO_TCP {
		t.Errorf("family %d, protocol %d; want AF_INET6, TCP", req[16], req[17])
	}
	if states := binary.NativeEndian.Uint32(req[20:]); states != 1<<tcpListen {
		t.Errorf("states %#x; want TCP_LISTEN only", states)
	}
}

// TestListenersSelf lists the sockets this process listens on, through
// sock_diag (TCP) and the socket tables (UDP); a connected UDP socket is
// not listed.
func TestListenersSelf(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var lc net.ListenConfig
	tcp, err := lc.Listen(ctx, "tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen tcp: %v", err)
	}
	defer tcp.Close()
	udp, err := lc.ListenPacket(ctx, "udp6", "[::1]:0")
	if err != nil {
		t.Skipf("listen udp6: %v (a host without IPv6 runs the rest)", err)
	}
	defer udp.Close()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp4", tcp.Addr().String())
	if err != nil {
		t.Fatalf("dial udp: %v", err)
	}
	defer conn.Close()

	var s Scanner
	got := s.Listeners([]int{os.Getpid()})
	want := map[string]string{
		"tcp":  tcp.Addr().String(),
		"udp6": udp.LocalAddr().String(),
	}
	found := map[string]bool{}
	for _, l := range got {
		if l.PID != os.Getpid() {
			t.Errorf("listener %v: PID %d; want %d", l, l.PID, os.Getpid())
		}
		if l.Addr.String() == conn.LocalAddr().String() {
			t.Errorf("connected UDP socket %v listed", l)
		}
		if want[l.Network] == l.Addr.String() {
			found[l.Network] = true
		}
	}
	for network, addr := range want {
		if !found[network] {
			t.Errorf("Listeners = %v; want %s %s among them", got, network, addr)
		}
	}
}

// TestReadSelf reads this process's stat and namespace, and finds it
// waiting to read nothing (the test's goroutine is running).
func TestReadSelf(t *testing.T) {
	t.Parallel()
	st, ok := ReadStat(os.Getpid())
	if !ok || st.PPID != os.Getppid() || st.Pgrp != unix.Getpgrp() || st.State == 'Z' || st.Threads < 1 {
		t.Errorf("ReadStat(self) = %+v, %v; want ppid %d, pgrp %d, alive", st, ok, os.Getppid(), unix.Getpgrp())
	}
	if start := SelfStartTime(); start == 0 || start != st.StartTime {
		t.Errorf("SelfStartTime() = %d; want %d from stat", start, st.StartTime)
	}
	self, ok := PIDNamespace(0)
	byPID, ok2 := PIDNamespace(os.Getpid())
	if !ok || !ok2 || self == 0 || self != byPID {
		t.Errorf("PIDNamespace: self %d (%v), by PID %d (%v); want the same, nonzero", self, ok, byPID, ok2)
	}
	if _, ok := ReadStat(-1); ok {
		t.Errorf("ReadStat(-1) ok; want no process")
	}
	var s Scanner
	if s.WaitsToRead(os.Getpid(), Files{}) {
		t.Errorf("WaitsToRead(self, no files) = true")
	}
	if s.WaitsToRead(-1, Files{PipeIno: 1}) {
		t.Errorf("WaitsToRead(-1) = true")
	}
}
