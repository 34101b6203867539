package screen

import (
	"math/bits"
	"strconv"
	"unicode/utf8"

	"github.com/mattn/go-runewidth"
)

// term is a focused terminal emulator: it keeps what a terminal shows as
// text (the cells' characters, the cursor, the scroll region, the
// alternate screen, the scrollback) and nothing of how it looks (colours,
// attributes, links), and it answers the questions a program asks its
// terminal by appending the replies to reply. It follows xterm where
// terminals differ. It is not safe for concurrent use; Screen locks it.
//
// Why not github.com/charmbracelet/x/vt (v0.1.0): it keeps styled cells
// and copies the whole screen for every line that scrolls, so it read
// `seq 100000` at 0.5 MB/s here, far slower than a terminal delivers it.
// This one keeps each screen as a ring of rune rows (a scroll turns the
// ring), remembers where each row's text ends (clearing and keeping a row
// cost what it holds), keeps the scrollback as cells rendered only when
// read, and writes runs of ASCII in one loop (see BenchmarkEmulator).
type term struct {
	rows, cols int
	main, alt  grid
	g          *grid // &main or &alt
	sb         scrollback

	// The cursor: x, y are 0-based; wrapPending is the "phantom column"
	// after a character was written in the last column, so that the next
	// character wraps and a CR or cursor move does not.
	x, y        int
	wrapPending bool
	// top and bot bound the scroll region: rows top..bot-1.
	top, bot int

	autowrap   bool // DECAWM
	originMode bool // DECOM
	insert     bool // IRM
	// modes keeps the DEC private modes programs set or reset, for DECRQM.
	modes map[int]bool
	tabs  bitset // the columns of the tab stops
	// charsets: G0 and G1 are DEC special graphics (line drawing) when
	// true; gl is the one in use (SI selects G0, SO G1).
	charsets [2]bool
	gl       int
	last     rune // the last character printed, for REP

	// The parser (a DEC VT500-style state machine, without C1 controls:
	// bytes >= 0x80 are UTF-8).
	state   parseState
	params  [maxParams]int
	nparams int  // params in use; 0 before the first digit or ';'
	sub     bool // in a ':' sub-parameter, whose digits are skipped
	prefix  byte // '<', '=', '>' or '?' before the parameters, or 0
	inter   byte // the last intermediate byte (0x20-0x2F), or 0
	strKind byte // ']' OSC, 'P' DCS, 'X' SOS, '^' PM, '_' APC
	str     []byte
	strLong bool // the string outgrew maxStr; it is not acted on
	// utf: a UTF-8 sequence begun in ground state, possibly split
	// between writes.
	utf     [utf8.UTFMax]byte
	utfN    int
	utfNeed int

	scratch []byte // for rendering rows

	// reply holds answers to queries not yet sent; bounded by maxReply.
	reply []byte

	// widthCache remembers the widths of recent characters beyond ASCII,
	// by their low bits: measuring one is a table search.
	widthCache [256]cachedWidth
}

type cachedWidth struct {
	r rune // 0: empty
	w int8
}

// What the program writes is bounded by these, whatever it writes: the
// state of a sequence in progress, the marks of a cell and the replies
// waiting to be sent have a fixed maximum size, and every byte costs at
// most a fixed amount of work beside what it draws.
const (
	// maxParams parameters of a control sequence are kept, each at most
	// maxParam; further ones and further digits are read and dropped.
	maxParams = 16
	maxParam  = 65535
	// maxStr bytes of an OSC, DCS, SOS, PM or APC string are kept (long
	// enough for every query answered here); the rest is swallowed up to
	// the string's terminator and the string is not acted on.
	maxStr = 64
	// maxMarks combining marks are kept on a cell; more are dropped, as
	// terminals do.
	maxMarks = 16
	// maxRepeat bounds the characters one REP draws (a row's width
	// too).
	maxRepeat = 1024
	// maxReply bytes of replies to queries wait to be sent; queries
	// beyond it go unanswered.
	maxReply = 64 << 10
	// wideTail marks the right half of a two-column character.
	wideTail rune = -1
)

type parseState uint8

const (
	sGround parseState = iota
	sEsc
	sCSI
	sCSIIgnore
	sStr    // inside an OSC, DCS, SOS, PM or APC string
	sStrEsc // ESC inside a string: ST if '\' follows
)

// widths measures characters as most Go and C programs do (wcwidth):
// wide East Asian characters and emoji take two columns, combining marks
// none; ambiguous ones one, whatever the locale says.
var widths = &runewidth.Condition{StrictEmojiNeutral: true}

// line is one row of cells. A cell is 0 (blank), a character, or
// wideTail. Every cell from end on is blank, so that clearing, trimming
// and keeping a row cost what it holds, not its width.
type line struct {
	c   []rune
	end int
	// marks holds the combining marks of the cell of the same column, at
	// most maxMarks each, only on cells that are not blank; it is empty or
	// as long as c, and marked reports whether a mark may be set.
	marks  []string
	marked bool
	// epoch is the grid's clear count when the line was last blanked or
	// written: a line from an older epoch is blank (see grid.row).
	epoch uint64
}

// blank clears the whole line.
func (l *line) blank() {
	clear(l.c[:l.end])
	if l.marked {
		clear(l.marks[:l.end])
		l.marked = false
	}
	l.end = 0
}

// zero blanks cell x, which is before end.
func (l *line) zero(x int) {
	l.c[x] = 0
	if l.marked {
		l.marks[x] = ""
	}
}

// clearMarks drops the marks of columns from..to-1.
func (l *line) clearMarks(from, to int) {
	if l.marked && from < l.end {
		clear(l.marks[from:min(to, l.end)])
	}
}

// grid is a screen: a ring of rows, row y at lines[(off+y) % rows].
// Clearing the whole screen only counts a new epoch, so that it costs the
// same whatever the size (programs clear on every alternate-screen
// switch); a row is blanked when it is next reached.
type grid struct {
	lines []line
	// used has a bit per line of lines, set when the line may hold
	// something: every line reached for writing gets it.
	used  bitset
	off   int
	epoch uint64
	// Screen rows spanTop..spanBot-1 are turned by rot: row y of the span
	// is the (y+rot)-th of the ring, cyclically within the span.
	spanTop, spanBot, rot int
	saved                 savedCursor // DECSC for this screen
}

type savedCursor struct {
	set                 bool
	x, y                int
	wrapPending, origin bool
	charsets            [2]bool
	gl                  int
}

// scrollback is a ring of the rows that scrolled off the top of the main
// screen. A row is kept as cells (its trailing blanks cut) and made text
// only when read, so that scrolling a line costs a copy, not an
// allocation, once the ring is full; blank rows in a row are kept as one
// entry with a count, so that scrolling a blank screen costs what it
// holds. It keeps at most limit rows, and rows holding at most
// maxScrollbackCells cells, marks counted by their size, so that its
// memory is bounded on the widest screen too; the oldest rows go first.
type scrollback struct {
	rows  []line // the ring of entries, limit long once a row was kept
	reps  []int  // the rows entry i stands for: more than one only if blank
	cost  []int  // the cells entry i holds, in its buffers' capacity
	start int    // index of the oldest entry
	used  int    // entries in use
	n     int    // rows kept, the sum of reps
	cells int    // sum of cost over the entries in use
	limit int
}

// maxScrollbackCells bounds the cells the scrollback holds: twice the
// largest screen's, so that the rows of any screen up to 1,000 columns
// wide are all kept.
const maxScrollbackCells = 2 * maxCells

func (s *scrollback) alloc() {
	if s.rows == nil {
		s.rows, s.reps, s.cost = make([]line, s.limit), make([]int, s.limit), make([]int, s.limit)
	}
}

func (s *scrollback) push(l *line) {
	if s.limit <= 0 {
		return
	}
	end := l.end
	for end > 0 && l.c[end-1] == 0 {
		end--
	}
	if end == 0 {
		s.pushBlanks(1)
		return
	}
	s.alloc()
	// Room for a row and an entry; the slot of the oldest entry is the
	// next one's when the ring is full, and keeps its buffers for it.
	for s.n >= s.limit || s.used >= s.limit {
		s.drop(s.used == s.limit)
	}
	// The cells a row costs once kept; a row no wider than the largest
	// screen always fits.
	need := end
	if l.marked {
		need += end * 4 // a string header per cell
		for _, m := range l.marks[:end] {
			need += (len(m) + 3) / 4
		}
	}
	for s.n > 0 && s.cells+need > maxScrollbackCells {
		s.drop(false)
	}
	i := (s.start + s.used) % s.limit
	slot := &s.rows[i]
	slot.c = append(slot.c[:0], l.c[:end]...)
	slot.end = end
	slot.marks, slot.marked = nil, l.marked
	if l.marked {
		slot.marks = append([]string(nil), l.marks[:end]...)
	}
	s.cost[i] = cap(slot.c) + need - end
	if slot.marked {
		s.cost[i] += (cap(slot.marks) - end) * 4
	}
	s.reps[i] = 1
	s.cells += s.cost[i]
	s.used++
	s.n++
}

// pushBlanks pushes k blank rows.
func (s *scrollback) pushBlanks(k int) {
	if k <= 0 || s.limit <= 0 {
		return
	}
	s.alloc()
	k = min(k, s.limit)
	if newest := (s.start + s.used - 1) % s.limit; s.used > 0 && s.rows[newest].end == 0 {
		s.reps[newest] += k
	} else {
		for s.used >= s.limit {
			s.drop(false)
		}
		i := (s.start + s.used) % s.limit
		s.rows[i], s.reps[i], s.cost[i] = line{}, k, 0
		s.used++
	}
	s.n += k
	for s.n > s.limit {
		s.drop(false)
	}
}

// drop drops the oldest row; the buffers of an entry it empties stay for
// the next row when reuse is set, and are released otherwise.
func (s *scrollback) drop(reuse bool) {
	i := s.start
	s.n--
	if s.reps[i] > 1 {
		s.reps[i]--
		return
	}
	s.cells -= s.cost[i]
	s.cost[i], s.reps[i] = 0, 0
	if !reuse {
		s.rows[i] = line{}
	}
	s.start = (i + 1) % s.limit
	s.used--
}

func (s *scrollback) len() int { return s.n }

// last returns the newest n rows as text, oldest first.
func (s *scrollback) last(n int) []string {
	n = min(n, s.n)
	if n <= 0 {
		return nil
	}
	out := make([]string, n)
	var buf []byte
	for e := s.used - 1; n > 0; e-- {
		i := (s.start + e) % s.limit
		buf = appendRow(buf[:0], &s.rows[i])
		text := string(buf)
		for r := 0; r < s.reps[i] && n > 0; r++ {
			n--
			out[n] = text
		}
	}
	return out
}

func (s *scrollback) clear() {
	s.rows, s.reps, s.cost = nil, nil, nil
	s.start, s.used, s.n, s.cells = 0, 0, 0, 0
}

func newTerm(rows, cols, scrollbackRows int) *term {
	t := &term{rows: rows, cols: cols, sb: scrollback{limit: scrollbackRows}}
	t.main.lines, t.main.used = newLines(rows, cols), newBitset(rows)
	t.alt.lines, t.alt.used = newLines(rows, cols), newBitset(rows)
	t.g = &t.main
	t.resetModes()
	return t
}

// bitset is a set of the integers 0..n-1 with a summary bit per word of
// members, so that finding the next member reads a few words whatever n
// is (at most n/4096 summary words).
type bitset struct {
	w   []uint64 // bit i%64 of w[i/64]: i is a member
	sum []uint64 // bit j%64 of sum[j/64]: w[j] is not 0
}

func newBitset(n int) bitset {
	words := (n + 63) / 64
	return bitset{w: make([]uint64, words), sum: make([]uint64, (words+63)/64)}
}

func (b *bitset) set(i int) {
	b.w[i>>6] |= 1 << (i & 63)
	b.sum[i>>12] |= 1 << ((i >> 6) & 63)
}

func (b *bitset) unset(i int) {
	j := i >> 6
	if b.w[j] &^= 1 << (i & 63); b.w[j] == 0 {
		b.sum[j>>6] &^= 1 << (j & 63)
	}
}

func (b *bitset) has(i int) bool { return b.w[i>>6]&(1<<(i&63)) != 0 }

// prev returns the largest member up to i, or -1.
func (b *bitset) prev(i int) int {
	if i < 0 {
		return -1
	}
	j := i >> 6
	if w := b.w[j] << (63 - i&63); w != 0 {
		return i - bits.LeadingZeros64(w)
	}
	j-- // the previous word with a member, by the summary
	if j < 0 {
		return -1
	}
	k := j >> 6
	for s := b.sum[k] << (63 - j&63); ; s = b.sum[k] {
		if s != 0 {
			j -= bits.LeadingZeros64(s)
			return j<<6 + 63 - bits.LeadingZeros64(b.w[j])
		}
		if k--; k < 0 {
			return -1
		}
		j = k<<6 + 63
	}
}

// nth returns the n-th member (n >= 1) from i on, or -1, counting the
// members a word at a time.
func (b *bitset) nth(i, n int) int {
	for j := i >> 6; j < len(b.w); j++ {
		w := b.w[j]
		if j == i>>6 {
			w &^= 1<<(i&63) - 1
		}
		if c := bits.OnesCount64(w); c < n {
			n -= c
			continue
		}
		for ; n > 1; n-- {
			w &= w - 1
		}
		return j<<6 + bits.TrailingZeros64(w)
	}
	return -1
}

// nthBack returns the n-th member (n >= 1) from i down, or -1.
func (b *bitset) nthBack(i, n int) int {
	if i < 0 {
		return -1
	}
	for j := i >> 6; j >= 0; j-- {
		w := b.w[j]
		if j == i>>6 && i&63 != 63 {
			w &= 1<<(i&63+1) - 1
		}
		if c := bits.OnesCount64(w); c < n {
			n -= c
			continue
		}
		for ; n > 1; n-- {
			w &^= 1 << (63 - bits.LeadingZeros64(w))
		}
		return j<<6 + 63 - bits.LeadingZeros64(w)
	}
	return -1
}

// next returns the smallest member from i on, or -1.
func (b *bitset) next(i int) int {
	j := i >> 6
	if j >= len(b.w) {
		return -1
	}
	if w := b.w[j] >> (i & 63); w != 0 {
		return i + bits.TrailingZeros64(w)
	}
	j++ // the next word with a member, by the summary
	k := j >> 6
	if k >= len(b.sum) {
		return -1
	}
	for s := b.sum[k] >> (j & 63); ; s = b.sum[k] {
		if s != 0 {
			j += bits.TrailingZeros64(s)
			return j<<6 + bits.TrailingZeros64(b.w[j])
		}
		if k++; k >= len(b.sum) {
			return -1
		}
		j = k << 6
	}
}

func newLines(rows, cols int) []line {
	cells := make([]rune, rows*cols)
	ls := make([]line, rows)
	for i := range ls {
		ls[i].c = cells[i*cols : (i+1)*cols : (i+1)*cols]
	}
	return ls
}

func (t *term) resetModes() {
	t.top, t.bot = 0, t.rows
	t.autowrap, t.originMode, t.insert = true, false, false
	t.modes = nil
	t.charsets, t.gl = [2]bool{}, 0
	t.resetTabs()
}

func (t *term) resetTabs() {
	t.tabs = newBitset(t.cols)
	for i := 8; i < t.cols; i += 8 {
		t.tabs.set(i)
	}
}

// write feeds the terminal's output to the emulator. Runs of printable
// ASCII, whole UTF-8 characters and the bytes of a string are read in
// loops of their own; everything else goes through advance, a byte at a
// time.
func (t *term) write(p []byte) {
	for i := 0; i < len(p); {
		b := p[i]
		switch {
		case t.state == sGround && t.utfN == 0 && b >= 0x20 && b < 0x7f:
			j := i + 1
			for j < len(p) && p[j] >= 0x20 && p[j] < 0x7f {
				j++
			}
			t.printASCII(p[i:j])
			i = j
			continue
		case t.state == sGround && t.utfN == 0 && b >= 0x80:
			// A whole, valid character decodes here as advance would
			// decode it byte by byte; anything else goes there.
			if r, size := utf8.DecodeRune(p[i:]); size > 1 {
				t.print(r)
				i += size
				continue
			}
		case t.state == sStr:
			j := i
			for j < len(p) && !strEnds(p[j]) {
				j++
			}
			if len(t.str)+(j-i) > maxStr {
				t.strLong = true
			}
			if keep := min(j-i, maxStr-len(t.str)); keep > 0 {
				t.str = append(t.str, p[i:i+keep]...)
			}
			if j == len(p) {
				return
			}
			i = j
		}
		t.advance(p[i])
		i++
	}
}

// strEnds reports whether b ends a string or may (ESC starts ST).
func strEnds(b byte) bool {
	return b == 0x1b || b == 0x07 || b == 0x18 || b == 0x1a
}

// advance runs the parser over one byte that is not part of a run of
// printable ASCII in ground state.
func (t *term) advance(b byte) {
	switch t.state {
	case sStr:
		t.strByte(b)
		return
	case sStrEsc:
		if b == '\\' {
			t.endString(false)
			return
		}
		t.endString(false)
		t.state = sEsc
		t.startEsc()
		t.advance(b)
		return
	}
	if b < 0x20 || b == 0x7f {
		t.control(b)
		return
	}
	switch t.state {
	case sGround:
		t.utf8Byte(b)
	case sEsc:
		t.escByte(b)
	case sCSI, sCSIIgnore:
		t.csiByte(b)
	}
}

// control executes a C0 control; in ground state an unfinished UTF-8
// sequence before it is a replacement character.
func (t *term) control(b byte) {
	if t.utfN > 0 {
		t.utfN = 0
		t.print(utf8.RuneError)
	}
	switch b {
	case 0x1b: // ESC: (re)starts an escape sequence
		t.state = sEsc
		t.startEsc()
	case 0x18, 0x1a: // CAN, SUB: abort a sequence
		t.state = sGround
	case '\b':
		t.wrapPending = false
		if t.x > 0 {
			t.x--
		}
	case '\t':
		t.tab(1)
	case '\n', '\v', '\f':
		t.index()
	case '\r':
		t.wrapPending = false
		t.x = 0
	case 0x0e: // SO
		t.gl = 1
	case 0x0f: // SI
		t.gl = 0
	}
	// BEL, NUL, DEL and the rest do nothing on the screen.
}

func (t *term) startEsc() {
	t.nparams, t.sub, t.prefix, t.inter = 0, false, 0, 0
}

func (t *term) utf8Byte(b byte) {
	if t.utfN == 0 {
		switch {
		case b < 0x80:
			t.print(rune(b))
			return
		case b >= 0xc2 && b <= 0xdf:
			t.utfNeed = 2
		case b >= 0xe0 && b <= 0xef:
			t.utfNeed = 3
		case b >= 0xf0 && b <= 0xf4:
			t.utfNeed = 4
		default:
			t.print(utf8.RuneError)
			return
		}
		t.utf[0] = b
		t.utfN = 1
		return
	}
	t.utf[t.utfN] = b
	t.utfN++
	if !utf8.FullRune(t.utf[:t.utfN]) {
		return
	}
	r, size := utf8.DecodeRune(t.utf[:t.utfN])
	rest := t.utfN - size
	var tail [utf8.UTFMax]byte
	copy(tail[:], t.utf[size:t.utfN])
	t.utfN = 0
	t.print(r)
	// An invalid sequence decodes one byte at a time: the bytes after it
	// start again.
	for _, c := range tail[:rest] {
		if c < 0x80 {
			t.advance(c)
			continue
		}
		t.utf8Byte(c)
	}
}

func (t *term) escByte(b byte) {
	if b >= 0x20 && b <= 0x2f {
		t.inter = b
		return
	}
	t.state = sGround
	if t.inter != 0 {
		switch t.inter {
		case '(', ')': // designate G0, G1: '0' is DEC special graphics
			t.charsets[t.inter-'('] = b == '0'
		}
		return
	}
	switch b {
	case '[':
		t.state = sCSI
	case ']', 'P', 'X', '^', '_':
		t.state, t.strKind, t.str, t.strLong = sStr, b, t.str[:0], false
	case '7':
		t.saveCursor()
	case '8':
		t.restoreCursor()
	case 'D':
		t.index()
	case 'E':
		t.wrapPending = false
		t.x = 0
		t.index()
	case 'M':
		t.reverseIndex()
	case 'H':
		t.tabs.set(t.x)
	case 'c':
		t.fullReset()
	}
}

func (t *term) csiByte(b byte) {
	switch {
	case b >= '0' && b <= '9':
		if t.state == sCSIIgnore || t.sub {
			return
		}
		if t.nparams == 0 {
			t.nparams, t.params[0] = 1, 0
		}
		p := &t.params[t.nparams-1]
		*p = min(*p*10+int(b-'0'), maxParam)
	case b == ';':
		t.sub = false
		if t.nparams == 0 {
			t.nparams, t.params[0] = 1, 0
		}
		if t.nparams < maxParams {
			t.params[t.nparams] = 0
			t.nparams++
		}
	case b == ':':
		t.sub = true
	case b >= '<' && b <= '?':
		if t.nparams == 0 && t.prefix == 0 && t.inter == 0 {
			t.prefix = b
		} else {
			t.state = sCSIIgnore
		}
	case b >= 0x20 && b <= 0x2f:
		t.inter = b
	case b >= 0x40 && b <= 0x7e:
		ignore := t.state == sCSIIgnore
		t.state = sGround
		if !ignore {
			t.csi(b)
		}
	default:
		t.state = sCSIIgnore
	}
}

// param returns parameter i, or def when it is missing or 0.
func (t *term) param(i, def int) int {
	if i < t.nparams && t.params[i] != 0 {
		return t.params[i]
	}
	return def
}

// param0 returns parameter i, 0 when missing.
func (t *term) param0(i int) int {
	if i < t.nparams {
		return t.params[i]
	}
	return 0
}

func (t *term) csi(final byte) {
	switch t.prefix {
	case 0:
	case '?':
		switch {
		case t.inter == 0 && (final == 'h' || final == 'l'):
			for i := 0; i < max(t.nparams, 1); i++ {
				t.setDECMode(t.param0(i), final == 'h')
			}
		case t.inter == 0 && final == 'n' && t.param0(0) == 6: // DECXCPR
			row, col := t.reportedCursor()
			t.answer("\x1b[?" + strconv.Itoa(row) + ";" + strconv.Itoa(col) + "R")
		case t.inter == '$' && final == 'p': // DECRQM, DEC mode
			t.reportMode("?", t.param0(0), t.decModeState(t.param0(0)))
		case t.inter == 0 && final == 'J':
			t.eraseDisplay(t.param0(0))
		case t.inter == 0 && final == 'K':
			t.eraseLine(t.param0(0))
		}
		return
	case '>':
		if t.inter == 0 && final == 'c' && t.param0(0) == 0 { // DA2
			t.answer("\x1b[>1;10;0c")
		}
		return
	case '=':
		if t.inter == 0 && final == 'c' && t.param0(0) == 0 { // DA3
			t.answer("\x1bP!|00000000\x1b\\")
		}
		return
	default:
		return
	}
	if t.inter != 0 {
		if t.inter == '$' && final == 'p' { // DECRQM, ANSI mode
			state := 0
			switch t.param0(0) {
			case 4:
				state = modeState(t.insert)
			case 20:
				state = 4 // LNM: permanently reset
			}
			t.reportMode("", t.param0(0), state)
		}
		return
	}
	n := t.param(0, 1)
	switch final {
	case '@': // ICH
		t.insertCells(n)
	case 'A': // CUU
		t.cursorUp(n)
	case 'B': // CUD
		t.cursorDown(n)
	case 'C', 'a': // CUF, HPR
		t.moveTo(t.x+n, t.y)
	case 'D': // CUB
		t.moveTo(t.x-n, t.y)
	case 'E': // CNL
		t.cursorDown(n)
		t.x = 0
	case 'F': // CPL
		t.cursorUp(n)
		t.x = 0
	case 'G', '`': // CHA, HPA
		t.moveTo(n-1, t.y)
	case 'H', 'f': // CUP, HVP
		t.cursorPosition(t.param(0, 1), t.param(1, 1))
	case 'I': // CHT
		t.tab(n)
	case 'J':
		t.eraseDisplay(t.param0(0))
	case 'K':
		t.eraseLine(t.param0(0))
	case 'L': // IL
		if t.y >= t.top && t.y < t.bot {
			t.scrollDownIn(t.y, n)
			t.x, t.wrapPending = 0, false
		}
	case 'M': // DL
		if t.y >= t.top && t.y < t.bot {
			t.scrollUpIn(t.y, n, false)
			t.x, t.wrapPending = 0, false
		}
	case 'P': // DCH
		t.deleteCells(n)
	case 'S': // SU
		t.scrollUpIn(t.top, n, true)
	case 'T': // SD (with more parameters it is a mouse tracking request)
		if t.nparams <= 1 {
			t.scrollDownIn(t.top, n)
		}
	case 'X': // ECH
		t.wrapPending = false
		t.clearCells(t.y, t.x, min(t.x+n, t.cols))
	case 'Z': // CBT
		t.backTab(n)
	case 'b': // REP
		t.repeat(n)
	case 'c': // DA1
		if t.param0(0) == 0 {
			t.answer("\x1b[?62;22c")
		}
	case 'd': // VPA
		t.cursorPosition(n, t.x+1-t.originLeft())
	case 'e': // VPR
		t.cursorDown(n)
	case 'g': // TBC
		switch t.param0(0) {
		case 0:
			t.tabs.unset(t.x)
		case 3:
			clear(t.tabs.w)
			clear(t.tabs.sum)
		}
	case 'h', 'l': // SM, RM
		for i := 0; i < max(t.nparams, 1); i++ {
			if t.param0(i) == 4 {
				t.insert = final == 'h'
			}
		}
	case 'n': // DSR
		switch t.param0(0) {
		case 5:
			t.answer("\x1b[0n")
		case 6:
			row, col := t.reportedCursor()
			t.answer("\x1b[" + strconv.Itoa(row) + ";" + strconv.Itoa(col) + "R")
		}
	case 'r': // DECSTBM
		top, bot := t.param(0, 1), t.param(1, t.rows)
		if bot > t.rows {
			bot = t.rows
		}
		if top < bot {
			t.top, t.bot = top-1, bot
			t.cursorPosition(1, 1)
		}
	case 's': // SCOSC
		if t.nparams == 0 {
			t.saveCursor()
		}
	case 'u': // SCORC
		if t.nparams == 0 {
			t.restoreCursor()
		}
	case 't': // XTWINOPS: only the size report
		if t.param0(0) == 18 {
			t.answer("\x1b[8;" + strconv.Itoa(t.rows) + ";" + strconv.Itoa(t.cols) + "t")
		}
	}
}

// repeat is REP: the last character printed, n more times, at most a
// row's width and maxRepeat of them, so that the work per byte of output
// stays bounded (a repeat draws a run within a row).
func (t *term) repeat(n int) {
	if t.last == 0 {
		return
	}
	n = min(n, t.cols, maxRepeat)
	if t.last >= 0x20 && t.last < 0x7f && !t.charsets[t.gl] && !t.insert {
		t.fill(t.last, n)
		return
	}
	for range n {
		t.print(t.last)
	}
}

// fill prints the printable ASCII character r n times, as printASCII
// would, a row's run at a time.
func (t *term) fill(r rune, n int) {
	l := t.g.row(t.y)
	for n > 0 {
		if t.wrapPending {
			if !t.autowrap {
				// Every character lands on the last column.
				put(l, t.x, r)
				break
			}
			t.wrapPending = false
			t.x = 0
			t.index()
			l = t.g.row(t.y)
		}
		x, k := t.x, min(n, t.cols-t.x)
		c := l.c
		if c[x] == wideTail && x > 0 {
			l.zero(x - 1)
		}
		if x+k < len(c) && c[x+k] == wideTail {
			c[x+k] = 0
		}
		for i := x; i < x+k; i++ {
			c[i] = r
		}
		l.clearMarks(x, x+k)
		l.end = max(l.end, x+k)
		n -= k
		if x+k == t.cols {
			t.x, t.wrapPending = t.cols-1, true
		} else {
			t.x = x + k
		}
	}
	t.last = r
}

// originLeft is 0: there are no left and right margins here.
func (t *term) originLeft() int { return 0 }

func modeState(set bool) int {
	if set {
		return 1
	}
	return 2
}

// decModeDefaults are the DEC private modes DECRQM reports as known, with
// their state at reset.
var decModeDefaults = map[int]bool{
	1: false, 6: false, 7: true, 12: false, 25: true, 47: false,
	1000: false, 1002: false, 1003: false, 1004: false, 1005: false,
	1006: false, 1015: false, 1047: false, 1048: false, 1049: false,
	2004: false, 2048: false,
}

func (t *term) decModeState(mode int) int {
	def, known := decModeDefaults[mode]
	if !known {
		return 0
	}
	switch mode {
	case 6:
		return modeState(t.originMode)
	case 7:
		return modeState(t.autowrap)
	case 47, 1047, 1049:
		return modeState(t.g == &t.alt)
	}
	if set, ok := t.modes[mode]; ok {
		return modeState(set)
	}
	return modeState(def)
}

func (t *term) reportMode(prefix string, mode, state int) {
	t.answer("\x1b[" + prefix + strconv.Itoa(mode) + ";" + strconv.Itoa(state) + "$y")
}

func (t *term) setDECMode(mode int, set bool) {
	switch mode {
	case 6:
		t.originMode = set
		t.cursorPosition(1, 1)
	case 7:
		t.autowrap = set
	case 47:
		t.switchScreen(set, false)
	case 1047:
		if !set && t.g == &t.alt {
			t.clearGrid(&t.alt)
		}
		t.switchScreen(set, false)
	case 1048:
		if set {
			t.saveCursor()
		} else {
			t.restoreCursor()
		}
	case 1049:
		if set {
			t.saveCursor()
			t.switchScreen(true, true)
		} else {
			t.switchScreen(false, false)
			t.restoreCursor()
		}
	case 2048:
		if set {
			t.inBandSize()
		}
	}
	if _, known := decModeDefaults[mode]; known {
		if t.modes == nil {
			t.modes = make(map[int]bool)
		}
		t.modes[mode] = set
	}
}

func (t *term) inBandSize() {
	t.answer("\x1b[48;" + strconv.Itoa(t.rows) + ";" + strconv.Itoa(t.cols) + ";0;0t")
}

func (t *term) switchScreen(alt, clearAlt bool) {
	if alt {
		if t.g != &t.alt {
			t.g = &t.alt
		}
		if clearAlt {
			t.clearGrid(&t.alt)
		}
		return
	}
	t.g = &t.main
}

func (t *term) clearGrid(g *grid) {
	g.epoch++
}

func (t *term) fullReset() {
	t.clearGrid(&t.main)
	t.clearGrid(&t.alt)
	t.main.saved, t.alt.saved = savedCursor{}, savedCursor{}
	t.g = &t.main
	t.x, t.y, t.wrapPending, t.last = 0, 0, false, 0
	t.resetModes()
}

func (t *term) saveCursor() {
	t.g.saved = savedCursor{
		set: true, x: t.x, y: t.y, wrapPending: t.wrapPending,
		origin: t.originMode, charsets: t.charsets, gl: t.gl,
	}
}

func (t *term) restoreCursor() {
	s := t.g.saved
	if !s.set {
		t.originMode = false
		t.moveTo(0, 0)
		return
	}
	t.x, t.y = min(s.x, t.cols-1), min(s.y, t.rows-1)
	t.wrapPending = s.wrapPending && t.x == t.cols-1
	t.originMode, t.charsets, t.gl = s.origin, s.charsets, s.gl
}

// reportedCursor is the cursor as CPR reports it: 1-based, relative to
// the scroll region in origin mode.
func (t *term) reportedCursor() (row, col int) {
	row = t.y + 1
	if t.originMode {
		row -= t.top
	}
	return row, t.x + 1
}

func (t *term) answer(s string) {
	if len(t.reply)+len(s) <= maxReply {
		t.reply = append(t.reply, s...)
	}
}

// Strings (OSC, DCS, SOS, PM, APC) are skipped; OSC 10, 11 and 12 colour
// queries are answered.

func (t *term) strByte(b byte) {
	switch b {
	case 0x1b:
		t.state = sStrEsc
		return
	case 0x07:
		t.endString(true)
		return
	case 0x18, 0x1a:
		t.state = sGround
		return
	}
	if len(t.str) < maxStr {
		t.str = append(t.str, b)
	} else {
		t.strLong = true
	}
}

func (t *term) endString(bel bool) {
	t.state = sGround
	if t.strKind != ']' || t.strLong {
		return
	}
	end := "\x1b\\"
	if bel {
		end = "\a"
	}
	switch string(t.str) {
	case "10;?":
		t.answer("\x1b]10;rgb:ffff/ffff/ffff" + end)
	case "11;?":
		t.answer("\x1b]11;rgb:0000/0000/0000" + end)
	case "12;?":
		t.answer("\x1b]12;rgb:ffff/ffff/ffff" + end)
	}
}

// Printing.

// decGraphics maps the DEC special graphics set (0x5f-0x7e) to Unicode.
var decGraphics = [32]rune{
	' ', '◆', '▒', '␉', '␌', '␍', '␊', '°', '±', '␤', '␋', '┘', '┐', '┌', '└', '┼',
	'⎺', '⎻', '─', '⎼', '⎽', '├', '┤', '┴', '┬', '│', '≤', '≥', 'π', '≠', '£', '·',
}

// printASCII prints a run of printable ASCII: the hot path.
func (t *term) printASCII(run []byte) {
	if t.charsets[t.gl] || t.insert {
		for _, b := range run {
			t.print(rune(b))
		}
		return
	}
	l := t.g.row(t.y)
	for _, b := range run {
		if t.wrapPending {
			t.wrapPending = false
			if t.autowrap {
				t.x = 0
				t.index()
				l = t.g.row(t.y)
			}
		}
		put(l, t.x, rune(b))
		if t.x == t.cols-1 {
			t.wrapPending = true
		} else {
			t.x++
		}
	}
	t.last = rune(run[len(run)-1])
}

// put sets one cell, clearing the other half of a wide character it
// overwrites and the marks of the old character.
func put(l *line, x int, r rune) {
	c := l.c
	if c[x] == wideTail && x > 0 {
		l.zero(x - 1)
	}
	if x+1 < len(c) && c[x+1] == wideTail {
		c[x+1] = 0
	}
	c[x] = r
	if x >= l.end {
		l.end = x + 1
	}
	if l.marked {
		l.marks[x] = ""
	}
}

func (t *term) print(r rune) {
	if r >= 0x5f && r <= 0x7e && t.charsets[t.gl] {
		r = decGraphics[r-0x5f]
	}
	w := 1
	if r >= 0x7f {
		if r < 0xa0 { // C1 controls, as UTF-8: nothing on the screen
			return
		}
		w = t.width(r)
	}
	if w == 0 {
		t.addMark(r)
		return
	}
	if w > t.cols {
		w = 1
	}
	if t.wrapPending {
		t.wrapPending = false
		if t.autowrap {
			t.x = 0
			t.index()
		}
	}
	if w == 2 && t.x == t.cols-1 {
		if !t.autowrap {
			return
		}
		t.clearCells(t.y, t.x, t.cols)
		t.x = 0
		t.index()
	}
	l := t.g.row(t.y)
	if t.insert {
		t.shiftRight(l, t.x, w)
	}
	put(l, t.x, r)
	if w == 2 {
		put(l, t.x+1, wideTail)
	}
	t.last = r
	if t.x+w >= t.cols {
		t.x = t.cols - 1
		t.wrapPending = true
		return
	}
	t.x += w
}

// width is widths.RuneWidth(r), remembered.
func (t *term) width(r rune) int {
	c := &t.widthCache[r&0xff]
	if c.r != r {
		c.r, c.w = r, int8(widths.RuneWidth(r))
	}
	return int(c.w)
}

// addMark attaches a zero-width character to the one before the cursor.
func (t *term) addMark(r rune) {
	x := t.x
	if !t.wrapPending {
		x--
	}
	l := t.g.row(t.y)
	if x >= 0 && l.c[x] == wideTail {
		x--
	}
	if x < 0 || l.c[x] == 0 {
		return
	}
	if len(l.marks) == 0 {
		l.marks = make([]string, len(l.c))
	}
	m := l.marks[x]
	if fullMarks(m) {
		return
	}
	l.marks[x] = m + string(r)
	l.marked = true
}

// fullMarks reports whether the marks m of a cell are maxMarks already.
// Marks are U+00A0 and above, two to four bytes each: fewer than
// 2*maxMarks bytes leave room, 4*maxMarks bytes do not; in between, the
// bytes that start a character are counted, eight at a time.
func fullMarks(m string) bool {
	if len(m) < 2*maxMarks {
		return false
	}
	if len(m) >= 4*maxMarks {
		return true
	}
	cont := 0 // continuation bytes, 10xxxxxx
	i := 0
	for ; i+8 <= len(m); i += 8 {
		w := uint64(m[i]) | uint64(m[i+1])<<8 | uint64(m[i+2])<<16 | uint64(m[i+3])<<24 |
			uint64(m[i+4])<<32 | uint64(m[i+5])<<40 | uint64(m[i+6])<<48 | uint64(m[i+7])<<56
		cont += bits.OnesCount64(w & 0x8080808080808080 &^ (w << 1))
	}
	for ; i < len(m); i++ {
		if m[i]&0xc0 == 0x80 {
			cont++
		}
	}
	return len(m)-cont >= maxMarks
}

// Cursor movement.

func (t *term) moveTo(x, y int) {
	t.wrapPending = false
	t.x = min(max(x, 0), t.cols-1)
	t.y = min(max(y, 0), t.rows-1)
}

// cursorPosition is CUP: 1-based, relative to the scroll region in
// origin mode.
func (t *term) cursorPosition(row, col int) {
	if t.originMode {
		t.moveTo(col-1, min(t.top+row-1, t.bot-1))
		return
	}
	t.moveTo(col-1, row-1)
}

func (t *term) cursorUp(n int) {
	limit := 0
	if t.y >= t.top {
		limit = t.top
	}
	t.moveTo(t.x, max(t.y-n, limit))
}

func (t *term) cursorDown(n int) {
	limit := t.rows - 1
	if t.y < t.bot {
		limit = t.bot - 1
	}
	t.moveTo(t.x, min(t.y+n, limit))
}

// tab moves to the n-th tab stop to the right, or to the last column:
// the next stop by the stops' summary, the n-th by counting them a word
// at a time.
func (t *term) tab(n int) {
	t.wrapPending = false
	if t.x >= t.cols-1 {
		return
	}
	p := t.tabs.next(t.x + 1)
	if n > 1 {
		p = t.tabs.nth(t.x+1, n)
	}
	if p < 0 || p >= t.cols-1 {
		p = t.cols - 1
	}
	t.x = p
}

// backTab moves to the n-th tab stop to the left, or to the first column.
func (t *term) backTab(n int) {
	t.wrapPending = false
	if t.x == 0 {
		return
	}
	p := t.tabs.prev(t.x - 1)
	if n > 1 {
		p = t.tabs.nthBack(t.x-1, n)
	}
	t.x = max(p, 0)
}

// index is LF: down one row, scrolling the region at its bottom.
func (t *term) index() {
	t.wrapPending = false
	switch {
	case t.y == t.bot-1:
		t.scrollUpIn(t.top, 1, true)
	case t.y < t.rows-1:
		t.y++
	}
}

func (t *term) reverseIndex() {
	t.wrapPending = false
	switch {
	case t.y == t.top:
		t.scrollDownIn(t.top, 1)
	case t.y > 0:
		t.y--
	}
}

// Scrolling moves rows, not cells: the whole screen scrolls by turning
// its ring of rows, a span of rows (a scroll region, or the rows below
// the cursor for inserting and deleting lines) by turning a ring of its
// own (grid.rot), so that a scroll costs the rows it blanks whatever the
// span's height. Only scrolling another span than the last one moves the
// rows of the last one into place first.

// scrollUpIn moves rows from..bot-1 up by n, blank rows entering at the
// bottom of the region. Rows leaving the top of the main screen go to the
// scrollback when toScrollback is set (scrolling, as opposed to deleting
// lines).
func (t *term) scrollUpIn(from, n int, toScrollback bool) {
	n = min(n, t.bot-from)
	if n <= 0 {
		return
	}
	g := t.g
	if toScrollback && from == 0 && g == &t.main {
		t.pushRows(n)
	}
	if from == 0 && t.bot == t.rows {
		g.settle()
		g.blankRows(0, n)
		g.off = (g.off + n) % t.rows
		return
	}
	g.turn(from, t.bot, n)
	g.blankRows(t.bot-n, t.bot)
}

// pushRows pushes rows 0..n-1 of the main screen to the scrollback, at a
// cost of the rows that may hold something (grid.used): of more rows than
// the scrollback keeps, only the last would stay, and blank rows are
// pushed as runs.
func (t *term) pushRows(n int) {
	g := &t.main
	if n == 1 {
		t.sb.push(g.peek(0))
		return
	}
	g.settle()
	a := max(n-t.sb.limit, 0)
	next := a // the first row not pushed yet
	// pushSlots pushes the rows in g.lines[i:j], screen rows y.. on.
	pushSlots := func(i, j, y int) {
		for p := g.used.next(i); p >= 0 && p < j; p = g.used.next(p + 1) {
			row := y + p - i
			t.sb.pushBlanks(row - next)
			t.sb.push(g.peek(row))
			next = row + 1
		}
	}
	r := len(g.lines)
	p := g.off + a
	if p >= r {
		p -= r
	}
	first := min(n-a, r-p)
	pushSlots(p, p+first, a)
	pushSlots(0, n-a-first, a+first)
	t.sb.pushBlanks(n - next)
}

// scrollDownIn moves rows from..bot-1 down by n; blank rows enter at from.
func (t *term) scrollDownIn(from, n int) {
	n = min(n, t.bot-from)
	if n <= 0 {
		return
	}
	t.g.turn(from, t.bot, -n)
	t.g.blankRows(from, from+n)
}

// blankRows blanks screen rows a..b-1, at a cost of the rows that may
// hold something (grid.used), not of their number.
func (g *grid) blankRows(a, b int) {
	if b-a <= 4 {
		for y := a; y < b; y++ {
			g.peek(y).blank()
		}
		return
	}
	if g.rot == 0 || b <= g.spanTop || a >= g.spanBot {
		g.blankRing(a, b)
		return
	}
	if a < g.spanTop {
		g.blankRing(a, g.spanTop)
		a = g.spanTop
	}
	if b > g.spanBot {
		g.blankRing(g.spanBot, b)
		b = g.spanBot
	}
	start := g.spanTop + (a-g.spanTop+g.rot)%(g.spanBot-g.spanTop)
	first := min(b-a, g.spanBot-start)
	g.blankRing(start, start+first)
	g.blankRing(g.spanTop, g.spanTop+b-a-first)
}

// blankRing blanks the rows at positions u..v-1 of the ring, before a
// turned span is applied.
func (g *grid) blankRing(u, v int) {
	if u >= v {
		return
	}
	p := g.off + u
	if p >= len(g.lines) {
		p -= len(g.lines)
	}
	first := min(v-u, len(g.lines)-p)
	g.blankSlots(p, p+first)
	g.blankSlots(0, v-u-first)
}

// blankSlots blanks the lines i..j-1 of g.lines that may hold something.
func (g *grid) blankSlots(i, j int) {
	for i = g.used.next(i); i >= 0 && i < j; i = g.used.next(i + 1) {
		l := &g.lines[i]
		l.blank()
		l.epoch = g.epoch
		g.used.unset(i)
	}
}

// turn moves screen rows from..to-1 up by k (down for a negative k),
// cyclically: the rows that leave at one end enter at the other.
func (g *grid) turn(from, to, k int) {
	size := to - from
	if k%size == 0 {
		return
	}
	if size == len(g.lines) {
		g.settle()
		g.off = ((g.off+k)%size + size) % size
		return
	}
	if g.rot != 0 && (g.spanTop != from || g.spanBot != to) {
		g.settle()
	}
	g.spanTop, g.spanBot = from, to
	g.rot = ((g.rot+k)%size + size) % size
}

// settle moves the rows of the turned span into place: row y of the
// screen is the y-th of the ring of lines again. It moves the fewer rows
// of two ways: the span's own (its height), or, turning the whole ring
// instead, the rows outside the span and the shorter part of the span.
func (g *grid) settle() {
	if g.rot == 0 {
		return
	}
	k, a := g.rot, g.spanTop
	g.rot = 0
	r, s := len(g.lines), g.spanBot-g.spanTop
	c := r - s // the rows outside the span, one block around the ring
	if s <= c+min(k, s-k) {
		g.rotate(a, g.spanBot, k)
		return
	}
	// The ring turned so that the span's first row is row 0, the span S
	// is rows 0..s-1 and the rest C rows s..r-1. Wanted, from row 0:
	// S[k:] S[:k] C.
	g.off = (g.off + a) % r
	if k <= s-k {
		g.off = (g.off + s) % r // C S[:k] S[k:]
		g.rotate(0, c+k, c)     // S[:k] C S[k:]
		g.off = (g.off + k + c) % r
	} else {
		g.off = (g.off + k) % r // S[k:] C S[:k]
		g.rotate(0, s-k+c, s-k) // C S[k:] S[:k]
		g.off = (g.off + c) % r
	}
	g.off = (g.off - a + r) % r
}

// row returns screen row y to be written, blanked first if the screen was
// cleared since the row was last reached.
func (g *grid) row(y int) *line {
	i := g.slot(y)
	g.used.set(i)
	return g.at(i)
}

// peek returns screen row y to be read.
func (g *grid) peek(y int) *line { return g.at(g.slot(y)) }

// at returns g.lines[i], blanked first if the screen was cleared since
// the line was last reached.
func (g *grid) at(i int) *line {
	l := &g.lines[i]
	if l.epoch != g.epoch {
		l.blank()
		l.epoch = g.epoch
	}
	return l
}

// slot returns the index in g.lines of screen row y.
func (g *grid) slot(y int) int {
	if g.rot != 0 && y >= g.spanTop && y < g.spanBot {
		y += g.rot
		if y >= g.spanBot {
			y -= g.spanBot - g.spanTop
		}
	}
	i := g.off + y
	if i >= len(g.lines) {
		i -= len(g.lines)
	}
	return i
}

// rotate moves screen rows from..to-1 up by k: row from+k becomes row
// from.
func (g *grid) rotate(from, to, k int) {
	if k <= 0 || k >= to-from {
		return
	}
	g.reverse(from, from+k)
	g.reverse(from+k, to)
	g.reverse(from, to)
}

func (g *grid) reverse(from, to int) {
	for i, j := from, to-1; i < j; i, j = i+1, j-1 {
		a, b := g.row(i), g.row(j)
		*a, *b = *b, *a
	}
}

// Erasing.

// clearCells blanks cells from..to-1 of row y, and the other half of a
// wide character cut at either end.
func (t *term) clearCells(y, from, to int) {
	if from >= to {
		return
	}
	l := t.g.row(y)
	c := l.c
	if c[from] == wideTail && from > 0 {
		c[from-1] = 0
	}
	if to < len(c) && c[to] == wideTail {
		c[to] = 0
	}
	// Cells from end on are blank already: clearing costs what the row
	// holds, not its width.
	clear(c[from:min(to, max(l.end, from))])
	l.clearMarks(max(from-1, 0), to)
	if to >= l.end {
		l.end = min(l.end, from)
	}
}

func (t *term) eraseLine(mode int) {
	switch mode {
	case 0:
		t.clearCells(t.y, t.x, t.cols)
	case 1:
		t.clearCells(t.y, 0, t.x+1)
	case 2:
		t.clearCells(t.y, 0, t.cols)
	}
}

func (t *term) eraseDisplay(mode int) {
	switch mode {
	case 0:
		t.clearCells(t.y, t.x, t.cols)
		t.g.blankRows(t.y+1, t.rows)
	case 1:
		t.g.blankRows(0, t.y)
		t.clearCells(t.y, 0, t.x+1)
	case 2:
		t.clearGrid(t.g)
	case 3: // xterm: erase the saved lines
		t.sb.clear()
	}
}

func (t *term) insertCells(n int) {
	t.wrapPending = false
	t.shiftRight(t.g.row(t.y), t.x, n)
}

// shiftRight moves cells x.. right by n, blanks entering at x; cells
// pushed past the right edge are lost.
func (t *term) shiftRight(l *line, x, n int) {
	n = min(n, t.cols-x)
	c := l.c
	if c[x] == wideTail && x > 0 {
		l.zero(x - 1)
		c[x] = 0
	}
	l.clearMarks(x, t.cols)
	if l.end <= x {
		return
	}
	// Cells from end on are blank: only what the row holds moves.
	copy(c[x+n:], c[x:min(l.end, t.cols-n)])
	clear(c[x:min(x+n, l.end)])
	l.end = min(l.end+n, t.cols)
	if c[t.cols-1] != wideTail && t.cols > 1 && t.width(c[t.cols-1]) == 2 {
		c[t.cols-1] = 0
	}
}

func (t *term) deleteCells(n int) {
	t.wrapPending = false
	n = min(n, t.cols-t.x)
	l := t.g.row(t.y)
	c := l.c
	if c[t.x] == wideTail && t.x > 0 {
		l.zero(t.x - 1)
	}
	// The marks of the cells that move are dropped (rare enough not to
	// move them along).
	l.clearMarks(t.x, t.cols)
	if l.end <= t.x {
		return
	}
	// Cells from end on are blank: only what the row holds moves.
	end := l.end
	if t.x+n < end {
		copy(c[t.x:], c[t.x+n:end])
	}
	clear(c[max(end-n, t.x):end])
	l.end = max(end-n, t.x)
	if c[t.x] == wideTail {
		c[t.x] = 0
	}
}

// Reading.

// appendRow appends a row as text, trailing blanks trimmed, to b.
func appendRow(b []byte, l *line) []byte {
	end := l.end
	for end > 0 && (l.c[end-1] == 0 || l.c[end-1] == ' ') && (!l.marked || l.marks[end-1] == "") {
		end--
	}
	for x, r := range l.c[:end] {
		switch {
		case r == wideTail:
			continue
		case r == 0:
			b = append(b, ' ')
		case r < utf8.RuneSelf:
			b = append(b, byte(r))
		default:
			b = utf8.AppendRune(b, r)
		}
		if l.marked {
			b = append(b, l.marks[x]...)
		}
	}
	return b
}

// resize changes the size of both screens. Columns are cut or added on the
// right (no reflow). Fewer rows: rows below the cursor go first, then rows
// at the top, into the scrollback from the main screen, so the cursor
// keeps its row. More rows: blank rows at the bottom.
func (t *term) resize(rows, cols int) {
	if rows == t.rows && cols == t.cols {
		return
	}
	dropBottom, dropTop := 0, 0
	if rows < t.rows {
		need := t.rows - rows
		dropBottom = min(need, t.rows-1-t.y)
		dropTop = need - dropBottom
	}
	for i := 0; i < dropTop; i++ {
		t.sb.push(t.main.peek(i))
	}
	for _, g := range []*grid{&t.main, &t.alt} {
		lines, used := newLines(rows, cols), newBitset(rows)
		for i := range t.rows - dropTop - dropBottom {
			copyLine(&lines[i], g.peek(dropTop+i))
			used.set(i)
		}
		g.lines, g.used, g.off, g.epoch, g.rot = lines, used, 0, 0, 0
		s := &g.saved
		s.x, s.y = min(s.x, cols-1), min(max(s.y-dropTop, 0), rows-1)
	}
	t.rows, t.cols = rows, cols
	t.y = min(t.y-dropTop, rows-1)
	t.x = min(t.x, cols-1)
	t.wrapPending = false
	t.top, t.bot = 0, rows
	t.resetTabs()
	if t.modes[2048] {
		t.inBandSize()
	}
}

// copyLine copies src into dst, which may be narrower or wider.
func copyLine(dst, src *line) {
	n := copy(dst.c, src.c[:src.end])
	dst.end = n
	if n > 0 && n < len(src.c) && src.c[n] == wideTail {
		dst.c[n-1] = 0
	}
	if !src.marked {
		return
	}
	for x, m := range src.marks[:n] {
		if m != "" && dst.c[x] != 0 {
			if len(dst.marks) == 0 {
				dst.marks = make([]string, len(dst.c))
			}
			dst.marks[x] = m
			dst.marked = true
		}
	}
}

// rowText returns row y of the visible screen as text.
func (t *term) rowText(y int) string {
	t.scratch = appendRow(t.scratch[:0], t.g.peek(y))
	return string(t.scratch)
}

// text returns the visible screen: rows joined by "\n", trailing blanks of
// each row and trailing blank rows trimmed.
func (t *term) text() string {
	var out []byte
	blank := 0 // blank rows seen since the last row with text
	for y := range t.g.lines {
		t.scratch = appendRow(t.scratch[:0], t.g.peek(y))
		if len(t.scratch) == 0 {
			blank++
			continue
		}
		if y > blank {
			blank++ // the newline ending the row before
		}
		for ; blank > 0; blank-- {
			out = append(out, '\n')
		}
		out = append(out, t.scratch...)
	}
	return string(out)
}
