package screen

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzTerm: any bytes, in any pieces, with resizes between them, never
// panic, keep the cursor on the screen and the cells' marks bounded, give
// the same screen however they are split, and leave valid UTF-8.
func FuzzTerm(f *testing.F) {
	for _, seed := range []string{
		"Working\rDo\n", "\x1b[2J\x1b[H\x1b[1;31mred\x1b[0m\x1b[K", "中文\u0301\x1b[2@\x1b[3P",
		"\x1b[2;4r\x1b[4;1Ha\nb\nc\x1b[L\x1b[M\x1bM", "\x1b[?1049h\x1b[?6h\x1b[6n\x1b[?1049l",
		"\x1b]11;?\x07\x1bP$q\x1b\\", "\x1b(0lqk\x0e\x0f\x1b[4hab\x1b[b", "0123456789abc\x1b[?7l0123456789abc",
	} {
		f.Add([]byte(seed), uint8(5), uint8(10), uint16(7))
	}
	f.Fuzz(func(t *testing.T, in []byte, rows, cols uint8, split uint16) {
		r, c := int(rows%40)+1, int(cols%100)+1
		whole := newTerm(r, c, 5)
		whole.write(in)
		check(t, whole)
		at := int(split) % (len(in) + 1)
		parts := newTerm(r, c, 5)
		parts.write(in[:at])
		// Turned spans moved into place between the writes change
		// nothing either.
		parts.main.settle()
		parts.alt.settle()
		parts.write(in[at:])
		if whole.text() != parts.text() || string(whole.reply) != string(parts.reply) {
			t.Fatalf("split at %d: %q / %q; whole: %q / %q", at, parts.text(), parts.reply, whole.text(), whole.reply)
		}
		// Resizes between writes.
		parts.resize(int(split%30)+1, int(split/30%90)+1)
		check(t, parts)
		parts.write(in)
		check(t, parts)
		parts.resize(r, c)
		check(t, parts)
	})
}

func check(t *testing.T, tm *term) {
	t.Helper()
	if tm.x < 0 || tm.x >= tm.cols || tm.y < 0 || tm.y >= tm.rows || tm.top < 0 || tm.bot > tm.rows || tm.top >= tm.bot {
		t.Fatalf("cursor %d,%d region %d..%d on %dx%d", tm.y, tm.x, tm.top, tm.bot, tm.rows, tm.cols)
	}
	text := tm.text()
	if !utf8.ValidString(text) {
		t.Fatalf("text not UTF-8: %q", text)
	}
	if n := strings.Count(text, "\n") + 1; n > tm.rows {
		t.Fatalf("%d rows of text on %d rows", n, tm.rows)
	}
	for _, g := range []*grid{&tm.main, &tm.alt} {
		for i := range g.lines {
			if l := &g.lines[i]; l.epoch == g.epoch && l.end > 0 && !g.used.has(i) {
				t.Fatalf("line %d holds %q but is not marked used", i, l.c[:l.end])
			}
		}
		for y := range tm.rows {
			l := g.row(y)
			for x := l.end; x < len(l.c); x++ {
				if l.c[x] != 0 {
					t.Fatalf("row %d: cell %d set beyond end %d", y, x, l.end)
				}
			}
			for x, m := range l.marks {
				if n := utf8.RuneCountInString(m); n > maxMarks || n > 0 && (!l.marked || x >= l.end || l.c[x] == 0) {
					t.Fatalf("row %d: %d marks on cell %d (%q), end %d, marked %v", y, n, x, l.c[x], l.end, l.marked)
				}
			}
		}
	}
	_ = tm.sb.last(10)
}
