package linematch

import (
	"bytes"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Spec is one pattern of a Matcher.
type Spec struct {
	Pattern *Pattern
	// Once makes the pattern done after its first match: later lines are
	// not tried against it.
	Once bool
}

// Sink takes the lines a Splitter cuts from a stream.
type Sink interface {
	// Lines takes complete lines, each ending in '\n'.
	Lines(region []byte)
	// Line takes one line without its '\n'. over says it was longer than
	// line, which then holds its first bytes (at least one more than the
	// receiver matches). line is valid only during the call.
	Line(line []byte, over bool)
}

// Matcher tries a set of patterns on lines (it is a [Sink]), and calls
// its match function with each line some of them match: the line (cut to
// maxLine bytes, without a trailing '\r') and the indexes in the set of
// the patterns that match it, in order. A pattern matches a line as
// regexp's Match does (unanchored). A Matcher is used by one goroutine at
// a time; the line and hits it passes are valid only during the call.
type Matcher struct {
	maxLine int
	match   func(line []byte, hits []int)
	pats    []patState
	// lits are the literals of every pattern that has them: one pass over
	// the stream finds them all, by anchors.
	lits []patLit
	live int // patterns not yet done
	// The patterns without literals propose lines together: pre, the
	// alternation of their forms without assertions (Pattern.pre), finds
	// the next line one of them may match; with every (nil pre), each
	// line is a candidate. noLit counts those still live; window is how
	// many bytes pre searches at once (next).
	pre    *regexp.Regexp
	every  bool
	noLit  int
	window int
	hits   []int // matchLine: the patterns that matched the line
	// anchors are the bytes searched for: every literal of a live pattern
	// holds one of them (chooseAnchors). They are chosen at the first
	// region, again at the first region of at least anchorSample bytes,
	// then every anchorEvery such regions (untilAnchors counts down).
	// When a Once pattern with literals is done, its literals leave their
	// anchors, and an anchor left with none is dropped (prune): cheaper
	// than choosing again after each of many Once patterns.
	anchors      []anchor
	chosen       bool
	prune        bool
	untilAnchors int
}

// patState is a pattern of a Matcher and whether it is done.
type patState struct {
	*Pattern
	once bool
	done bool // a Once pattern that matched
}

// The bounds of Matcher.window. regexp's cost of a search of a short
// text grows with the text it is given, not only with how far it looks
// (its backtracker first clears a bit per byte and instruction), so a
// search of the rest of the region for each candidate line would make
// the work grow with the square of a region: the window shrinks while
// candidates are near each other and grows while they are not.
const (
	minWindow = 256
	maxWindow = 64 << 10
)

// patLit is one literal of pats[pat].
type patLit struct {
	lit literal
	pat int
}

// NewMatcher returns a Matcher of specs that matches lines on their first
// maxLine bytes (maxLine > 0) and calls match with each line that some
// pattern matches.
func NewMatcher(specs []Spec, maxLine int, match func(line []byte, hits []int)) *Matcher {
	m := &Matcher{maxLine: max(maxLine, 1), match: match, live: len(specs), window: minWindow}
	var pres []string
	for i, s := range specs {
		m.pats = append(m.pats, patState{Pattern: s.Pattern, once: s.Once})
		if s.Pattern.lits == nil {
			m.noLit++
			if s.Pattern.pre == nil {
				m.every = true
			} else {
				pres = append(pres, "(?:"+s.Pattern.pre.String()+")")
			}
		}
		for _, lit := range s.Pattern.lits {
			m.lits = append(m.lits, patLit{lit: lit, pat: i})
		}
	}
	if m.noLit > 0 && !m.every {
		pre, err := regexp.Compile(strings.Join(pres, "|"))
		m.pre, m.every = pre, err != nil
	}
	return m
}

// Live returns the number of patterns not yet done.
func (m *Matcher) Live() int { return m.live }

// Done reports whether pattern i is done: a Once pattern that matched.
func (m *Matcher) Done(i int) bool { return m.pats[i].done }

// Lines matches the lines of region, which ends with '\n'. The anchors
// and each live pattern without literals propose their next candidate
// line; the earliest is matched by every pattern, in order. Only the
// candidate lines are split off the region.
func (m *Matcher) Lines(region []byte) {
	if m.live == 0 {
		return
	}
	switch {
	case !m.chosen:
		m.chooseAnchors(region)
	case len(region) >= anchorSample && m.untilAnchors <= 0:
		m.chooseAnchors(region)
	case len(region) >= anchorSample:
		m.untilAnchors--
		fallthrough
	default:
		if m.prune {
			m.pruneAnchors()
		}
	}
	for k := range m.anchors {
		m.anchors[k].next = -1 // not looked for yet
	}
	cand := -1 // the next line the patterns without literals propose
	for pos := 0; pos < len(region) && m.live > 0; {
		at := len(region)
		for k := range m.anchors {
			a := &m.anchors[k]
			if a.next < pos {
				a.next = m.nextLit(a, region, pos)
			}
			at = min(at, a.next)
		}
		if m.noLit > 0 {
			if cand < pos {
				cand = m.next(region, pos)
			}
			at = min(at, cand)
		}
		if at >= len(region) {
			return
		}
		start := bytes.LastIndexByte(region[pos:at], '\n') + 1 + pos
		end := bytes.IndexByte(region[at:], '\n') + at
		m.Line(region[start:end], false)
		pos = end + 1
	}
}

// next returns where in region, at or after pos (a line's start), the
// next line a pattern without literals may match begins to match, or
// len(region) if none can. pre searches a window of whole lines at a
// time (window).
func (m *Matcher) next(region []byte, pos int) int {
	if m.every {
		return pos
	}
	for pos < len(region) {
		end := len(region)
		if pos+m.window < end {
			end = pos + m.window + bytes.IndexByte(region[pos+m.window:], '\n') + 1 // region ends with '\n'
		}
		if loc := m.pre.FindIndex(region[pos:end]); loc != nil {
			m.window = max(minWindow, m.window/2)
			return pos + loc[0]
		}
		m.window = min(maxWindow, 2*m.window)
		pos = end
	}
	return len(region)
}

// Line matches one line (without its newline) against every live pattern
// in order. over says the line was longer than line holds.
func (m *Matcher) Line(line []byte, over bool) {
	if m.live == 0 {
		return
	}
	if !over {
		line = bytes.TrimSuffix(line, []byte{'\r'})
	}
	line = cutLine(line, m.maxLine)
	m.hits = m.hits[:0]
	for k := range m.pats {
		ps := &m.pats[k]
		if ps.done || !ps.matches(line) {
			continue
		}
		m.hits = append(m.hits, k)
		if ps.once {
			ps.done = true
			m.live--
			if ps.lits != nil {
				m.prune = true // its literals need no anchor now
			} else {
				m.noLit--
			}
		}
	}
	if len(m.hits) > 0 {
		m.match(line, m.hits)
	}
}

// cutLine returns the first maxLine bytes of line, less a character cut
// in two at their end, as renderings cut lines.
func cutLine(line []byte, maxLine int) []byte {
	if len(line) <= maxLine {
		return line
	}
	line = line[:maxLine]
	for k := 1; k < utf8.UTFMax && k <= len(line); k++ {
		if utf8.RuneStart(line[len(line)-k]) {
			if r, _ := utf8.DecodeRune(line[len(line)-k:]); r == utf8.RuneError && !utf8.FullRune(line[len(line)-k:]) {
				line = line[:len(line)-k]
			}
			break
		}
	}
	return line
}
