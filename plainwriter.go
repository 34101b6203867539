package proc

import (
	"bytes"
	"io"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"golang.org/x/xerrors"
)

// NewPlainWriter returns a writer that writes to w the plain text ([Plain]'s
// rules) of every line that is complete, keeping the unfinished line
// until its newline or Close: so "50%\r" then "100%\n" gives "100%\n", not
// "50%100%". However its input is split into writes, what it writes to w
// is Plain of the whole input.
//
// Its memory is bounded whatever the lines' length. It keeps the
// unfinished line as a terminal would show it, not the bytes that drew
// it: at most 64 KiB wide, as Plain's terminal is, a line that grows past
// that being written out in rows of 65,536 columns, each ended by a
// newline, as Plain wraps it (a carriage return then goes back to the
// start of the last row). A redraw written a million times costs no more
// room than once: it holds about twice the unfinished row's plain text,
// and 64 KiB, at most about 1.3 MiB whatever it is fed. Each Write makes
// plain what it can and writes it to w at once, with one call of w.Write
// per 64 KiB of input at most.
//
// Close writes the unfinished line, without adding a newline; a second
// Close does nothing. A Write after Close returns an error wrapping
// ErrClosed. An error from w is returned by the Write (or Close) that met
// it, with 0, and by every later one: the plain text from then on is
// lost. It does not close w. It is not safe for concurrent use (a
// request's OutputTee is written by one goroutine at a time).
func NewPlainWriter(w io.Writer) io.WriteCloser {
	return newPlainWriter(w, plainRowWidth)
}

var _ io.WriteCloser = (*plainWriter)(nil)

// plainWriterChunk is how much input a plainWriter takes in at a time.
const plainWriterChunk = 64 << 10

// plainWriter is NewPlainWriter's writer. line holds the bytes of the
// unfinished line, as its text or, once it grew, as an equivalent shorter
// text (plainLineState): the last row's state, then the bytes of a
// sequence or character not complete yet. Rows the line wrapped out of
// were written.
type plainWriter struct {
	w          io.Writer
	width      int    // columns of a row: plainRowWidth (smaller in tests)
	line       []byte // the unfinished line
	compactAt  int    // line is compacted when it grows to this
	minCompact int    // compactAt after a newline: plainWriterChunk (smaller in tests)
	out        []byte // plain text not written yet
	spare      []byte // room for the next compacted line
	cells      []byte // room for the cells of the compacted row
	err        error  // w's first error
	closed     bool
}

func newPlainWriter(w io.Writer, width int) *plainWriter {
	return &plainWriter{w: w, width: width, compactAt: plainWriterChunk, minCompact: plainWriterChunk}
}

// Write takes in p; see NewPlainWriter.
func (pw *plainWriter) Write(p []byte) (int, error) {
	switch {
	case pw.closed:
		return 0, xerrors.Errorf("plain writer: write after Close: %w", ErrClosed)
	case pw.err != nil:
		return 0, pw.err
	}
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), plainWriterChunk)
		pw.take(p[:k])
		p = p[k:]
		if err := pw.flush(); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// Close writes the unfinished line; see NewPlainWriter.
func (pw *plainWriter) Close() error {
	if pw.closed {
		return nil
	}
	pw.closed = true
	if pw.err != nil {
		return pw.err
	}
	pw.out = appendPlain(pw.out, bytesString(pw.line), pw.width)
	pw.line = nil
	return pw.flush()
}

func (pw *plainWriter) flush() error {
	if len(pw.out) == 0 {
		return nil
	}
	_, err := pw.w.Write(pw.out)
	pw.out = pw.out[:0]
	if err != nil {
		pw.err = xerrors.Errorf("plain writer: %w", err)
		return pw.err
	}
	return nil
}

// take adds p to the line, making plain every line p completes.
func (pw *plainWriter) take(p []byte) {
	for {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			break
		}
		pw.line = append(pw.line, p[:i]...)
		pw.out = append(appendPlain(pw.out, bytesString(pw.line), pw.width), '\n')
		pw.line, p = pw.line[:0], p[i+1:]
		pw.compactAt = pw.minCompact
	}
	pw.line = append(pw.line, p...)
	if len(pw.line) >= pw.compactAt {
		pw.compact()
	}
}

// compact writes the rows the unfinished line wrapped out of, and
// replaces what is left by an equivalent text as short as its state
// allows (plainLineState). The next compaction waits until the line has
// doubled, so that the work stays linear in the input.
func (pw *plainWriter) compact() {
	text := bytesString(pw.line)
	safe := plainSafeEnd(text)
	_, special := plainLineEnd(text[:safe], 0)
	r := 0
	for {
		re, _, _, _, _ := plainRow(text, r, safe, pw.width, special)
		if re == safe {
			break
		}
		pw.out = append(appendPlain(pw.out, text[r:re], pw.width), '\n')
		r = re
	}
	var line []byte
	line, pw.cells = plainLineState(pw.spare[:0], pw.cells, text, r, safe)
	line = plainAppendOpen(line, text[safe:])
	// text reads the old line: it is not needed any more, and its room
	// serves the next compaction.
	pw.line, pw.spare = line, pw.line
	pw.compactAt = max(pw.minCompact, 2*len(line))
}

// bytesString is b as a string, without a copy: for reading only, while
// b is not changed.
func bytesString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// plainSafeEnd returns the end of the complete part of text, an
// unfinished line: what follows is a sequence or a character that more
// input could extend or change, and must wait for it.
func plainSafeEnd(text string) int {
	for i := 0; i < len(text); {
		t := plainScan(text, i, len(text))
		switch {
		case t.kind == tokText:
			if t.end == len(text) {
				return i + plainFullRunes(text[i:])
			}
		case text[i] == 0x1b && plainEscapeOpen(text, i):
			return i
		}
		i = t.end
	}
	return len(text)
}

// plainAppendOpen appends to dst a text equivalent to open, what follows
// plainSafeEnd (a sequence not ended yet, or the start of a character),
// and short whatever open's length: a CSI as its first parameter, whether
// it has more and whether it is private; an OSC, DCS, SOS, PM or APC
// string as its start, and its last byte if it may begin an ST; an
// escape as its first intermediate. Nothing but these bytes changes
// what open does with what follows.
func plainAppendOpen(dst []byte, open string) []byte {
	if len(open) < 3 || open[0] != 0x1b {
		return append(dst, open...)
	}
	switch open[1] {
	case '[':
		// Its bytes are all parameters, ';' or ':', and private markers
		// or intermediates (0x20-0x3F): it has no final byte yet.
		rest := open[2:]
		param, more, private := 0, false, false
		for i := 0; i < len(rest); i++ {
			switch b := rest[i]; {
			case b >= '0' && b <= '9':
				if !more {
					param = min(param*10+int(b-'0'), plainMaxParam)
				}
			case b == ';' || b == ':':
				more = true
			default:
				private = true
			}
		}
		dst = append(dst, "\x1b["...)
		if param > 0 {
			dst = strconv.AppendInt(dst, int64(param), 10)
		}
		if more {
			dst = append(dst, ';')
		}
		if private {
			dst = append(dst, '?')
		}
		return dst
	case ']', 'P', 'X', '^', '_':
		dst = append(dst, open[:2]...)
		if open[len(open)-1] == 0xc2 {
			dst = append(dst, 0xc2)
		}
		return dst
	}
	return append(dst, open[:2]...)
}

// plainFullRunes returns the length of the longest prefix of s, a run of
// text, that more bytes cannot change: s less a last character that may
// still be incomplete (a lead byte and part of its continuation), or a
// last 0xC2 that may start a C1 control character.
func plainFullRunes(s string) int {
	for k := 1; k <= min(utf8.UTFMax-1, len(s)); k++ {
		if b := s[len(s)-k]; b >= 0xc0 {
			if !utf8.FullRuneInString(s[len(s)-k:]) {
				return len(s) - k
			}
			break
		} else if b < 0x80 {
			break
		}
	}
	return len(s)
}

// plainEscapeOpen reports whether the escape sequence at text[i] runs to
// the end of text without having ended: more input would continue it.
func plainEscapeOpen(text string, i int) bool {
	e := len(text)
	if i+1 >= e {
		return true
	}
	switch text[i+1] {
	case '[':
		for j := i + 2; j < e; j++ {
			if b := text[j]; !(b >= '0' && b <= '9' || b == ';' || b == ':' || b >= 0x20 && b <= 0x3f) {
				return false // a final byte, or one that ends it
			}
		}
		return true
	case ']', 'P', 'X', '^', '_':
		for j := i + 2; j < e; j++ {
			switch b := text[j]; {
			case b == 0x07, b == 0x1b:
				// Ended, or ends before an ESC that plainSafeEnd looks
				// at next.
				return false
			case b == 0xc2 && j+1 < e && text[j+1] == 0x9c:
				return false
			}
		}
		return true
	}
	j := i + 1
	for j < e && text[j] >= 0x20 && text[j] <= 0x2f {
		j++
	}
	return j == e
}

// plainLineState appends to dst a text whose plain row, and whose row
// with anything that may follow, are those of the row text[s:e] (one
// row, which no width wraps, made of complete tokens): each cell's character or blank, the row's extent
// and the cursor, and nothing else, since whatever follows acts on those
// only. Its length is about that of the row's plain text, whatever the
// length of the text that drew it. cellBuf is room for the row's cells,
// replaced by a larger one if too small: it returns the one it used.
func plainLineState(dst, cellBuf []byte, text string, s, e int) (_, cellsUsed []byte) {
	_, edited, cells, pre, suf := plainRow(text, s, e, plainRowWidth, true)
	if !edited {
		// Nothing overwritten nor erased: its characters, and the cursor
		// at their end (a move back is an overwrite only once a
		// character follows it).
		var c plainCursor
		for i := s; i < e; {
			t := plainScan(text, i, e)
			if t.kind == tokText {
				dst = plainAppendCells(dst, text, i, t.end)
				c.col += utf8.RuneCountInString(text[i:t.end])
				c.ext = max(c.ext, c.col)
			} else {
				c.move(t)
			}
			i = t.end
		}
		return plainAppendColumn(dst, c.col), cellBuf
	}
	if size := plainCellsSize(len(text), cells, pre, suf); len(cellBuf) < size {
		cellBuf = make([]byte, size)
	}
	cl := newPlainCells(cellBuf, plainCellSize(len(text)), cells, pre, suf)
	c, cleared := plainEditCells(text, s, e, cl)
	latest := cleared
	blanks := 0
	for x := range c.ext {
		if cl.suf {
			latest = max(latest, cl.get(x, cellSuf))
		}
		src := cl.get(x, cellSrc)
		if src < latest || cl.pre && src < cl.get(x, cellPre) {
			blanks++
			continue
		}
		dst = plainAppendBlanks(dst, blanks)
		blanks = 0
		_, size := utf8.DecodeRuneInString(text[src:e])
		dst = plainAppendCells(dst, text, src, src+size)
	}
	dst = plainAppendBlanks(dst, blanks)
	return plainAppendColumn(dst, c.col), cellBuf
}

// plainAppendCells appends the characters of text[i:j], a run of text,
// each in a cell of its own as there: an invalid byte is followed by a
// NUL (dropped, and moving nothing), so that it cannot join what follows
// it into another character or into a C1 control character.
func plainAppendCells(dst []byte, text string, i, j int) []byte {
	for i < j {
		r, size := utf8.DecodeRuneInString(text[i:j])
		dst = append(dst, text[i:i+size]...)
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, 0)
		}
		i += size
	}
	return dst
}

// plainAppendBlanks appends n blank cells at the end of a row: spaces,
// then, back at the first, an erase to the right of them (the last cells
// of the row so far), then forward again.
func plainAppendBlanks(dst []byte, n int) []byte {
	if n == 0 {
		return dst
	}
	for range n {
		dst = append(dst, ' ')
	}
	k := strconv.Itoa(n)
	dst = append(dst, "\x1b["...)
	dst = append(dst, k...)
	dst = append(dst, "D\x1b[K\x1b["...)
	dst = append(dst, k...)
	return append(dst, 'C')
}

// plainAppendColumn appends a move of the cursor to column col (0-based)
// of a row at least that wide. It ends with a complete sequence, which
// nothing that follows can join.
func plainAppendColumn(dst []byte, col int) []byte {
	dst = append(dst, "\x1b["...)
	dst = strconv.AppendInt(dst, int64(col+1), 10)
	return append(dst, 'G')
}
