package proc_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/procvisor/proc"
)

// headTailBenchLines returns n bytes of 80-byte lines.
func headTailBenchLines(n int) []byte {
	var buf bytes.Buffer
	for i := 0; buf.Len() < n; i++ {
		fmt.Fprintf(&buf, "%06d the quick brown fox jumps over the lazy dog, again and again and agai\n", i)
	}
	return buf.Bytes()[:n]
}

// headTailBenchLongLines returns n bytes of lines of the given length.
func headTailBenchLongLines(n, length int) []byte {
	line := append(bytes.Repeat([]byte("0123456789abcdef"), length/16), '\n')
	return bytes.Repeat(line, n/len(line)+1)[:n]
}

// BenchmarkHeadTailWrite measures capture throughput into a buffer of the
// default sizes: 64 KiB writes, as a pipe delivers them, and the ring path
// of writes smaller than the tail, which wrap around it.
func BenchmarkHeadTailWrite(b *testing.B) {
	for _, size := range []int{64 << 10, 1000} {
		b.Run(fmt.Sprintf("bytes-%d", size), func(b *testing.B) {
			p := headTailBenchLines(size)
			buf := proc.NewHeadTailBuffer(0, 0, 0)
			b.SetBytes(int64(len(p)))
			b.ReportAllocs()
			for b.Loop() {
				_, _ = buf.Write(p)
			}
		})
	}
}

// BenchmarkHeadTailOutput renders full default buffers.
func BenchmarkHeadTailOutput(b *testing.B) {
	inputs := []struct {
		name string
		data []byte
	}{
		{"lines-80", headTailBenchLines(1 << 20)},
		{"lines-1500", headTailBenchLongLines(1<<20, 1500)},
		{"lines-4800-cut", headTailBenchLongLines(1<<20, 4800)},
	}
	for _, in := range inputs {
		b.Run(in.name, func(b *testing.B) {
			buf := proc.NewHeadTailBuffer(0, 0, 0)
			_, _ = buf.Write(in.data)
			b.ReportAllocs()
			for b.Loop() {
				_ = buf.Output()
			}
		})
	}
}

// BenchmarkHeadTailReadSince reads everything retained by a full default
// buffer, from cursor 0 until the end, with no limit and with 4 KiB reads.
func BenchmarkHeadTailReadSince(b *testing.B) {
	for _, limit := range []int{0, 4096} {
		b.Run(fmt.Sprintf("max-%d", limit), func(b *testing.B) {
			buf := proc.NewHeadTailBuffer(0, 0, 0)
			_, _ = buf.Write(headTailBenchLines(1 << 20))
			b.SetBytes(32 << 10)
			b.ReportAllocs()
			for b.Loop() {
				for cursor := int64(0); ; {
					c := buf.ReadSince(cursor, limit)
					cursor = c.Next
					if cursor >= c.End {
						break
					}
				}
			}
		})
	}
}
