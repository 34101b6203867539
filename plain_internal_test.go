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
			cells := plainCells{b: make([]byte, 24*len(in)), wide: wide}
			got[i] = string(buf[:plainEditLine(buf, 0, in, 0, len(in), cells)])
		}
		if got[0] != got[1] || got[0] != Plain(in) {
			t.Errorf("plainEditLine(%q) = %q with 32-bit cells, %q with 64-bit ones; Plain: %q", in, got[0], got[1], Plain(in))
		}
	}
}
