package linematch

import "bytes"

// Splitter cuts a stream of chunks into lines for a Sink: the complete
// lines inside a chunk are handed over in place, many at a time; only a
// line that spans chunks is copied, and only its first maxLine+1 bytes
// (one more than is matched, to tell a line of maxLine bytes and a '\r'
// from a longer one). Its buffer grows with the lines it sees, never to
// a size asked for.
type Splitter struct {
	maxLine int
	partial []byte // the current line so far, at most maxLine+1 bytes
	over    bool   // the current line is longer than partial holds
}

// keptLine is the most bytes of a line's buffer a Splitter keeps once
// the line ended: a long line's buffer is let go.
const keptLine = 64 << 10

// NewSplitter returns a Splitter for lines matched on their first maxLine
// bytes (maxLine > 0).
func NewSplitter(maxLine int) *Splitter { return &Splitter{maxLine: max(maxLine, 1)} }

// Split hands the lines b ends to to, and keeps the unterminated end for
// the next call.
func (s *Splitter) Split(b []byte, to Sink) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		s.keep(b)
		return
	}
	if len(s.partial) == 0 && !s.over {
		to.Line(b[:i], false)
	} else {
		s.keep(b[:i])
		s.endLine(to)
	}
	rest := b[i+1:]
	if j := bytes.LastIndexByte(rest, '\n'); j >= 0 {
		to.Lines(rest[:j+1])
		rest = rest[j+1:]
	}
	s.keep(rest)
}

// End hands to the unterminated line the stream ended in, if any.
func (s *Splitter) End(to Sink) {
	if len(s.partial) > 0 || s.over {
		s.endLine(to)
	}
}

func (s *Splitter) endLine(to Sink) {
	to.Line(s.partial, s.over)
	s.partial, s.over = s.partial[:0], false
	if cap(s.partial) > keptLine {
		s.partial = nil
	}
}

// keep adds b to the current line, up to maxLine+1 bytes.
func (s *Splitter) keep(b []byte) {
	room := s.maxLine + 1 - len(s.partial)
	if len(b) > room {
		b, s.over = b[:room], true
	}
	s.partial = append(s.partial, b...)
}

// Stream is a Splitter feeding a Matcher: the whole lines of a stream cut
// into chunks, matched.
type Stream struct {
	split *Splitter
	m     *Matcher
}

// NewStream returns a Stream of specs (see [NewMatcher]).
func NewStream(specs []Spec, maxLine int, match func(line []byte, hits []int)) *Stream {
	return &Stream{split: NewSplitter(maxLine), m: NewMatcher(specs, maxLine, match)}
}

// Write matches the lines b ends, and keeps its unterminated end for the
// next call. Once every pattern is done, it does nothing.
func (st *Stream) Write(b []byte) {
	if st.m.live > 0 {
		st.split.Split(b, st.m)
	}
}

// End matches the unterminated line the stream ended in.
func (st *Stream) End() {
	if st.m.live > 0 {
		st.split.End(st.m)
	}
}

// Matcher returns the Matcher of st.
func (st *Stream) Matcher() *Matcher { return st.m }
