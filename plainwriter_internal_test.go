package proc

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// plainTokens are the pieces random inputs are made of: characters of
// each width and invalid bytes, bytes that make or break a C1 control
// character, every movement and erase Plain honours, sequences it drops,
// and halves of each, so that a split or a join lands everywhere.
var plainTokens = []string{
	"a", "b", "c", "é", "日", "\t", "\xff", "\xc2", "\x85", "\x9c", "\xe4\xb8", "\xad",
	"\r", "\b", "\n", "\x00", "\x07", "\x7f",
	"\x1b[K", "\x1b[0K", "\x1b[1K", "\x1b[2K", "\x1b[5K", "\x1b[D", "\x1b[3D", "\x1b[C", "\x1b[2C",
	"\x1b[G", "\x1b[4G", "\x1b[99999G", "\x1b[?25l", "\x1b[1;2H", "\x1b[", "3", ";", "D", "K",
	"\x1b]0;title\x07", "\x1b]8;;x\x1b\\", "\x1b]", "\x1b\\", "\x1b", "\x1b(B", "\x1b(", "\xc2\x9c", "\x1bP",
}

func randomPlainInput(r *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		if r.IntN(8) == 0 {
			b.WriteString(strings.Repeat("x", r.IntN(40)))
		}
		b.WriteString(plainTokens[r.IntN(len(plainTokens))])
	}
	return b.String()
}

// naivePlain is Plain written the obvious way, a cell array per row, on
// Plain's tokens: the reference that plainAppend's rows and cells are
// held to.
func naivePlain(text string, width int) string {
	type cell struct {
		ch    string
		blank bool
	}
	var out []byte
	for li, line := range strings.Split(text, "\n") {
		if li > 0 {
			out = append(out, '\n')
		}
		var cells []cell
		col := 0
		render := func() {
			blanks := 0
			for _, c := range cells {
				if c.blank {
					blanks++
					continue
				}
				if b := c.ch[0]; blanks == 0 && len(c.ch) == 1 && b >= 0x80 && b <= 0x9f && len(out) > 0 && out[len(out)-1] == 0xc2 {
					continue
				}
				out = append(out, strings.Repeat(" ", blanks)...)
				blanks = 0
				out = append(out, c.ch...)
			}
		}
		for i := 0; i < len(line); {
			t := plainScan(line, i, len(line))
			n := max(t.param, 1)
			switch {
			case t.kind == tokText:
				for j := i; j < t.end; {
					_, size := utf8.DecodeRuneInString(line[j:t.end])
					if col == width {
						render()
						out = append(out, '\n')
						cells, col = nil, 0
					}
					if col == len(cells) {
						cells = append(cells, cell{})
					}
					cells[col] = cell{ch: line[j : j+size]}
					col++
					j += size
				}
			case t.kind == tokCR:
				col = 0
			case t.kind == tokBS:
				col = max(col-1, 0)
			case t.kind != tokCSI:
			case t.final == 'D':
				col = max(col-n, 0)
			case t.final == 'C':
				col = min(col+n, len(cells))
			case t.final == 'G':
				col = min(n-1, len(cells))
			case t.final == 'K' && t.param <= 2:
				from, to := 0, len(cells)
				switch t.param {
				case 0:
					from = col
				case 1:
					to = min(col+1, len(cells))
				}
				for x := from; x < to; x++ {
					cells[x].blank = true
				}
			}
			i = t.end
		}
		render()
	}
	return string(out)
}

// TestPlainRows holds Plain, rows, wraps and cells, to the naive model,
// on random inputs and narrow rows (where wraps are many), and Plain
// itself on its own width.
func TestPlainRows(t *testing.T) {
	t.Parallel()
	eachRandomPlainInput(1, 1000, 25, func(in string, _ *rand.Rand) {
		for _, width := range []int{1, 2, 3, 7, 300, plainRowWidth} {
			if got, want := string(appendPlain(nil, in, width)), naivePlain(in, width); got != want {
				t.Fatalf("Plain(%q) in rows of %d = %q; the naive model gives %q", in, width, got, want)
			}
		}
		if got, want := Plain(in), naivePlain(in, plainRowWidth); got != want {
			t.Fatalf("Plain(%q) = %q; the naive model gives %q", in, got, want)
		}
	})
}

// eachRandomPlainInput calls f with n random inputs of up to 60 cells,
// every wideEvery-th one of 400 to 800 instead (wider than the stack's
// cells), drawn from a generator seeded with seed, which f may draw from
// too.
func eachRandomPlainInput(seed uint64, n, wideEvery int, f func(in string, r *rand.Rand)) {
	r := rand.New(rand.NewPCG(seed, 37))
	for i := range n {
		in := randomPlainInput(r, 1+r.IntN(60))
		if i%wideEvery == 0 {
			in = randomPlainInput(r, 400+r.IntN(400))
		}
		f(in, r)
	}
}

// TestPlainWriterSplits: for random inputs cut into random writes, the
// writer writes Plain of the whole, with narrow rows (wraps) and with
// compaction as often as at every byte (so that each state the line
// passes through is encoded, and continued from).
func TestPlainWriterSplits(t *testing.T) {
	t.Parallel()
	eachRandomPlainInput(2, 500, 20, func(in string, r *rand.Rand) {
		for _, width := range []int{1, 7, 300, plainRowWidth} {
			for _, minCompact := range []int{1, 5, plainWriterChunk} {
				want := string(appendPlain(nil, in, width))
				got := plainWriterRun(t, in, width, minCompact, r)
				if got != want {
					t.Fatalf("plain writer (rows of %d, compacting from %d) on %q = %q; want %q", width, minCompact, in, got, want)
				}
			}
		}
	})
}

// plainWriterRun writes in to a plain writer in random pieces, and
// closes it.
func plainWriterRun(t testing.TB, in string, width, minCompact int, r *rand.Rand) string {
	var out bytes.Buffer
	pw := newPlainWriter(&out, width)
	pw.minCompact, pw.compactAt = minCompact, minCompact
	for len(in) > 0 {
		k := min(len(in), 1+r.IntN(8))
		if r.IntN(10) == 0 {
			k = min(len(in), r.IntN(200))
		}
		if n, err := pw.Write([]byte(in[:k])); n != k || err != nil {
			t.Fatalf("Write(%q) = %d, %v", in[:k], n, err)
		}
		in = in[k:]
	}
	if err := pw.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	return out.String()
}

// TestPlainWriterBounded: a line that never ends (a progress bar redrawn
// with \r, escape sequences, a line far wider than a row) keeps the
// writer's memory bounded, and what it writes is still Plain of it.
func TestPlainWriterBounded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		prefix string // then unit n times
		unit   string
		n      int
	}{
		{"progress", "", "\r\x1b[36m━━━━━━━━━━ 50%\x1b[0m", 200_000},
		{"erase-redraw", "", "\x1b[2K\rstep 12345 of 99999", 200_000},
		{"wide", "", "abcdefghé", 200_000},
		{"blank-runs", "", "ab\x1b[D\x1b[K\x1b[C", 200_000},
		{"osc-never-ended", "text\x1b]0;", "a title that goes on ", 200_000},
		{"csi-never-ended", "text\x1b[?", "1234567890;", 400_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			pw := newPlainWriter(&out, plainRowWidth)
			peak := 0
			var all strings.Builder
			all.WriteString(tc.prefix)
			if _, err := pw.Write([]byte(tc.prefix)); err != nil {
				t.Fatal(err)
			}
			for range tc.n / 1000 {
				chunk := strings.Repeat(tc.unit, 1000)
				all.WriteString(chunk)
				if _, err := pw.Write([]byte(chunk)); err != nil {
					t.Fatal(err)
				}
				peak = max(peak, cap(pw.line)+cap(pw.spare)+cap(pw.cells)+cap(pw.out))
			}
			if err := pw.Close(); err != nil {
				t.Fatal(err)
			}
			if got, want := out.String(), Plain(all.String()); got != want {
				t.Errorf("writer output (%d bytes) differs from Plain (%d bytes)", len(got), len(want))
			}
			// The line is compacted once it holds twice its state or a
			// chunk; the state of a row is at most ~9 bytes a column, its
			// cells 12.
			if limit := 4*(9*plainRowWidth+plainWriterChunk) + 12*plainRowWidth; peak > limit {
				t.Errorf("the writer's buffers grew to %d bytes; want at most %d", peak, limit)
			}
		})
	}
}

// TestPlainWriterErrors: a Write after Close is ErrClosed, a second Close
// is a no-op, and w's error is returned by that Write and every later
// one, Close included.
func TestPlainWriterErrors(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	pw := NewPlainWriter(&out)
	if _, err := pw.Write([]byte("a\x1b[31mb\rc")); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Errorf("the unfinished line was written before its end: %q", out.String())
	}
	if err := pw.Close(); err != nil || out.String() != "cb" {
		t.Errorf("Close() = %v, wrote %q; want nil, %q (no newline added)", err, out.String(), "cb")
	}
	if err := pw.Close(); err != nil || out.String() != "cb" {
		t.Errorf("second Close() = %v, wrote %q; want nil and nothing more", err, out.String())
	}
	if n, err := pw.Write([]byte("x\n")); n != 0 || !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close = %d, %v; want 0, ErrClosed", n, err)
	}

	boom := errors.New("disk full")
	fw := NewPlainWriter(failWriter{boom})
	if n, err := fw.Write([]byte("unfinished")); n != 10 || err != nil {
		t.Errorf("Write of an unfinished line = %d, %v; want 10, nil (nothing to write yet)", n, err)
	}
	if n, err := fw.Write([]byte(" line\n")); n != 0 || !errors.Is(err, boom) {
		t.Errorf("Write completing a line to a failing writer = %d, %v; want 0, %v", n, err, boom)
	}
	if n, err := fw.Write([]byte("more\n")); n != 0 || !errors.Is(err, boom) {
		t.Errorf("a later Write = %d, %v; want 0, %v", n, err, boom)
	}
	if err := fw.Close(); !errors.Is(err, boom) {
		t.Errorf("Close after the error = %v; want %v", err, boom)
	}
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }

// FuzzPlainWriter: for any input and any split of it into writes, the
// writer writes Plain of the whole, with rows of the real width and
// narrow ones, compacting at every byte or as it does.
func FuzzPlainWriter(f *testing.F) {
	for _, s := range []string{"50%\r100%\n", "Working\rDo", "a\xc2", "\x1b]8;;x\x1b\\y\n", "é\b\b\bx\x1b[K", "\xe4\xb8\xad\r\x1b[2Cz"} {
		f.Add(s, uint64(1))
	}
	f.Fuzz(func(t *testing.T, in string, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 37))
		for _, width := range []int{3, plainRowWidth} {
			for _, minCompact := range []int{1, plainWriterChunk} {
				if got, want := plainWriterRun(t, in, width, minCompact, r), string(appendPlain(nil, in, width)); got != want {
					t.Fatalf("plain writer (rows of %d, compacting from %d) on %q = %q; want %q", width, minCompact, in, got, want)
				}
			}
		}
		if got, want := string(appendPlain(nil, in, 3)), naivePlain(in, 3); got != want {
			t.Fatalf("Plain(%q) in rows of 3 = %q; the naive model gives %q", in, got, want)
		}
	})
}
