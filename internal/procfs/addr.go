package procfs

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strconv"
)

// parseSocketAddr reads a socket table's address: "0100007F:1F90" (IPv4)
// or 32 hex digits and a port (IPv6), each 32-bit word of the address
// printed as a number in host byte order, the port in hex.
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
