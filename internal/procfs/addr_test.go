package procfs

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

// littleEndian skips a test whose samples were written by a
// little-endian kernel (amd64, arm64): socket tables print addresses in
// host byte order.
func littleEndian(t *testing.T) {
	t.Helper()
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the samples are from a little-endian host; this one is big-endian")
	}
}

// TestParseSocketAddr reads the local_address column of /proc/net/tcp,
// tcp6, udp and udp6.
func TestParseSocketAddr(t *testing.T) {
	t.Parallel()
	littleEndian(t)
	tests := []struct {
		field string
		want  string // "" when it does not parse
	}{
		{"0100007F:1F90", "127.0.0.1:8080"},
		{"00000000:07E8", "0.0.0.0:2024"},
		{"020200C0:8E32", "192.0.2.2:36402"},
		{"00000000:0035", "0.0.0.0:53"},
		{"00000000000000000000000000000000:0BB8", "[::]:3000"},
		{"00000000000000000000000001000000:1F90", "[::1]:8080"},
		{"0000000000000000FFFF00000100007F:1F90", "[::ffff:127.0.0.1]:8080"},
		{"B80D0120000000000000000001000000:0050", "[2001:db8::1]:80"},
		{"0100007F:0000", "127.0.0.1:0"},
		{"0100007F", ""},
		{"0100007F:", ""},
		{"0100007F:10000", ""},
		{"0100007:1F90", ""},
		{"0100007F0100007F:1F90", ""},
		{"0100007G:1F90", ""},
		{":1F90", ""},
	}
	for _, tt := range tests {
		got, ok := parseSocketAddr([]byte(tt.field))
		switch {
		case tt.want == "" && ok:
			t.Errorf("parseSocketAddr(%q) = %v; want no address", tt.field, got)
		case tt.want != "" && (!ok || got.String() != tt.want):
			t.Errorf("parseSocketAddr(%q) = %v, %v; want %s", tt.field, got, ok, tt.want)
		}
	}
}

func mustAddrPort(t *testing.T, s string) netip.AddrPort {
	t.Helper()
	a, err := netip.ParseAddrPort(s)
	if err != nil {
		t.Fatalf("ParseAddrPort(%q): %v", s, err)
	}
	return a
}
