package procfs

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestParseStat reads /proc/PID/stat lines of the forms the kernel
// writes: comm with spaces and parentheses, a controlling terminal, a
// zombie, and lines cut short or garbled.
func TestParseStat(t *testing.T) {
	t.Parallel()
	const tail = " 0 0 0 0 20 0 1 0 53530 3133440 383 18446744073709551615 94750272598016 94750272617897 140731775568128 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"
	tests := []struct {
		name string
		line string
		want Stat
		ok   bool
	}{
		{"cat", "28679 (cat) R 28677 28677 4279 0 -1 4194304 100 0 0 0" + tail,
			Stat{State: 'R', PPID: 28677, Pgrp: 28677, Session: 4279, Flags: 4194304, Threads: 1, StartTime: 53530}, true},
		{"comm-with-parens", "7 (a) b (c)) S 1 7 7 34816 7 4194560 1 0 0 0" + tail,
			Stat{State: 'S', PPID: 1, Pgrp: 7, Session: 7, TTYNr: 34816, Flags: 4194560, Threads: 1, StartTime: 53530}, true},
		{"threads-and-zombie", "9 (go) Z 8 8 8 0 -1 4194564 0 0 0 0 0 0 0 0 20 0 12 0 777 0 0" + "\n",
			Stat{State: 'Z', PPID: 8, Pgrp: 8, Session: 8, Flags: 4194564, Threads: 12, StartTime: 777}, true},
		{"negative-tty", "5 (x) S 1 5 5 -1 -1 0 0 0 0 0" + tail,
			Stat{State: 'S', PPID: 1, Pgrp: 5, Session: 5, TTYNr: 0xffffffff, Threads: 1, StartTime: 53530}, true},
		{"no-paren", "5 x S 1 5 5 0", Stat{}, false},
		{"cut-before-starttime", "5 (x) S 1 5 5 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0\n", Stat{}, false},
		{"long-state", "5 (x) SS 1 5 5 0" + tail, Stat{}, false},
		{"garbled-pgrp", "5 (x) S 1 five 5 0" + tail, Stat{}, false},
		{"empty", "", Stat{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := ParseStat([]byte(tt.line))
			if ok != tt.ok || got != tt.want {
				t.Errorf("ParseStat(%q) = %+v, %v; want %+v, %v", tt.line, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestBracketed reads the links of sockets and namespaces.
func TestBracketed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		link  string
		sock  uint64
		sokOK bool
		pid   uint64
		pidOK bool
	}{
		{"socket:[1530]", 1530, true, 0, false},
		{"pid:[4026531836]", 0, false, 4026531836, true},
		{"pipe:[1530]", 0, false, 0, false},
		{"socket:[]", 0, false, 0, false},
		{"socket:[12", 0, false, 0, false},
		{"socket:[x1]", 0, false, 0, false},
		{"/dev/pts/0", 0, false, 0, false},
		{"", 0, false, 0, false},
	}
	for _, tt := range tests {
		if got, ok := SocketInode([]byte(tt.link)); got != tt.sock || ok != tt.sokOK {
			t.Errorf("SocketInode(%q) = %d, %v; want %d, %v", tt.link, got, ok, tt.sock, tt.sokOK)
		}
		if got, ok := nsInode([]byte(tt.link), "pid"); got != tt.pid || ok != tt.pidOK {
			t.Errorf("nsInode(%q, pid) = %d, %v; want %d, %v", tt.link, got, ok, tt.pid, tt.pidOK)
		}
	}
}
