package screen

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// floodSize is how many bytes each flood of BenchmarkFlood writes.
const floodSize = 1 << 20

// floods are what a hostile or broken program may write without end,
// each cut to about floodSize bytes: every one must cost, per byte, a
// bounded multiple of plain text, whatever the size of the screen. The
// first is plain text, lines of 78 characters; "newlines" scrolls the
// whole screen on every byte, the reference for the floods that scroll
// part of it.
func floods(rows, cols int) []struct {
	name string
	data []byte
} {
	repeat := func(prefix, unit string) []byte {
		var b bytes.Buffer
		b.WriteString(prefix)
		for b.Len() < floodSize {
			b.WriteString(unit)
		}
		return b.Bytes()
	}
	var moves bytes.Buffer
	for i := 0; moves.Len() < floodSize; i++ {
		fmt.Fprintf(&moves, "\x1b[%d;%dHx", i*7919%rows+1, i*104729%cols+1)
	}
	var regions bytes.Buffer
	for i := 0; regions.Len() < floodSize; i++ {
		fmt.Fprintf(&regions, "\x1b[%d;%dr\x1b[%dH\n\x1bM", i%2+1, rows-i%2, rows-i%2)
	}
	fullRow := strings.Repeat("x", cols)
	return []struct {
		name string
		data []byte
	}{
		{"plain", repeat("", strings.Repeat("the quick brown fox jumps over the lazy dog ", 2)[:78]+"\r\n")},
		{"marks-one-cell", repeat("e", "\u0301")},
		{"marks-two-kinds", repeat("e", "\u0301\u0302")},
		{"cursor-moves", moves.Bytes()},
		{"newlines", repeat(fmt.Sprintf("\x1b[%dH", rows), "\n")},
		{"region-scroll", repeat(fmt.Sprintf("\x1b[2;%dr\x1b[%dH", rows, rows), "\n")},
		{"region-changes", regions.Bytes()},
		{"alt-toggles", repeat("", "\x1b[?1049h\x1b[?1049l")},
		{"queries", repeat("", "\x1b[6n\x1b[c\x1b[>c\x1b]11;?\x07")},
		{"osc-unterminated", repeat("\x1b]0;", "title ")},
		{"dcs-unterminated", repeat("\x1bP", "data ")},
		{"erase-below", repeat("", "\x1b[H\x1b[J")},
		{"erase-all", repeat("", "\x1b[2J")},
		{"delete-lines", repeat("", "\x1b[2H\x1b[M")},
		{"insert-lines", repeat("", "\x1b[2H\x1b[L")},
		{"scroll-up", repeat("", "\x1b[65535S")},
		{"tabs-cleared", repeat("\x1b[3g", "\r\t")},
		{"repeats", repeat("x", "\x1b[65535b")},
		{"delete-chars", repeat(fullRow+"\r", "\x1b[P")},
		{"insert-mode", repeat(fullRow+"\r\x1b[4h", "y")},
	}
}

// BenchmarkFlood feeds each flood of floods to a new emulator, in pieces
// of 4 KiB as the pump hands them over (taking the replies after each,
// as Screen does), on screens of several shapes, and reports its time
// per byte as a multiple of plain text's on the same screen ("x-plain"),
// fed alternately in the same run. The targets: marks-one-cell at most
// 5 x-plain; every flood a bounded multiple, whatever the size (DESIGN
// section 18).
func BenchmarkFlood(b *testing.B) {
	for _, size := range []struct{ rows, cols int }{{24, 80}, {1000, 1000}, {65535, 15}, {15, 65535}} {
		all := floods(size.rows, size.cols)
		plain := all[0].data
		for _, fl := range all[1:] {
			b.Run(fmt.Sprintf("%dx%d/%s", size.rows, size.cols, fl.name), func(b *testing.B) {
				b.SetBytes(int64(len(fl.data)))
				var spent, plainSpent time.Duration
				for i := range b.N {
					if i%2 == 0 {
						plainSpent += feedTimed(b, size.rows, size.cols, plain)
						spent += feedTimed(b, size.rows, size.cols, fl.data)
					} else {
						spent += feedTimed(b, size.rows, size.cols, fl.data)
						plainSpent += feedTimed(b, size.rows, size.cols, plain)
					}
				}
				perByte := float64(spent) / float64(len(fl.data))
				plainPerByte := float64(plainSpent) / float64(len(plain))
				b.ReportMetric(perByte/plainPerByte, "x-plain")
			})
		}
	}
}

// feedTimed feeds data to a new rows x cols emulator as BenchmarkFlood
// says and returns the time it took, without the emulator's making.
func feedTimed(b *testing.B, rows, cols int, data []byte) time.Duration {
	b.StopTimer()
	t := newTerm(rows, cols, ScrollbackRows)
	b.StartTimer()
	start := time.Now()
	for p := data; len(p) > 0; {
		n := min(len(p), 4096)
		t.write(p[:n])
		t.reply = t.reply[:0]
		p = p[n:]
	}
	return time.Since(start)
}
