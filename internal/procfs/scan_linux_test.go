package procfs

import (
	"encoding/binary"
	"math/bits"
	"slices"
	"testing"
)

// TestParseSyscall reads /proc/PID/task/TID/syscall lines: a thread
// running, one blocked outside a system call, and one blocked in a call
// with its six arguments.
func TestParseSyscall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		nr   int64
		args [6]uint64
		ok   bool
	}{
		{"270 0xfb 0x7ffc71f41320 0x0 0x0 0x7ffc71f41230 0x7ffc71f41240 0x7ffc71f41200 0x7fecbc2e9aec\n",
			270, [6]uint64{0xfb, 0x7ffc71f41320, 0, 0, 0x7ffc71f41230, 0x7ffc71f41240}, true},
		{"0 0x0 0x7ffd5e4c6f57 0x1 0x0 0x0 0x0 0x7ffd5e4c6f38 0x7f3c8e31a1f2\n",
			0, [6]uint64{0, 0x7ffd5e4c6f57, 1, 0, 0, 0}, true},
		{"running\n", 0, [6]uint64{}, false},
		{"-1 0x7ffd5e4c6f38 0x7f3c8e31a1f2\n", 0, [6]uint64{}, false},
		{"-1 0x0 0x0 0x0 0x0 0x0 0x0 0x7ffd5e4c6f38 0x7f3c8e31a1f2\n", 0, [6]uint64{}, false},
		{"0 0x0 0x7ffd5e4c6f57 0x1\n", 0, [6]uint64{}, false},
		{"0 0x0 zz 0x1 0x0 0x0 0x0 0x7ffd5e4c6f38 0x7f3c8e31a1f2\n", 0, [6]uint64{}, false},
		{"", 0, [6]uint64{}, false},
	}
	var s Scanner
	for _, tt := range tests {
		nr, args, ok := parseSyscall(s.split([]byte(tt.line)))
		if nr != tt.nr || args != tt.args || ok != tt.ok {
			t.Errorf("parseSyscall(%q) = %d, %#x, %v; want %d, %#x, %v", tt.line, nr, args, ok, tt.nr, tt.args, tt.ok)
		}
	}
}

// TestLinePredicates: offCPU tells a thread the kernel shows off its CPU
// (in a call, or blocked outside one) from one that runs; counted reads
// the switch count of schedstat lines.
func TestLinePredicates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		f     func([]byte) bool
		cases map[string]bool
	}{
		{"offCPU", offCPU, map[string]bool{
			"270 0xfb 0x7ffc71f41320 0x0 0x0 0x7ffc71f41230 0x7ffc71f41240 0x7ffc71f41200 0x7fecbc2e9aec\n": true,
			"0 0x0 0x7ffd5e4c6f57 0x1 0x0 0x0 0x0 0x7ffd5e4c6f38 0x7f3c8e31a1f2\n":                          true,
			"-1 0x7ffd5e4c6f38 0x7f3c8e31a1f2\n":                                                            true,
			"running\n":                                                                                     false,
			"":                                                                                              false,
		}},
		{"counted", counted, map[string]bool{
			"1038247 99005 7\n": true,
			"0 0 0\n":           false,
			"5 6 1":             true,
			"":                  false,
			"12 x\n":            false,
		}},
	} {
		for in, want := range tc.cases {
			if got := tc.f([]byte(in)); got != want {
				t.Errorf("%s(%q) = %v; want %v", tc.name, in, got, want)
			}
		}
	}
}

// TestParseEpollWatch reads the lines of an epoll instance's
// /proc/PID/fdinfo: only "tfd:" lines name a watched file.
func TestParseEpollWatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		want epollWatch
		ok   bool
	}{
		{"tfd:        4 events:       19 data:                4  pos:0 ino:1700b sdev:f\n", epollWatch{fd: 4, events: 0x19, ino: 0x1700b}, true},
		{"tfd:        0 events:        1 data:                0  pos:0 ino:3 sdev:18\n", epollWatch{fd: 0, events: 1, ino: 3}, true},
		{"tfd:       12 events: 8000001d data:     7f0c00000001  pos:0 ino:4b2 sdev:e\n", epollWatch{fd: 12, events: 0x8000001d, ino: 0x4b2}, true},
		{"tfd: 7\n", epollWatch{fd: 7}, true},
		{"pos:\t0\n", epollWatch{}, false},
		{"ino:\t1038\n", epollWatch{}, false},
		{"tfd: -1 events: 19\n", epollWatch{}, false},
		{"tfd: x events: 19\n", epollWatch{}, false},
		{"tfd:\n", epollWatch{}, false},
	}
	var s Scanner
	for _, tt := range tests {
		got, ok := parseEpollWatch(s.split([]byte(tt.line)))
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseEpollWatch(%q) = %+v, %v; want %+v, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

// recorder is a yes for pollReads and selectReads that answers true for
// the descriptors in want and records what it was asked.
type recorder struct {
	want  []int
	asked []int
}

func (r *recorder) yes(fd int) bool {
	r.asked = append(r.asked, fd)
	return slices.Contains(r.want, fd)
}

// pollFds builds an array of struct pollfd.
func pollFds(entries ...[2]int) []byte {
	b := make([]byte, 0, len(entries)*pollFdSize)
	for _, e := range entries {
		b = binary.NativeEndian.AppendUint32(b, uint32(int32(e[0])))
		b = binary.NativeEndian.AppendUint16(b, uint16(e[1]))
		b = binary.NativeEndian.AppendUint16(b, 0)
	}
	return b
}

// TestPollReads reads poll sets: only descriptors polled for reading
// (POLLIN or POLLRDNORM) are asked about, negative ones are skipped, and a
// partial entry at the end is ignored.
func TestPollReads(t *testing.T) {
	t.Parallel()
	const pollIn, pollOut = 0x1, 0x4
	tests := []struct {
		name  string
		set   []byte
		want  []int
		yes   bool
		asked []int
	}{
		{"stdin-read", pollFds([2]int{0, pollIn}), []int{0}, true, []int{0}},
		{"rdnorm", pollFds([2]int{3, pollRDNORM}), []int{3}, true, []int{3}},
		{"write-only", pollFds([2]int{0, pollOut}), []int{0}, false, nil},
		{"negative-skipped", pollFds([2]int{-1, pollIn}, [2]int{5, pollIn | pollOut}), []int{5}, true, []int{5}},
		{"none-ours", pollFds([2]int{4, pollIn}, [2]int{6, pollIn}), []int{0}, false, []int{4, 6}},
		{"partial-entry", pollFds([2]int{0, pollIn})[:pollFdSize-1], []int{0}, false, nil},
		{"empty", nil, []int{0}, false, nil},
	}
	for _, tt := range tests {
		r := &recorder{want: tt.want}
		if got := pollReads(tt.set, r.yes); got != tt.yes || !slices.Equal(r.asked, tt.asked) {
			t.Errorf("%s: pollReads = %v, asked %v; want %v, asked %v", tt.name, got, r.asked, tt.yes, tt.asked)
		}
	}
}

// selectSet builds a select read set of words longs with fds set.
func selectSet(words int, fds ...int) []byte {
	const word = bits.UintSize / 8
	b := make([]byte, words*word)
	for _, fd := range fds {
		w, bit := fd/bits.UintSize, fd%bits.UintSize
		if word == 8 {
			v := binary.NativeEndian.Uint64(b[w*word:])
			binary.NativeEndian.PutUint64(b[w*word:], v|1<<bit)
		} else {
			v := binary.NativeEndian.Uint32(b[w*word:])
			binary.NativeEndian.PutUint32(b[w*word:], v|1<<bit)
		}
	}
	return b
}

// TestSelectReads reads select sets: each set bit below nfds is asked
// about in order, across words; bits at or above nfds are not.
func TestSelectReads(t *testing.T) {
	t.Parallel()
	n := bits.UintSize
	tests := []struct {
		name  string
		set   []byte
		nfds  uint64
		want  []int
		yes   bool
		asked []int
	}{
		{"stdin", selectSet(1, 0), 1, []int{0}, true, []int{0}},
		{"second-word", selectSet(2, 3, n+2), uint64(n + 3), []int{n + 2}, true, []int{3, n + 2}},
		{"above-nfds", selectSet(1, 0, 7), 5, []int{7}, false, []int{0}},
		{"none-set", selectSet(2), uint64(2 * n), []int{0}, false, nil},
		{"partial-word", selectSet(1, 0)[:bits.UintSize/8-1], 1, []int{0}, false, nil},
	}
	for _, tt := range tests {
		r := &recorder{want: tt.want}
		if got := selectReads(tt.set, tt.nfds, r.yes); got != tt.yes || !slices.Equal(r.asked, tt.asked) {
			t.Errorf("%s: selectReads = %v, asked %v; want %v, asked %v", tt.name, got, r.asked, tt.yes, tt.asked)
		}
	}
}
