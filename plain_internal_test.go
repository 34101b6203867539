package proc

import "testing"

// TestPlainWideCells runs the 64-bit cells, which only a text of 4 GiB or
// more uses, against the 32-bit ones.
func TestPlainWideCells(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"Working\rDo",
		"abcdef\x1b[3D\x1b[1K",
		"abc\x1b[2D\x1b[K\x1b[2Cx",
		"abcdef\x1b[2Kxy",
		"日本語\rab\xff",
	} {
		var got [2]string
		for i, wide := range []bool{false, true} {
			buf := make([]byte, len(in))
			_, _, n, pre, suf := plainRow(in, 0, len(in), plainRowWidth, true)
			size := 4
			if wide {
				size = 8
			}
			cells := newPlainCells(make([]byte, 24*n), size, n, pre, suf)
			got[i] = string(buf[:plainEditLine(buf, 0, in, 0, len(in), cells)])
		}
		if got[0] != got[1] || got[0] != Plain(in) {
			t.Errorf("plainEditLine(%q) = %q with 32-bit cells, %q with 64-bit ones; Plain: %q", in, got[0], got[1], Plain(in))
		}
	}
}

// TestRenderRecordsMarker pins the renderer's record of where it put the
// omission marker, which Output.Plain reads instead of searching.
func TestRenderRecordsMarker(t *testing.T) {
	t.Parallel()
	b := NewHeadTailBuffer(8, 8, 0)
	_, _ = b.Write([]byte("head...\n... [omitted 1 bytes] ...\nmiddle\x1b[31m\rtail end\n"))
	out := b.Output()
	const marker = "\n... [omitted 39 bytes] ...\n"
	if got := out.Text[out.marker[0]:out.marker[1]]; got != marker || out.marker[0] != 8 {
		t.Errorf("Output() = %q with marker at %v (%q); want %q at 8", out.Text, out.marker, got, marker)
	}
	whole := NewHeadTailBuffer(64, 64, 0)
	_, _ = whole.Write([]byte("short\n"))
	if out := whole.Output(); out.marker != [2]int{} {
		t.Errorf("Output() of a buffer that omitted nothing has a marker at %v", out.marker)
	}
}
