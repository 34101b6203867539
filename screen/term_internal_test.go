package screen

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// feed returns a 5x10 emulator that was written in.
func feed(in ...string) *term {
	t := newTerm(5, 10, 3)
	for _, s := range in {
		t.write([]byte(s))
	}
	return t
}

func TestTermText(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
	}{
		{"plain", "ab\r\ncd", "ab\ncd"},
		{"overwrite-in-place", "Working\rDo", "Dorking"},
		{"progress", "50%\r100%", "100%"},
		{"lf-keeps-column", "ab\ncd", "ab\n  cd"},
		{"backspace", "abc\b\bX", "aXc"},
		{"erase-line-right", "abcdef\r\x1b[2C\x1b[K", "ab"},
		{"erase-line-left", "abcdef\x1b[3D\x1b[1K", "    ef"},
		{"erase-line-all", "abc\x1b[2K", ""},
		{"cursor-position", "\x1b[3;4Hx", "\n\n   x"},
		{"cursor-up-redraw", "one\r\ntwo\r\n\x1b[2AONE\r\nTWO", "ONE\nTWO"},
		{"erase-display-below", "a\r\nb\r\nc\x1b[2;1H\x1b[J", "a"},
		{"erase-display-above", "a\r\nb\r\nc\x1b[2;1H\x1b[1J", "\n\nc"},
		{"erase-display-all", "a\r\nb\x1b[2J", ""},
		{"autowrap", "0123456789ab", "0123456789\nab"},
		{"pending-wrap-then-cr", "0123456789\rX", "X123456789"},
		{"no-autowrap", "\x1b[?7l0123456789ab", "012345678b"},
		{"tab", "a\tb", "a       b"},
		{"tab-to-last-column", "a\t\tb", "a        b"},
		{"tabs-cleared", "\x1b[3ga\tb", "a        b"},
		{"tab-stop-set", "\x1b[3g\x1b[4G\x1bH\ra\tb\x1b[2Ic", "a  b     c"},
		{"cht-cbt", "\x1b[2Ia\x1b[Zb\x1b[9Zc", "c       ba"},
		{"colours-dropped", "\x1b[1;31mred\x1b[0m ok", "red ok"},
		{"osc-title-skipped", "\x1b]0;title\x07a\x1b]2;t\x1b\\b", "ab"},
		{"dcs-skipped", "\x1bP1$r0m\x1b\\x", "x"},
		{"utf8", "héllo", "héllo"},
		{"utf8-split-bytes", "h\xc3", "h"},
		{"wide", "中文x", "中文x"},
		{"wide-overwritten-half", "中\r \x08\x1b[C\x1b[Cx", "  x"},
		{"wide-at-edge-wraps", "012345678中", "012345678\n中"},
		{"combining", "e\u0301x", "e\u0301x"},
		{"insert-chars", "abc\r\x1b[2@", "  abc"},
		{"delete-chars", "abcdef\r\x1b[2P", "cdef"},
		{"erase-chars", "abcdef\r\x1b[2X", "  cdef"},
		{"insert-mode", "abc\r\x1b[4hX\x1b[4l", "Xabc"},
		{"insert-line", "a\r\nb\x1b[1;1H\x1b[L", "\na\nb"},
		{"delete-line", "a\r\nb\r\nc\x1b[1;1H\x1b[M", "b\nc"},
		{"reverse-index-at-top", "a\x1b[H\x1bMz", "z\na"},
		{"dec-graphics", "\x1b(0lqk\x1b(Bq", "┌─┐q"},
		{"repeat", "x\x1b[3b", "xxxx"},
		{"repeat-cut-at-a-row", "x\x1b[65535b", "xxxxxxxxxx\nx"},
		{"repeat-line-drawing", "\x1b(0q\x1b[2b", "───"},
		{"save-restore", "ab\x1b7\r\ncd\x1b8X", "abX\ncd"},
		{"invalid-utf8", "a\xffb", "a\ufffdb"},
		{"csi-split", "ab\x1b[", "ab"},
		{"can-aborts", "\x1b[2\x18Jx", "Jx"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := feed(c.in).text(); got != c.want {
				t.Errorf("write(%q): text = %q; want %q", c.in, got, c.want)
			}
		})
	}
}

func TestTermSplitWrites(t *testing.T) {
	t.Parallel()
	in := "\x1b[1;31mhé中\x1b]0;t\x1b\\llo\x1b[2;3Hx\x1b[6n"
	whole := feed(in)
	for i := 1; i < len(in); i++ {
		split := feed(in[:i], in[i:])
		if split.text() != whole.text() || string(split.reply) != string(whole.reply) {
			t.Errorf("split at %d: text %q reply %q; whole: %q %q", i, split.text(), split.reply, whole.text(), whole.reply)
		}
	}
}

func TestTermScroll(t *testing.T) {
	t.Parallel()
	tm := newTerm(3, 10, 4)
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(writerFunc(tm.write), "%d\r\n", i)
	}
	if got, want := tm.text(), "8\n9"; got != want {
		t.Errorf("text = %q; want %q", got, want)
	}
	if got, want := strings.Join(tm.sb.last(10), ","), "4,5,6,7"; got != want {
		t.Errorf("scrollback = %q; want %q (oldest first, bounded at 4)", got, want)
	}
	if got, want := strings.Join(tm.sb.last(2), ","), "6,7"; got != want {
		t.Errorf("scrollback(2) = %q; want %q", got, want)
	}
	if got := tm.sb.last(0); got != nil {
		t.Errorf("scrollback(0) = %q; want nil", got)
	}
}

func TestTermScrollRegion(t *testing.T) {
	t.Parallel()
	// A status line at the bottom stays while the region above scrolls,
	// and lines leaving a region below the top are not scrollback.
	tm := feed("\x1b[5;1Hstatus\x1b[1;4r\x1b[4;1H", "a\r\nb\r\nc\r\nd\r\ne")
	if got, want := tm.text(), "b\nc\nd\ne\nstatus"; got != want {
		t.Errorf("text = %q; want %q", got, want)
	}
	if got, want := strings.Join(tm.sb.last(9), ","), ",,a"; got != want {
		t.Errorf("scrollback = %q; want %q", got, want)
	}
	tm = feed("x\x1b[2;4r\x1b[4;1H", "a\r\nb\r\nc\r\nd")
	if got := tm.sb.last(9); len(got) != 0 {
		t.Errorf("scrollback = %q; want none from a region below the top", got)
	}
}

func TestTermAltScreen(t *testing.T) {
	t.Parallel()
	tm := feed("shell$ ", "\x1b[?1049h\x1b[H\x1b[2Jfull")
	if tm.g != &tm.alt || tm.text() != "full" {
		t.Fatalf("on the alternate screen: alt %v text %q", tm.g == &tm.alt, tm.text())
	}
	tm.write([]byte("\x1b[?1049l"))
	if tm.g != &tm.main || tm.text() != "shell$" {
		t.Fatalf("left: alt %v text %q", tm.g == &tm.alt, tm.text())
	}
	if tm.y != 0 || tm.x != 7 {
		t.Errorf("cursor after leaving = %d,%d; want 0,7 (restored)", tm.y, tm.x)
	}
}

func TestTermReplies(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"ab\r\nc\x1b[6n", "\x1b[2;2R"},
		{"\x1b[?6n", "\x1b[?1;1R"},
		{"\x1b[c", "\x1b[?62;22c"},
		{"\x1b[0c", "\x1b[?62;22c"},
		{"\x1b[>c", "\x1b[>1;10;0c"},
		{"\x1b[5n", "\x1b[0n"},
		{"\x1b[18t", "\x1b[8;5;10t"},
		{"\x1b[?2004$p", "\x1b[?2004;2$y"},
		{"\x1b[?2004h\x1b[?2004$p", "\x1b[?2004;1$y"},
		{"\x1b[?7$p", "\x1b[?7;1$y"},
		{"\x1b[?9999$p", "\x1b[?9999;0$y"},
		{"\x1b]11;?\x07", "\x1b]11;rgb:0000/0000/0000\x07"},
		{"\x1b]10;?\x1b\\", "\x1b]10;rgb:ffff/ffff/ffff\x1b\\"},
		{"\x1b[3;5r\x1b[?6h\x1b[2;1H\x1b[6n", "\x1b[2;1R"},
		{"0123456789\x1b[6n", "\x1b[1;10R"},
	}
	for _, c := range cases {
		if got := string(feed(c.in).reply); got != c.want {
			t.Errorf("write(%q): reply %q; want %q", c.in, got, c.want)
		}
	}
}

func TestTermResize(t *testing.T) {
	t.Parallel()
	// The cursor on the last row: shrinking pushes the top rows into the
	// scrollback and keeps the cursor's row.
	tm := feed("a\r\nb\r\nc\r\nd\r\ne")
	tm.resize(2, 10)
	if got, want := tm.text(), "d\ne"; got != want {
		t.Errorf("text = %q; want %q", got, want)
	}
	if got, want := strings.Join(tm.sb.last(9), ","), "a,b,c"; got != want {
		t.Errorf("scrollback = %q; want %q", got, want)
	}
	if tm.y != 1 || tm.x != 1 {
		t.Errorf("cursor = %d,%d; want 1,1", tm.y, tm.x)
	}
	tm.write([]byte("X"))
	if got, want := tm.text(), "d\neX"; got != want {
		t.Errorf("after writing: text = %q; want %q", got, want)
	}
	// The cursor at the top: blank rows below it go first.
	tm = feed("top")
	tm.resize(2, 2)
	if got, want := tm.text(), "to"; got != want || tm.sb.len() != 0 {
		t.Errorf("text = %q, scrollback %q; want %q and none", got, tm.sb.last(9), want)
	}
	// Growing adds blank rows and columns.
	tm.resize(4, 20)
	tm.write([]byte("\x1b[4;15Hz"))
	if got, want := tm.text(), "to\n\n\n              z"; got != want {
		t.Errorf("grown: text = %q; want %q", got, want)
	}
}

type writerFunc func([]byte)

func (f writerFunc) Write(b []byte) (int, error) { f(b); return len(b), nil }

// TestMarksBounded: a cell keeps at most maxMarks combining marks, of any
// length in UTF-8, and drops the rest; 1 MB of U+0301 on one cell leaves
// one cell with 16.
func TestMarksBounded(t *testing.T) {
	t.Parallel()
	for _, mark := range []string{"\u0301", "\u20d0", "\U000e0100", "\u0301\u20d0\U000e0100"} {
		tm := newTerm(5, 10, 3)
		tm.write([]byte("e"))
		for range 40 {
			tm.write([]byte(mark))
		}
		want := "e" + strings.Repeat(mark, 40)
		want = string([]rune(want)[:1+maxMarks])
		if got := tm.text(); got != want {
			t.Errorf("e and 40 times %q: text %q; want %q (16 marks)", mark, got, want)
		}
	}
	tm := newTerm(5, 10, 3)
	tm.write([]byte("e"))
	chunk := []byte(strings.Repeat("\u0301", 2048))
	for written := 0; written < 1<<20; written += len(chunk) {
		tm.write(chunk)
	}
	l := tm.g.row(0)
	if got, want := l.marks[0], strings.Repeat("\u0301", maxMarks); got != want || l.end != 1 || tm.x != 1 {
		t.Errorf("after 1 MB of U+0301: marks %q (%d bytes), end %d, cursor %d; want %d marks, end 1, cursor 1", got, len(got), l.end, tm.x, maxMarks)
	}
	// The cell's mark count is kept through scrolling into the scrollback.
	tm.write([]byte("\r\n\r\n\r\n\r\n\r\n"))
	if got := tm.sb.last(1); len(got) != 1 || got[0] != "e"+strings.Repeat("\u0301", maxMarks) {
		t.Errorf("scrollback = %q; want the row with 16 marks", got)
	}
}

// TestScrollbackBoundedInCells: on the widest screen, the scrollback keeps
// fewer than ScrollbackRows rows, and at most maxScrollbackCells cells.
func TestScrollbackBoundedInCells(t *testing.T) {
	t.Parallel()
	tm := newTerm(15, 65535, ScrollbackRows)
	row := []byte(strings.Repeat("x", 65535) + "\r\n")
	for range 50 { // 36 rows scroll off, more than the 30 that fit
		tm.write(row)
	}
	if tm.sb.cells > maxScrollbackCells {
		t.Errorf("scrollback holds %d cells; want at most %d", tm.sb.cells, maxScrollbackCells)
	}
	held := 0
	for i := range tm.sb.rows {
		held += cap(tm.sb.rows[i].c)
	}
	if held > maxScrollbackCells {
		t.Errorf("scrollback rows have room for %d cells; want at most %d", held, maxScrollbackCells)
	}
	if n := tm.sb.len(); n != maxScrollbackCells/65536 {
		t.Errorf("scrollback keeps %d rows of 65535 cells; want %d", n, maxScrollbackCells/65536)
	}
	if got := tm.sb.last(1); len(got) != 1 || got[0] != strings.Repeat("x", 65535) {
		t.Errorf("newest scrollback row is not the last full row")
	}
	// On an ordinary screen every row up to ScrollbackRows is kept.
	tm = newTerm(24, 1000, ScrollbackRows)
	row = []byte(strings.Repeat("y", 1000) + "\r\n")
	for range ScrollbackRows + 30 {
		tm.write(row)
	}
	if n := tm.sb.len(); n != ScrollbackRows {
		t.Errorf("scrollback of a 1000-column screen keeps %d rows; want %d", n, ScrollbackRows)
	}
}

// TestUnterminatedStrings: 100 MB (a tenth under the race detector) of an
// OSC or DCS string that never ends, written in pieces as the pump hands them over, keeps at most
// maxStr bytes of it, allocates nothing per piece, and is not acted on
// once it ends; what follows is text again.
func TestUnterminatedStrings(t *testing.T) {
	for _, kind := range []string{"\x1b]11;?", "\x1bP$q"} {
		tm := newTerm(5, 10, 3)
		tm.write([]byte("a" + kind))
		piece := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
		total := 100 << 20
		if raceEnabled {
			total /= 10
		}
		allocs := testing.AllocsPerRun(1, func() {
			for written := 0; written < total; written += len(piece) {
				tm.write(piece)
			}
		})
		if allocs > 10 {
			t.Errorf("%q: %v allocations for 100 MB; want none per piece", kind, allocs)
		}
		if len(tm.str) > maxStr || cap(tm.str) > 2*maxStr || !tm.strLong || tm.state != sStr {
			t.Errorf("%q: after 100 MB: kept %d bytes (capacity %d), long %v, state %d; want at most %d, long, in the string", kind, len(tm.str), cap(tm.str), tm.strLong, tm.state, maxStr)
		}
		tm.write([]byte("\x1b\\b"))
		if got := tm.text(); got != "ab" || len(tm.reply) != 0 {
			t.Errorf("%q: after the terminator: text %q, reply %q; want %q and none", kind, got, tm.reply, "ab")
		}
	}
}

// TestMillionAltToggles: a million switches (a tenth under the race
// detector) to the alternate screen and
// back (each clearing it) leave the main screen as it was, and nothing
// grows.
func TestMillionAltToggles(t *testing.T) {
	t.Parallel()
	tm := newTerm(24, 80, 3)
	tm.write([]byte("shell$ "))
	toggle := bytes.Repeat([]byte("\x1b[?1049h\x1b[2;3Hx\x1b[?1049l"), 1000)
	rounds := 1000
	if raceEnabled {
		rounds /= 10
	}
	for range rounds {
		tm.write(toggle)
	}
	if tm.g != &tm.main || tm.text() != "shell$" || tm.y != 0 || tm.x != 7 {
		t.Errorf("after a million toggles: alt %v, text %q, cursor %d,%d; want main, %q, 0,7", tm.g == &tm.alt, tm.text(), tm.y, tm.x, "shell$")
	}
	if len(tm.modes) > len(decModeDefaults) || len(tm.reply) != 0 || tm.sb.len() != 0 {
		t.Errorf("after a million toggles: %d modes kept, %d bytes of replies, %d scrollback rows; want at most %d, none, none", len(tm.modes), len(tm.reply), tm.sb.len(), len(decModeDefaults))
	}
	tm.write([]byte("\x1b[?1049h"))
	if got := tm.text(); got != "" {
		t.Errorf("the alternate screen after a million toggles: %q; want it clear", got)
	}
}

// TestLongSequences: control sequences of any length keep a bounded
// state: parameters beyond maxParams and digits beyond maxParam are
// dropped.
func TestLongSequences(t *testing.T) {
	t.Parallel()
	tm := newTerm(5, 10, 3)
	long := "\x1b[" + strings.Repeat("9", 1<<18) + ";" + strings.Repeat("1;", 1<<18) + "H"
	tm.write([]byte(long))
	if tm.nparams > maxParams || tm.params[0] != maxParam || tm.y != 4 || tm.x != 0 {
		t.Errorf("after a 768 KB CUP: %d params, first %d, cursor %d,%d; want at most %d, %d, 4,0", tm.nparams, tm.params[0], tm.y, tm.x, maxParams, maxParam)
	}
	tm.write([]byte("\x1b" + strings.Repeat(" ", 1<<18) + "(0q"))
	if got := tm.text(); got != "\n\n\n\n─" {
		t.Errorf("after an escape with 256 KB of intermediates: text %q; want the line-drawing q", got)
	}
}

// TestTurnedSpans: scrolling regions and the rows below the cursor, in
// any order, shows the same screen as moving every row into place after
// each step (settle, the plain rotation).
func TestTurnedSpans(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		rows := 2 + rng.IntN(30)
		a, b := newTerm(rows, 8, 50), newTerm(rows, 8, 50)
		var steps []string
		for i := range 60 {
			var step string
			switch rng.IntN(7) {
			case 0:
				top := 1 + rng.IntN(rows)
				step = fmt.Sprintf("\x1b[%d;%dr", top, top+rng.IntN(rows-top+1))
			case 1:
				step = fmt.Sprintf("\x1b[%dH%s", 1+rng.IntN(rows), strings.Repeat("\n", 1+rng.IntN(rows)))
			case 2:
				step = fmt.Sprintf("\x1b[%dH%s", 1+rng.IntN(rows), strings.Repeat("\x1bM", 1+rng.IntN(rows)))
			case 3:
				step = fmt.Sprintf("\x1b[%dH\x1b[%dL", 1+rng.IntN(rows), 1+rng.IntN(rows))
			case 4:
				step = fmt.Sprintf("\x1b[%dH\x1b[%dM", 1+rng.IntN(rows), 1+rng.IntN(rows))
			case 5:
				step = fmt.Sprintf("\x1b[%d%c", 1+rng.IntN(rows), "ST"[rng.IntN(2)])
			default:
				step = fmt.Sprintf("\x1b[%dH%d", 1+rng.IntN(rows), round*100+i)
			}
			steps = append(steps, step)
			a.write([]byte(step))
			b.write([]byte(step))
			b.main.settle()
			if a.text() != b.text() || strings.Join(a.sb.last(50), "|") != strings.Join(b.sb.last(50), "|") {
				t.Fatalf("%d rows, after %q:\nturned:  %q\nsettled: %q", rows, steps, a.text(), b.text())
			}
		}
	}
}

// TestScrollbackRuns: rows scrolled off, blank or not, one at a time or
// many at once, give the scrollback the rows as they were shown, the
// newest limit of them, however blank rows are kept.
func TestScrollbackRuns(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100 {
		rows, limit := 1+rng.IntN(12), 1+rng.IntN(9)
		tm := newTerm(rows, 6, limit)
		var want []string
		for i := range 80 {
			var step string
			scrolled := 0
			switch rng.IntN(5) {
			case 0:
				step = fmt.Sprintf("\x1b[%dH%d", 1+rng.IntN(rows), i)
			case 1:
				step = fmt.Sprintf("\x1b[%dH\x1b[K", 1+rng.IntN(rows))
			case 2:
				scrolled = 1 + rng.IntN(2*rows+limit)
				step = fmt.Sprintf("\x1b[%dS", scrolled)
			case 3:
				step = fmt.Sprintf("\x1b[%dH\n", rows)
				scrolled = 1
			default:
				step = "\x1b[2J"
			}
			for y := range min(scrolled, rows) { // SU scrolls the screen's height at most
				want = append(want, tm.rowText(y))
			}
			want = want[max(len(want)-limit, 0):]
			tm.write([]byte(step))
			if got := tm.sb.last(limit + 1); strings.Join(got, "|") != strings.Join(want, "|") || tm.sb.len() != len(want) {
				t.Fatalf("%d rows, limit %d, after %q: scrollback %q (len %d); want %q", rows, limit, step, got, tm.sb.len(), want)
			}
		}
	}
}

// TestRepeatAsPrinted: REP draws what printing the character again would,
// wrapping, with or without autowrap, over wide characters and marks, up
// to a row's width.
func TestRepeatAsPrinted(t *testing.T) {
	t.Parallel()
	for _, before := range []string{"", "中文中文中", "中文中文中\r", "e\u0301\u0301abc", "a\u0301b\u0301c\u0301d\u0301\r", "\x1b[?7l", "\x1b[3G", "\x1b[9G", "\x1b[10G", "0123456789\x1b[2;2H中"} {
		for n := range 14 {
			rep := feed(before, "x", fmt.Sprintf("\x1b[%db", n), "yz")
			printed := feed(before, "x", strings.Repeat("x", min(max(n, 1), 10)), "yz")
			if rep.text() != printed.text() || rep.x != printed.x || rep.y != printed.y || rep.wrapPending != printed.wrapPending {
				t.Errorf("%q then x and REP %d: text %q cursor %d,%d; printed: %q cursor %d,%d", before, n, rep.text(), rep.y, rep.x, printed.text(), printed.y, printed.x)
			}
		}
	}
}

// TestBitsetNext: next, prev, nth and nthBack find the members from any
// point, across words and summary words.
func TestBitsetNext(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 63, 64, 65, 4095, 4096, 4097, 65535} {
		for range 20 {
			b := newBitset(n)
			member := make([]bool, n)
			for range rng.IntN(8) {
				i := rng.IntN(n)
				b.set(i)
				member[i] = true
				if rng.IntN(3) == 0 {
					b.unset(i)
					member[i] = false
				}
			}
			want := -1
			for i := n - 1; i >= 0; i-- {
				if member[i] {
					want = i
				}
				if got := b.next(i); got != want {
					t.Fatalf("n %d: next(%d) = %d; want %d", n, i, got, want)
				}
			}
			if got := b.next(n); got != -1 {
				t.Fatalf("n %d: next(n) = %d; want -1", n, got)
			}
			var members []int
			for i, m := range member {
				if m {
					members = append(members, i)
				}
			}
			for _, i := range []int{0, n / 3, n / 2, n - 1, rng.IntN(n)} {
				var after, before []int
				for _, m := range members {
					if m >= i {
						after = append(after, m)
					} else if m < i {
						before = append([]int{m}, before...)
					}
				}
				if b.has(i) {
					before = append([]int{i}, before...)
				}
				for k := 1; k <= 3; k++ {
					want, wantBack := -1, -1
					if k <= len(after) {
						want = after[k-1]
					}
					if k <= len(before) {
						wantBack = before[k-1]
					}
					if got := b.nth(i, k); got != want {
						t.Fatalf("n %d: nth(%d, %d) = %d; want %d", n, i, k, got, want)
					}
					if got := b.nthBack(i, k); got != wantBack {
						t.Fatalf("n %d: nthBack(%d, %d) = %d; want %d", n, i, k, got, wantBack)
					}
					if k == 1 {
						if got := b.prev(i); got != wantBack {
							t.Fatalf("n %d: prev(%d) = %d; want %d", n, i, got, wantBack)
						}
					}
				}
			}
		}
	}
}
