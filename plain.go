package proc

import (
	"encoding/binary"
	"math"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Plain returns text as a terminal would leave it, line by line: escape
// sequences removed (CSI; OSC, DCS, SOS, PM, APC strings, ended by BEL, ST
// or — unlike a terminal, so that one stray ESC ] cannot hide the rest of
// a log — a newline; ESC, intermediates 0x20-0x2F, final byte, as in
// ESC ( B); a carriage return moves back to the line's start and later
// characters overwrite (so "50%\r100%" is "100%", "Working\rDo" is
// "Dorking"); backspace, cursor back (CSI n D) and cursor to column
// (CSI n G) move within the line, cursor forward (CSI n C) only over text
// already there; erase-in-line (CSI 0/1/2 K) honoured; other control
// characters but \n and \t dropped.
//
// Plain is line-local: a newline ends any sequence in progress, and
// cursor movement across lines (CSI A, CSI H, ...) is dropped without
// effect (that is the business of a terminal screen). Every character —
// a tab, a wide character, a combining mark, an invalid byte — counts as
// one column. Cells an erase blanked read as spaces where text follows
// them on the line and are left out at its end. Valid UTF-8 stays valid;
// invalid bytes are kept as they are, except a stray byte that would join
// the byte before it into a C1 control character, which is dropped (so
// that Plain(Plain(s)) == Plain(s)). C1 control characters (U+0080 to
// U+009F) are dropped like the others.
//
// The result is never longer than text. Plain runs in time linear in
// len(text) and makes one allocation, which the result keeps: a line that
// is overwritten and wider than 256 columns may make it larger than text
// (by up to 12 bytes per column of such a line).
func Plain(text string) string {
	if text == "" {
		return ""
	}
	buf := make([]byte, plainNeed(0, text))
	n := plainAppend(buf, 0, text)
	if n == 0 {
		return ""
	}
	return unsafe.String(&buf[0], n)
}

// A line that an overwrite or an erase changes is edited as an array of
// cells, one per column. A cell is three offsets into the text (32 bits
// each, 64 for a text of 4 GiB or more): src, the
// first byte of the character it holds (which is also when it was
// written), and pre and suf, when an erase-in-line to the left (CSI 1 K)
// or to the right (CSI 0 K) was made with the cursor on this cell (0:
// never). A cell is blank if an erase covering it came after its
// character: every operation is O(1), and the line is rendered once, in
// two sweeps, when it ends. Without the markers an erase would blank each
// cell it covers, and a line erased over and over would cost its width
// each time.
const (
	// plainStackCells cells are kept on the stack; a wider edited line
	// uses the end of the result's allocation, which plainNeed sizes.
	plainStackCells = 256
	// plainMaxParam caps a CSI parameter (no line is that wide).
	plainMaxParam = 1 << 30
)

type plainCells struct {
	b    []byte
	wide bool // 64-bit fields
}

// plainCellSize is the size of a cell for a text of n bytes.
func plainCellSize(n int) int {
	if uint64(n) > math.MaxUint32 {
		return 24
	}
	return 12
}

func (c plainCells) get(i, field int) int {
	if c.wide {
		return int(binary.NativeEndian.Uint64(c.b[(3*i+field)*8:]))
	}
	return int(binary.NativeEndian.Uint32(c.b[(3*i+field)*4:]))
}

func (c plainCells) set(i, field, v int) {
	if c.wide {
		binary.NativeEndian.PutUint64(c.b[(3*i+field)*8:], uint64(v))
	} else {
		binary.NativeEndian.PutUint32(c.b[(3*i+field)*4:], uint32(v))
	}
}

const (
	cellSrc = iota
	cellPre
	cellSuf
)

// plainToken kinds.
const (
	tokText = iota // text[i:end] is printable: characters, invalid bytes, tabs
	tokCR          // carriage return
	tokBS          // backspace
	tokCSI         // a CSI sequence without private markers or intermediates
	tokNone        // anything dropped without effect
)

type plainToken struct {
	kind  uint8
	final byte // of a CSI
	param int  // the first parameter of a CSI, 0 if none
	end   int
}

// isC1 reports whether text[i:] starts with a C1 control character
// (U+0080 to U+009F, encoded as 0xC2 0x80-0x9F).
func isC1(text string, i, e int) bool {
	return text[i] == 0xc2 && i+1 < e && text[i+1] >= 0x80 && text[i+1] <= 0x9f
}

// plainScan returns the token at text[i], i < e, where e is the end of the
// line (a newline or the end of text): no token reaches past it.
func plainScan(text string, i, e int) plainToken {
	c := text[i]
	switch {
	case c == '\r':
		return plainToken{kind: tokCR, end: i + 1}
	case c == '\b':
		return plainToken{kind: tokBS, end: i + 1}
	case c == 0x1b:
		return plainEscape(text, i, e)
	case c < 0x20 && c != '\t' || c == 0x7f:
		return plainToken{kind: tokNone, end: i + 1}
	case isC1(text, i, e):
		return plainToken{kind: tokNone, end: i + 2}
	}
	j := i + 1
	for j < e {
		c := text[j]
		if c < 0x20 && c != '\t' || c == 0x7f || isC1(text, j, e) {
			break
		}
		j++
	}
	return plainToken{kind: tokText, end: j}
}

// plainEscape returns the escape sequence at text[i] == ESC. A byte that
// cannot continue the sequence ends it and is read again as what it is.
func plainEscape(text string, i, e int) plainToken {
	none := func(end int) plainToken { return plainToken{kind: tokNone, end: end} }
	if i+1 >= e {
		return none(e)
	}
	switch text[i+1] {
	case '[':
		t := plainToken{kind: tokCSI}
		private, first := false, true
		for j := i + 2; j < e; j++ {
			b := text[j]
			switch {
			case b >= '0' && b <= '9':
				if first {
					t.param = min(t.param*10+int(b-'0'), plainMaxParam)
				}
			case b == ';' || b == ':':
				first = false
			case b >= 0x20 && b <= 0x3f: // private markers < = > ?, intermediates
				private = true
			case b >= 0x40 && b <= 0x7e:
				if private {
					return none(j + 1)
				}
				t.final, t.end = b, j+1
				return t
			default:
				return none(j)
			}
		}
		return none(e)
	case ']', 'P', 'X', '^', '_': // OSC, DCS, SOS, PM, APC
		for j := i + 2; j < e; j++ {
			switch b := text[j]; {
			case b == 0x07:
				return none(j + 1)
			case b == 0x1b:
				if j+1 < e && text[j+1] == '\\' {
					return none(j + 2)
				}
				return none(j)
			case b == 0xc2 && j+1 < e && text[j+1] == 0x9c: // ST as a character
				return none(j + 2)
			}
		}
		return none(e)
	}
	j := i + 1
	for j < e && text[j] >= 0x20 && text[j] <= 0x2f {
		j++
	}
	if j < e && text[j] >= 0x30 && text[j] <= 0x7e {
		return none(j + 1)
	}
	return none(j)
}

// plainCursor is the column model of a line: the cursor and the number of
// cells (written or blanked) the line holds. col <= ext always: nothing
// moves the cursor past the line's end.
type plainCursor struct{ col, ext int }

// move applies a cursor movement. For an erase-in-line it returns its
// mode (0, 1 or 2), else -1.
func (c *plainCursor) move(t plainToken) int {
	n := max(t.param, 1)
	switch {
	case t.kind == tokCR:
		c.col = 0
	case t.kind == tokBS:
		c.col = max(c.col-1, 0)
	case t.kind != tokCSI:
	case t.final == 'D':
		c.col = max(c.col-n, 0)
	case t.final == 'C':
		c.col = min(c.col+n, c.ext)
	case t.final == 'G':
		c.col = min(n-1, c.ext)
	case t.final == 'K' && t.param <= 2:
		return t.param
	}
	return -1
}

// erases reports whether an erase-in-line of mode k changes the line.
func (c *plainCursor) erases(k int) bool {
	if k == 0 {
		return c.col < c.ext
	}
	return c.ext > 0
}

// plainLineEnd returns the end of the line starting at s (the index of its
// newline, or len(text)) and whether the line holds a byte that is not
// simply copied.
func plainLineEnd(text string, s int) (e int, special bool) {
	e = len(text)
	if k := strings.IndexByte(text[s:], '\n'); k >= 0 {
		e = s + k
	}
	for i := s; i < e; i++ {
		if c := text[i]; c < 0x20 && c != '\t' || c == 0x7f || c == 0xc2 {
			return e, true
		}
	}
	return e, false
}

// plainMeasure reports whether the line text[s:e] is edited (an overwrite
// or an erase changes it) and how many cells it ends with.
func plainMeasure(text string, s, e int) (edited bool, cells int) {
	var c plainCursor
	for i := s; i < e; {
		t := plainScan(text, i, e)
		if t.kind == tokText {
			edited = edited || c.col < c.ext
			c.col += utf8.RuneCountInString(text[i:t.end])
			c.ext = max(c.ext, c.col)
		} else if k := c.move(t); k >= 0 && c.erases(k) {
			edited = true
		}
		i = t.end
	}
	return edited, c.ext
}

// plainNeed returns the length of the buffer plainAppend(buf, w, text)
// needs: w plus len(text), or more for an edited line too wide for the
// stack, whose cells go after the place its output ends at the latest.
func plainNeed(w int, text string) int {
	need := w + len(text)
	if len(text) <= plainStackCells {
		return need // no line has more cells than bytes
	}
	for s := 0; s < len(text); {
		e, special := plainLineEnd(text, s)
		if special {
			if edited, cells := plainMeasure(text, s, e); edited && cells > plainStackCells {
				need = max(need, w+e+cells*plainCellSize(len(text)))
			}
		}
		s = e + 1
	}
	return need
}

// plainAppend writes Plain(text) into buf at w and returns where it ends.
// len(buf) must be at least plainNeed(w, text). The output of each line
// ends at or before where the line ends in text (shifted by w), so cells
// placed after that are never overwritten while they are in use.
func plainAppend(buf []byte, w int, text string) int {
	base := w
	var stack [plainStackCells * 24]byte
	wide := plainCellSize(len(text)) == 24
	for s := 0; s < len(text); {
		e, special := plainLineEnd(text, s)
		if !special {
			w += copy(buf[w:], text[s:e])
		} else if edited, cells := plainMeasure(text, s, e); !edited {
			w = plainCopyLine(buf, w, text, s, e)
		} else {
			scratch := plainCells{b: stack[:], wide: wide}
			if cells > plainStackCells {
				scratch.b = buf[base+e:]
			}
			w = plainEditLine(buf, w, text, s, e, scratch)
		}
		if e < len(text) {
			buf[w] = '\n'
			w++
		}
		s = e + 1
	}
	return w
}

// dropStray reports whether a character of size bytes at text[i] is a
// stray byte that would join the byte written before it (buf[w-1]) into a
// C1 control character.
func dropStray(buf []byte, w int, text string, i, size int) bool {
	b := text[i]
	return size == 1 && b >= 0x80 && b <= 0x9f && w > 0 && buf[w-1] == 0xc2
}

// plainCopyLine writes a line that nothing overwrites or erases: its text
// without escape sequences and control characters.
func plainCopyLine(buf []byte, w int, text string, s, e int) int {
	for i := s; i < e; {
		t := plainScan(text, i, e)
		if t.kind == tokText {
			j := i
			for j < t.end && dropStray(buf, w, text, j, 1) {
				j++ // a stray continuation byte is one character
			}
			w += copy(buf[w:], text[j:t.end])
		}
		i = t.end
	}
	return w
}

// plainEditLine writes a line that overwrites or erases, using cells
// (room for as many cells as plainMeasure counted).
func plainEditLine(buf []byte, w int, text string, s, e int, cells plainCells) int {
	var c plainCursor
	cleared := 0 // when CSI 2 K last blanked the whole line
	for i := s; i < e; {
		t := plainScan(text, i, e)
		if t.kind == tokText {
			for j := i; j < t.end; {
				_, size := utf8.DecodeRuneInString(text[j:t.end])
				if c.col == c.ext {
					cells.set(c.ext, cellPre, 0)
					cells.set(c.ext, cellSuf, 0)
					c.ext++
				}
				cells.set(c.col, cellSrc, j)
				c.col++
				j += size
			}
		} else if k := c.move(t); k >= 0 && c.erases(k) {
			switch k {
			case 0:
				cells.set(c.col, cellSuf, i)
			case 1:
				cells.set(min(c.col, c.ext-1), cellPre, i)
			case 2:
				cleared = i
			}
		}
		i = t.end
	}
	// A cell is blank if written before the latest CSI 1 K at or right
	// of it, or CSI 0 K at or left of it: sweep right to left to turn
	// pre into the former, then left to right, rendering.
	latest := 0
	for x := c.ext - 1; x >= 0; x-- {
		latest = max(latest, cells.get(x, cellPre))
		cells.set(x, cellPre, latest)
	}
	latest = cleared
	blanks := 0 // blank cells not written yet: only text after them does
	for x := range c.ext {
		latest = max(latest, cells.get(x, cellSuf))
		src := cells.get(x, cellSrc)
		if src < latest || src < cells.get(x, cellPre) {
			blanks++
			continue
		}
		_, size := utf8.DecodeRuneInString(text[src:e])
		if blanks == 0 && dropStray(buf, w, text, src, size) {
			continue
		}
		for ; blanks > 0; blanks-- {
			buf[w] = ' '
			w++
		}
		w += copy(buf[w:], text[src:src+size])
	}
	return w
}

// Plain returns o.Text as [Plain] leaves it, with the head and the tail
// (the text before and after the omission marker) made plain separately
// and the marker between them as it is. The rendering recorded where the
// marker is; Plain never searches the text for it, so text a command
// printed that looks like a marker is treated as any other. An Output
// built by hand, or decoded from JSON, has no recorded marker and is made
// plain whole. o.Truncation still describes the bytes of o: Plain changes
// nothing in o. One allocation, as Plain.
func (o Output) Plain() string {
	start, end := o.marker[0], o.marker[1]
	if end == 0 || start > end || end > len(o.Text) {
		return Plain(o.Text)
	}
	head, tail := o.Text[:start], o.Text[end:]
	buf := make([]byte, max(plainNeed(0, head), plainNeed(end, tail)))
	w := plainAppend(buf, 0, head)
	w += copy(buf[w:], o.Text[start:end])
	w = plainAppend(buf, w, tail)
	if w == 0 {
		return ""
	}
	return unsafe.String(&buf[0], w)
}
