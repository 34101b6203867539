package proc_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/procvisor/proc"
)

// FuzzHeadTail checks HeadTailBuffer against headTailModel, which keeps
// every byte. The first three arguments pick the head, tail and line sizes
// (1..64); sizes splits content into writes, one byte per write length,
// with whatever content is left over written last.
func FuzzHeadTail(f *testing.F) {
	f.Add(uint8(3), uint8(3), uint8(7), []byte{2, 0, 5, 200}, []byte("abc€defghij\nklmnopé"))
	f.Add(uint8(4), uint8(4), uint8(3), []byte{1, 1, 1}, []byte("😀😀😀 and more 😀\n\n"))
	f.Add(uint8(63), uint8(63), uint8(63), []byte{}, []byte(strings.Repeat("line\n", 40)))
	f.Add(uint8(0), uint8(0), uint8(0), []byte{3}, []byte("\xff\xfe\x80\xe2\x82"))

	f.Fuzz(func(t *testing.T, headN, tailN, lineN uint8, sizes, content []byte) {
		// Buffers here hold at most 128 bytes, so longer inputs find
		// nothing new; capping them keeps every execution (and every
		// minimization) short.
		sizes = sizes[:min(len(sizes), 2<<10)]
		content = content[:min(len(content), 16<<10)]
		m := headTailModel{head: 1 + int(headN)%64, tail: 1 + int(tailN)%64, line: 1 + int(lineN)%64}
		b := proc.NewHeadTailBuffer(m.head, m.tail, m.line)
		for i, w := range headTailSplit(sizes, content) {
			n, err := b.Write(w)
			if n != len(w) || err != nil {
				t.Fatalf("Write(%q) = %d, %v; want %d, nil", w, n, err, len(w))
			}
			m.data = append(m.data, w...)
			// Checking after every write catches states (a growing or
			// wrapping tail) that the end state hides; past the first
			// writes, checking some of them keeps big inputs fast.
			if i < 64 || i%61 == 0 {
				checkHeadTailOutput(t, b, &m)
			}
		}
		checkHeadTailReads(t, b, &m, int(lineN)%5)
		b.Finish()
		checkHeadTailOutput(t, b, &m)
		checkHeadTailReads(t, b, &m, int(lineN)%5)
	})
}

func headTailSplit(sizes, content []byte) [][]byte {
	var writes [][]byte
	for _, s := range sizes {
		n := min(int(s), len(content))
		writes = append(writes, content[:n])
		content = content[n:]
	}
	if len(content) > 0 {
		writes = append(writes, content)
	}
	return writes
}

func checkHeadTailOutput(t *testing.T, b *proc.HeadTailBuffer, m *headTailModel) {
	t.Helper()
	if got := b.Len(); got != int64(len(m.data)) {
		t.Fatalf("Len() = %d; want %d", got, len(m.data))
	}
	got := b.Output()
	wantText, cuts := m.render()
	if got.Text != wantText {
		t.Fatalf("Output() = %q; want %q (model %+v)", got.Text, wantText, *m)
	}
	head, tail := m.retained()
	var want *proc.Truncation
	if omitted := len(m.data) - len(head) - len(tail); omitted > 0 || cuts > 0 {
		want = &proc.Truncation{
			OriginalBytes: int64(len(m.data)),
			RetainedBytes: int64(len(head) + len(tail)),
			OmittedBytes:  int64(omitted),
			LinesCut:      cuts,
			Strategy:      "head_tail",
		}
	}
	if g, w := headTailTruncString(got.Truncation), headTailTruncString(want); g != w {
		t.Fatalf("Output().Truncation = %s; want %s", g, w)
	}
	if utf8.Valid(m.data) && !utf8.ValidString(got.Text) {
		t.Fatalf("Output() = %q: invalid UTF-8 from valid input", got.Text)
	}
}

// checkHeadTailReads reads the whole stream with the given max, then reads
// at every cursor, comparing against the model.
func checkHeadTailReads(t *testing.T, b *proc.HeadTailBuffer, m *headTailModel, limit int) {
	t.Helper()
	head, tail := m.retained()
	end := int64(len(m.data))
	finished := b.Finished()

	var data []byte
	var cursor, accounted int64
	for i := 0; ; i++ {
		if i > len(m.data)+1 {
			t.Fatalf("no end after %d reads with max %d", i, limit)
		}
		c := b.ReadSince(cursor, limit)
		if c.Next != cursor+c.Lost+int64(len(c.Data)) || c.End != end || (limit > 0 && len(c.Data) > limit) {
			t.Fatalf("ReadSince(%d, %d) = %s; Len() = %d", cursor, limit, headTailChunkString(c), end)
		}
		if c.EOF != (finished && c.Next >= end) {
			t.Fatalf("ReadSince(%d, %d) = %s; want EOF == %v", cursor, limit, headTailChunkString(c), finished && c.Next >= end)
		}
		data = append(data, c.Data...)
		accounted += c.Lost + int64(len(c.Data))
		cursor = c.Next
		if c.Next >= c.End {
			break
		}
	}
	if want := append(bytes.Clone(head), tail...); !bytes.Equal(data, want) {
		t.Fatalf("data read with max %d = %q; want head+tail %q", limit, data, want)
	}
	if accounted != end {
		t.Fatalf("sum of Lost+len(Data) with max %d = %d; want Len() = %d", limit, accounted, end)
	}

	// Every cursor up to the tail's start plus a margin, and every cursor
	// in the tail: beyond that, the gap cursors all look alike.
	tailStart := end - int64(len(tail))
	for c := int64(-1); c <= end+1; c++ {
		if c == int64(len(head))+8 && c < tailStart-8 {
			c = tailStart - 8
		}
		wantLost, wantData := m.readSince(c)
		got := b.ReadSince(c, 0)
		want := proc.Chunk{
			Data: wantData,
			Next: max(c, 0) + wantLost + int64(len(wantData)),
			Lost: wantLost,
			End:  end,
		}
		want.EOF = finished && want.Next >= end
		if !bytes.Equal(got.Data, want.Data) || got.Next != want.Next || got.Lost != want.Lost ||
			got.End != want.End || got.EOF != want.EOF {
			t.Fatalf("ReadSince(%d, 0) = %s; want %s", c, headTailChunkString(got), headTailChunkString(want))
		}
	}
}

// headTailModel is the reference HeadTailBuffer: it keeps all data and
// derives everything from it in the most direct way.
type headTailModel struct {
	data             []byte
	head, tail, line int
}

func (m *headTailModel) retained() (head, tail []byte) {
	h := min(len(m.data), m.head)
	n := min(len(m.data)-h, m.tail)
	return m.data[:h], m.data[len(m.data)-n:]
}

func (m *headTailModel) readSince(cursor int64) (lost int64, data []byte) {
	c := int(max(cursor, 0))
	head, tail := m.retained()
	tailStart := len(m.data) - len(tail)
	switch {
	case c >= len(m.data):
		return 0, nil
	case c < len(head) && tailStart == len(head):
		return 0, m.data[c:]
	case c < len(head):
		return 0, m.data[c:len(head)]
	case c < tailStart:
		return int64(tailStart - c), tail
	default:
		return 0, m.data[c:]
	}
}

func (m *headTailModel) render() (text string, cuts int) {
	head, tail := m.retained()
	omitted := len(m.data) - len(head) - len(tail)
	if omitted == 0 {
		return headTailModelCut(string(m.data), m.line)
	}
	for k := 1; k <= 3 && k <= len(head); k++ {
		if headTailModelPartial(head[len(head)-k:]) {
			head = head[:len(head)-k]
			break
		}
	}
	for k := 0; k < 3 && len(tail) > 0 && tail[0]&0xc0 == 0x80; k++ {
		tail = tail[1:]
	}
	h, hc := headTailModelCut(string(head), m.line)
	tl, tc := headTailModelCut(string(tail), m.line)
	return h + fmt.Sprintf("\n... [omitted %d bytes] ...\n", omitted) + tl, hc + tc
}

// headTailModelPartial reports whether p is the start of a valid UTF-8
// character, but not all of it: some completion makes it exactly one valid
// character. Only the first missing byte is constrained beyond being a
// continuation byte, so trying it over 0x80..0xbf and padding with 0x80 is
// exhaustive.
func headTailModelPartial(p []byte) bool {
	for total := len(p) + 1; total <= utf8.UTFMax; total++ {
		for first := byte(0x80); first <= 0xbf; first++ {
			c := append(bytes.Clone(p), first)
			for len(c) < total {
				c = append(c, 0x80)
			}
			if utf8.Valid(c) && utf8.RuneCount(c) == 1 {
				return true
			}
		}
	}
	return false
}

// headTailModelCut cuts each line of s longer than limit bytes at the last
// character boundary that leaves room for the suffix within limit
// (decoding from the line's start), and appends the suffix.
func headTailModelCut(s string, limit int) (string, int) {
	const suffix = " ... [truncated]"
	lines := strings.Split(s, "\n")
	cuts := 0
	room := max(limit-len(suffix), 0)
	for i, line := range lines {
		if len(line) <= limit {
			continue
		}
		keep := 0
		for keep < room {
			_, size := utf8.DecodeRuneInString(line[keep:])
			if keep+size > room {
				break
			}
			keep += size
		}
		lines[i] = line[:keep] + suffix
		cuts++
	}
	return strings.Join(lines, "\n"), cuts
}
