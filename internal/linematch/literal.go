package linematch

import (
	"bytes"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// MaxPattern is the longest pattern Compile accepts, in bytes: what
// compiling and prefiltering a pattern costs is bounded with it.
const MaxPattern = 4096

// Pattern is a compiled regular expression with what proposes the lines
// it may match. It is immutable and may be shared.
type Pattern struct {
	re *regexp.Regexp
	// lits are strings one of which every match contains, found at memory
	// speed (Matcher.anchors); nil if the pattern has none. Otherwise
	// pre, the pattern without its assertions (^ $ \A \z \b \B), finds
	// candidates in many lines at once; nil if it could not be made:
	// every line is then a candidate. Either only proposes lines: re
	// decides.
	lits []literal
	pre  *regexp.Regexp
	// window, when not negative, is the most bytes a match can begin
	// before its literal (lits has one): re then runs on the line from
	// there (matches).
	window int
	// exact is set when the pattern is one literal, exactly: a line
	// matches when it holds it. regexp would take time in the product of
	// the two lengths to say so.
	exact    bool
	exactLit []byte
	// insts is the size of the pattern's program: what regexp may step
	// through per byte of a line.
	insts int
}

// maxNearInst bounds the program of a pattern Near reports: regexp's
// work per byte of a line grows with it.
const maxNearInst = 256

// Compile compiles pattern (Go regexp syntax). A pattern longer than
// MaxPattern bytes is an error, as is one regexp refuses.
func Compile(pattern string) (*Pattern, error) {
	if len(pattern) > MaxPattern {
		return nil, &TooLongError{Len: len(pattern)}
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	p := &Pattern{re: re}
	p.lits, p.pre, p.window = prefilter(pattern)
	p.exactLit, p.exact = exactLiteral(pattern)
	if tree, err := syntax.Parse(pattern, syntax.Perl); err == nil {
		if prog, err := syntax.Compile(tree.Simplify()); err == nil {
			p.insts = len(prog.Inst)
		}
	}
	return p, nil
}

// TooLongError is the error of Compile for a pattern longer than
// MaxPattern bytes.
type TooLongError struct{ Len int }

func (e *TooLongError) Error() string {
	return "pattern of " + strconv.Itoa(e.Len) + " bytes, longer than " + strconv.Itoa(MaxPattern)
}

// HasLiteral reports whether every match of p holds one of a few
// literals, so that the lines it may match are found at memory speed.
func (p *Pattern) HasLiteral() bool { return p.lits != nil }

// Near reports whether p is cheap enough to match on the path of the
// stream it watches: it has a literal, and it is one literal exactly or
// its program is small (a long pattern costs regexp time per byte of a
// line in proportion to its length).
func (p *Pattern) Near() bool {
	return p.lits != nil && (p.exact || p.insts <= maxNearInst)
}

// String returns the pattern's source text.
func (p *Pattern) String() string { return p.re.String() }

// MatchString reports whether p matches s, as regexp does.
func (p *Pattern) MatchString(s string) bool { return p.re.MatchString(s) }

// matches reports whether p matches line. The regexp, far slower, runs
// only if line holds one of p's literals (if it has any), and with a
// window only on the part of line where a match can begin: from window
// bytes before the literal's first place, or the nearest place before
// that where re sees what it would see in the whole line (a character's
// first byte, after a byte that is not a word character: \b and \B look
// back; literalWindow leaves out the patterns that assert a beginning).
func (p *Pattern) matches(line []byte) bool {
	if p.exact {
		return bytes.Contains(line, p.exactLit)
	}
	if p.lits == nil {
		return p.re.Match(line)
	}
	if p.window < 0 {
		for _, lit := range p.lits {
			if lit.in(line) {
				return p.re.Match(line)
			}
		}
		return false
	}
	at := bytes.Index(line, p.lits[0].b)
	if at < 0 {
		return false
	}
	from := max(0, at-p.window)
	for from > 0 && (!utf8.RuneStart(line[from]) || isWordByte(line[from-1])) {
		from--
	}
	return p.re.Match(line[from:])
}

// exactLiteral returns the string pattern is, if it is one literal that
// holds no U+FFFD (which also matches a byte that is no UTF-8) and does
// not ignore case.
func exactLiteral(pattern string) ([]byte, bool) {
	tree, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, false
	}
	tree = uncaptured(tree.Simplify())
	if tree.Op != syntax.OpLiteral || tree.Flags&syntax.FoldCase != 0 || slices.Contains(tree.Rune, utf8.RuneError) {
		return nil, false
	}
	return []byte(string(tree.Rune)), true
}

// literal is a string one of a pattern's literals every match holds: its
// bytes; with fold, in lower case, and the text holds each ASCII letter of
// it in either case.
type literal struct {
	b    []byte
	fold bool
}

// prefilter finds what proposes candidate lines for pattern (see
// Pattern): literals one of which every match holds, else the pattern
// with its assertions made empty, which matches wherever the pattern
// matches a line (and more); and the window of a pattern with one
// literal (literalWindow), else -1.
func prefilter(pattern string) (lits []literal, pre *regexp.Regexp, window int) {
	tree, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, nil, -1
	}
	if lits = requiredLiterals(tree); lits != nil {
		return lits, nil, literalWindow(tree, lits)
	}
	pre, err = regexp.Compile(withoutAssertions(tree).String())
	if err != nil {
		return nil, nil, -1
	}
	return nil, pre, -1
}

// literalWindow returns the most bytes a match of re can begin before the
// first byte of lits, its one case-sensitive literal, or -1 if that is
// not bounded or not known: re (without its captures) is a piece that
// begins with the literal, or a concatenation in which such a piece is
// the one requiredLiterals chose and the pieces before it have a bounded
// width. A pattern that asserts the beginning of the text or a line (^,
// \A) has no window: from a place in a line, the pattern cannot tell it
// is not the beginning.
func literalWindow(re *syntax.Regexp, lits []literal) int {
	if len(lits) != 1 || lits[0].fold || asserts(re, syntax.OpBeginLine, syntax.OpBeginText) {
		return -1
	}
	// leads: the piece is a literal that begins with the literal, so that
	// where the piece is, the literal is.
	leads := func(re *syntax.Regexp) bool {
		re = uncaptured(re)
		return re.Op == syntax.OpLiteral && re.Flags&syntax.FoldCase == 0 && bytes.HasPrefix([]byte(string(re.Rune)), lits[0].b)
	}
	if leads(re) {
		return 0
	}
	re = uncaptured(re)
	if re.Op != syntax.OpConcat {
		return -1
	}
	width := 0
	for _, sub := range re.Sub {
		if got := requiredLiterals(sub); len(got) == 1 && bytes.Equal(got[0].b, lits[0].b) && !got[0].fold {
			if leads(sub) {
				return width
			}
			return -1
		}
		w := maxWidth(sub)
		if w < 0 || width+w > 1<<16 {
			return -1
		}
		width += w
	}
	return -1
}

func uncaptured(re *syntax.Regexp) *syntax.Regexp {
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	return re
}

// asserts reports whether re holds one of ops.
func asserts(re *syntax.Regexp, ops ...syntax.Op) bool {
	if slices.Contains(ops, re.Op) {
		return true
	}
	for _, sub := range re.Sub {
		if asserts(sub, ops...) {
			return true
		}
	}
	return false
}

// maxWidth returns the most bytes a match of re can have, or -1 if there
// is no bound (or it is over 1<<16).
func maxWidth(re *syntax.Regexp) int {
	const limit = 1 << 16
	switch re.Op {
	case syntax.OpNoMatch, syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine,
		syntax.OpBeginText, syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return 0
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return utf8.UTFMax * len(re.Rune)
		}
		return len(string(re.Rune))
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return utf8.UTFMax
	case syntax.OpCapture, syntax.OpQuest:
		return maxWidth(re.Sub[0])
	case syntax.OpRepeat:
		w := maxWidth(re.Sub[0])
		if w < 0 || re.Max < 0 || re.Max*w > limit {
			return -1
		}
		return re.Max * w
	case syntax.OpConcat, syntax.OpAlternate:
		n := 0
		for _, sub := range re.Sub {
			w := maxWidth(sub)
			if w < 0 {
				return -1
			}
			if re.Op == syntax.OpConcat {
				n += w
			} else {
				n = max(n, w)
			}
			if n > limit {
				return -1
			}
		}
		return n
	}
	return -1 // star, plus
}

// maxLiterals bounds the literals of a pattern: each is compared wherever
// its anchor occurs, and may need an anchor (a pass over the stream) of
// its own.
const maxLiterals = 4

// maxLiteral bounds the bytes of a literal: it is compared wherever its
// anchor occurs, so its length is work per byte of the stream. Any part
// of a string every match holds is one too; its first maxLiteral bytes
// find the lines as well.
const maxLiteral = 64

// requiredLiterals returns literals, one of which every match of re
// contains (none empty or holding a newline, which no line has), or nil
// if it finds no such set of at most maxLiterals. Of a literal it takes
// the longest run the text must hold byte for byte (its first maxLiteral
// bytes): without U+FFFD (which an invalid byte matches), and, if it
// ignores case ((?i)), of ASCII runes whose every case is ASCII: not 'k'
// (the Kelvin sign is one of its cases) nor 's' (the long s). It is
// linear in the size of re.
func requiredLiterals(re *syntax.Regexp) []literal {
	switch re.Op {
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiterals(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiterals(re.Sub[0])
		}
	case syntax.OpLiteral:
		// The longest run of runes the text holds as they are: not
		// U+FFFD, which also matches a byte that is no UTF-8, nor a
		// newline; with (?i), ASCII runes whose every case is ASCII, in
		// lower case. A run is copied once, when it ends, if it is the
		// longest yet.
		fold := re.Flags&syntax.FoldCase != 0
		var best, run []byte
		end := func() {
			if len(run) > len(best) {
				best = slices.Clone(run)
			}
			run = run[:0]
		}
		for _, r := range re.Rune {
			switch {
			case r == utf8.RuneError || r == '\n' || fold && !asciiFold(r):
				end()
			case fold:
				run = append(run, lowerASCII(byte(r)))
			default:
				run = utf8.AppendRune(run, r)
			}
		}
		end()
		if len(best) == 0 {
			return nil
		}
		return []literal{{b: best[:min(len(best), maxLiteral):min(len(best), maxLiteral)], fold: fold}}
	case syntax.OpConcat:
		// The piece whose shortest literal is longest searches best.
		var best []literal
		for _, sub := range re.Sub {
			if lits := requiredLiterals(sub); lits != nil && (best == nil || shortest(lits) > shortest(best)) {
				best = lits
			}
		}
		return best
	case syntax.OpAlternate:
		var all []literal
		for _, sub := range re.Sub {
			lits := requiredLiterals(sub)
			if lits == nil || len(all)+len(lits) > maxLiterals {
				return nil
			}
			all = append(all, lits...)
		}
		return all
	}
	return nil
}

func shortest(lits []literal) int {
	n := len(lits[0].b)
	for _, l := range lits[1:] {
		n = min(n, len(l.b))
	}
	return n
}

// asciiFold reports whether r and every rune of its case orbit are ASCII:
// a literal ignoring case holds it as one byte.
func asciiFold(r rune) bool {
	if r >= utf8.RuneSelf {
		return false
	}
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func isLetterASCII(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// isWordByte reports whether c is a word character for \b (ASCII).
func isWordByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || isLetterASCII(c)
}

// equal reports whether b is l.
func (l literal) equal(b []byte) bool {
	if !l.fold {
		return bytes.Equal(b, l.b)
	}
	if len(b) != len(l.b) {
		return false
	}
	for i, c := range b {
		if lowerASCII(c) != l.b[i] {
			return false
		}
	}
	return true
}

// in reports whether line holds l.
func (l literal) in(line []byte) bool {
	if !l.fold {
		return bytes.Contains(line, l.b)
	}
	for i := 0; i+len(l.b) <= len(line); i++ {
		if l.equal(line[i : i+len(l.b)]) {
			return true
		}
	}
	return false
}

// withoutAssertions replaces every empty-width assertion in re (in place)
// with an empty match.
func withoutAssertions(re *syntax.Regexp) *syntax.Regexp {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return &syntax.Regexp{Op: syntax.OpEmptyMatch, Flags: re.Flags}
	}
	for i, sub := range re.Sub {
		re.Sub[i] = withoutAssertions(sub)
	}
	return re
}
