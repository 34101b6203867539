package proc

import (
	"encoding/binary"
	"math"
	"slices"
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
// The terminal Plain models is 65,536 columns wide: a line that grows
// past that wraps, as a terminal's does, into rows of 65,536 columns
// ended by a newline, and a carriage return, cursor moves and erases
// then act on the last row. (So a stream can be made plain as it comes,
// in bounded memory: see [NewPlainWriter].) The result is never longer
// than text but for those newlines.
//
// Plain runs in time linear in len(text) and makes one allocation, which
// the result keeps: the result's bytes, and, when a row wider than 256
// columns is overwritten or erased, 4 bytes per column of the widest such
// row (8 more when erases to its left and to its right both changed it;
// twice that for a text of 4 GiB or more): at most 768 KiB, however long
// the line.
func Plain(text string) string {
	if text == "" {
		return ""
	}
	out, scratch := plainNeed(text, plainRowWidth)
	buf := make([]byte, out+scratch)
	n := plainAppend(buf, 0, text, plainRowWidth, buf[out:])
	if n == 0 {
		return ""
	}
	return unsafe.String(&buf[0], n)
}

// A row that an overwrite or an erase changes is edited as an array of
// cells, one per column. A cell is up to three offsets into the text (32
// bits each, 64 for a text of 4 GiB or more): src, the first byte of the
// character it holds (which is also when it was written), and, only when
// the row holds such erases, pre and suf, when an erase-in-line to the
// left (CSI 1 K) or to the right (CSI 0 K) was made with the cursor on
// this cell (0: never). A cell is blank if an erase covering it came
// after its character: every operation is O(1), and the row is rendered
// once, in two sweeps, when it ends. Without the markers an erase would
// blank each cell it covers, and a line erased over and over would cost
// its width each time.
const (
	// plainStackCells cells are kept on the stack; a wider edited row
	// uses scratch at the end of the result's allocation, which plainNeed
	// sizes.
	plainStackCells = 256
	plainStackBytes = plainStackCells * 3 * 8
	// plainMaxParam caps a CSI parameter (no line is that wide).
	plainMaxParam = 1 << 30
	// plainRowWidth is the width of the terminal Plain models: a line
	// wider than that wraps, as a terminal's does, so that a row, and the
	// cells an edited one needs, stays bounded whatever a line's length.
	plainRowWidth = 1 << 16
)

// plainCells are the cells of one row: the src field of each, then,
// when the row has such erases, the pre and the suf ones.
type plainCells struct {
	b        []byte
	wide     bool   // 64-bit fields
	pre, suf bool   // the fields are there
	base     [3]int // where each field's array starts in b
	size     int    // of a field: 4 or 8 bytes
}

// plainCellSize is the size of a cell field for a text of n bytes.
func plainCellSize(n int) int {
	if uint64(n) > math.MaxUint32 {
		return 8
	}
	return 4
}

// plainCellsSize is the room cells of a row need (see plainRow).
func plainCellsSize(textLen, cells int, pre, suf bool) int {
	fields := 1
	if pre {
		fields++
	}
	if suf {
		fields++
	}
	return fields * cells * plainCellSize(textLen)
}

// newPlainCells lays out cells of size-byte fields (plainCellSize) in b.
func newPlainCells(b []byte, size, cells int, pre, suf bool) plainCells {
	c := plainCells{b: b, size: size, pre: pre, suf: suf}
	c.wide = c.size == 8
	next := cells * c.size
	if pre {
		c.base[cellPre] = next
		next += cells * c.size
	}
	if suf {
		c.base[cellSuf] = next
	}
	return c
}

func (c plainCells) get(i, field int) int {
	off := c.base[field] + i*c.size
	if c.wide {
		return int(binary.NativeEndian.Uint64(c.b[off:]))
	}
	return int(binary.NativeEndian.Uint32(c.b[off:]))
}

func (c plainCells) set(i, field, v int) {
	off := c.base[field] + i*c.size
	if c.wide {
		binary.NativeEndian.PutUint64(c.b[off:], uint64(v))
	} else {
		binary.NativeEndian.PutUint32(c.b[off:], uint32(v))
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

// plainRow measures the row that starts at r in the line that ends at
// e: its end, where a character is written with the cursor past the last
// of width columns (the terminal wraps there), or e; whether it is
// edited (an overwrite or an erase changes it), how many cells it ends
// with, and whether it holds an erase to the left (pre) or to the right
// (suf) that changes it. special is plainLineEnd's: without it the line
// is characters only. It reads the row's bytes only, not the rest of the
// line's.
func plainRow(text string, r, e, width int, special bool) (re int, edited bool, cells int, pre, suf bool) {
	if !special {
		if e-r <= width {
			return e, false, utf8.RuneCountInString(text[r:e]), false, false
		}
		j, col := r, 0
		for ; j < e && col < width; col++ {
			_, size := utf8.DecodeRuneInString(text[j:e])
			j += size
		}
		return j, false, col, false, false
	}
	var c plainCursor
	for i := r; i < e; {
		if !plainTextByte(text, i, e) {
			t := plainScan(text, i, e)
			if k := c.move(t); k >= 0 && c.erases(k) {
				edited = true
				pre = pre || k == 1
				suf = suf || k == 0
			}
			i = t.end
			continue
		}
		edited = edited || c.col < c.ext
		// A run of more than 4 bytes a column left holds more characters
		// than there are columns: scan no further than that.
		lim := min(e, i+utf8.UTFMax*(width-c.col+1))
		t := plainScan(text, i, lim)
		if t.end < lim || lim == e {
			if n := utf8.RuneCountInString(text[i:t.end]); c.col+n <= width {
				c.col += n
				c.ext = max(c.ext, c.col)
				i = t.end
				continue
			}
		}
		// The row wraps in this run: a character at a time to there. No
		// control byte, nor 0xC2, continues a character, so this decodes
		// as the run does.
		for c.col < width {
			_, size := utf8.DecodeRuneInString(text[i:e])
			i += size
			c.col++
		}
		return i, edited, max(c.ext, c.col), pre, suf
	}
	return e, edited, c.ext, pre, suf
}

// plainTextByte reports whether text[i] is part of a run of text, as
// plainScan finds it.
func plainTextByte(text string, i, e int) bool {
	b := text[i]
	return !(b < 0x20 && b != '\t' || b == 0x7f || isC1(text, i, e))
}

// plainNeed returns the room Plain(text) needs: out bytes of output (the
// text's length, and a newline for each wrap), and scratch bytes for the
// cells of the widest edited row too wide for the stack. A pass over
// the text finds them, when it is longer than the stack's cells.
func plainNeed(text string, width int) (out, scratch int) {
	out = len(text)
	if len(text) <= min(plainStackCells, width) {
		return out, 0 // no row has more cells or columns than bytes
	}
	for s := 0; s < len(text); {
		e, special := plainLineEnd(text, s)
		for r := s; ; {
			re, edited, cells, pre, suf := plainRow(text, r, e, width, special)
			if size := plainCellsSize(len(text), cells, pre, suf); edited && size > plainStackBytes {
				scratch = max(scratch, size)
			}
			if re == e {
				break
			}
			out++
			r = re
		}
		s = e + 1
	}
	return out, scratch
}

// plainAppend writes Plain(text), in rows of width columns, into buf at w
// and returns where it ends. buf must have room for the out bytes
// plainNeed counts after w, and scratch for its scratch bytes.
func plainAppend(buf []byte, w int, text string, width int, scratch []byte) int {
	var stack [plainStackBytes]byte
	for s := 0; s < len(text); {
		e, special := plainLineEnd(text, s)
		for r := s; ; {
			re, edited, cells, pre, suf := plainRow(text, r, e, width, special)
			switch {
			case !special:
				w += copy(buf[w:], text[r:re])
			case !edited:
				w = plainCopyLine(buf, w, text, r, re)
			default:
				b := stack[:]
				if plainCellsSize(len(text), cells, pre, suf) > len(b) {
					b = scratch
				}
				w = plainEditLine(buf, w, text, r, re, newPlainCells(b, plainCellSize(len(text)), cells, pre, suf))
			}
			if re == e {
				break
			}
			buf[w] = '\n'
			w++
			r = re
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

// plainCopyLine writes a row that nothing overwrites or erases: its text
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

// plainEditCells plays the row text[s:e] on cells (room for as many cells,
// and fields, as plainMeasure counted) and returns the cursor and when CSI
// 2 K last blanked the whole row. Then each cell's pre holds the latest
// CSI 1 K at or right of it: a cell is blank if its src is before that,
// before the returned cleared, or before the latest CSI 0 K at or left of
// it (the caller's sweep, left to right).
func plainEditCells(text string, s, e int, cells plainCells) (c plainCursor, cleared int) {
	for i := s; i < e; {
		t := plainScan(text, i, e)
		if t.kind == tokText {
			for j := i; j < t.end; {
				_, size := utf8.DecodeRuneInString(text[j:t.end])
				if c.col == c.ext {
					if cells.pre {
						cells.set(c.ext, cellPre, 0)
					}
					if cells.suf {
						cells.set(c.ext, cellSuf, 0)
					}
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
	if cells.pre {
		latest := 0
		for x := c.ext - 1; x >= 0; x-- {
			latest = max(latest, cells.get(x, cellPre))
			cells.set(x, cellPre, latest)
		}
	}
	return c, cleared
}

// plainEditLine writes a row that overwrites or erases, using cells.
func plainEditLine(buf []byte, w int, text string, s, e int, cells plainCells) int {
	c, cleared := plainEditCells(text, s, e, cells)
	latest := cleared
	blanks := 0 // blank cells not written yet: only text after them does
	for x := range c.ext {
		if cells.suf {
			latest = max(latest, cells.get(x, cellSuf))
		}
		src := cells.get(x, cellSrc)
		if src < latest || cells.pre && src < cells.get(x, cellPre) {
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

// appendPlain appends Plain(text), in rows of width columns, to dst.
func appendPlain(dst []byte, text string, width int) []byte {
	out, scratch := plainNeed(text, width)
	n := len(dst)
	dst = slices.Grow(dst, out+scratch)
	buf := dst[:n+out+scratch]
	return dst[:plainAppend(buf, n, text, width, buf[n+out:])]
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
	headOut, headScratch := plainNeed(head, plainRowWidth)
	tailOut, tailScratch := plainNeed(tail, plainRowWidth)
	out := headOut + end - start + tailOut
	buf := make([]byte, out+max(headScratch, tailScratch))
	scratch := buf[out:]
	w := plainAppend(buf, 0, head, plainRowWidth, scratch)
	w += copy(buf[w:], o.Text[start:end])
	w = plainAppend(buf, w, tail, plainRowWidth, scratch)
	if w == 0 {
		return ""
	}
	return unsafe.String(&buf[0], w)
}
