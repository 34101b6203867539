package proc

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Rendering (design section 3): Output turns a buffer's stored bytes into
// text, the head, the omission marker, the tail, with long lines cut. It
// copies under the buffer's lock and renders outside it.

// Output is a rendering of a head/tail buffer: the head, then, when bytes
// were dropped, a marker "\n... [omitted N bytes] ...\n", then the tail.
// Truncation is nil when nothing was cut.
type Output struct {
	Text       string      `json:"text"`
	Truncation *Truncation `json:"truncation,omitempty"`
	// marker is where the rendering put the omission marker in Text:
	// [marker[0], marker[1]), or zero when there is none. Output.Plain
	// reads it; nothing searches Text for the marker.
	marker [2]int
}

// Truncation says exactly what a rendering left out. Counts are of stored
// bytes: OmittedBytes == OriginalBytes - RetainedBytes, and cutting long
// lines (LinesCut) never changes OmittedBytes.
type Truncation struct {
	OriginalBytes int64  `json:"original_bytes"`
	RetainedBytes int64  `json:"retained_bytes"`
	OmittedBytes  int64  `json:"omitted_bytes"`
	LinesCut      int    `json:"lines_cut"`
	Strategy      string `json:"strategy"`
}

// lineCutSuffix ends every line that rendering cut short.
const lineCutSuffix = " ... [truncated]"

// Output renders the buffer as text: the head, then, only if bytes were
// omitted, the marker "\n... [omitted N bytes] ...\n", then the tail. With
// nothing omitted head and tail join seamlessly.
//
// At the omission marker, a partial UTF-8 character ending the head and up
// to three continuation bytes starting the tail are left out of the text.
// Every line longer than maxLineLength bytes is cut, backing off to the
// start of a valid UTF-8 character the cut would split, and ends in
// " ... [truncated]"; the cut line, that suffix included, renders in at
// most maxLineLength bytes (with a limit shorter than the suffix, the
// suffix alone). Its newline is kept. The marker ends the line before it
// and is never cut itself.
//
// Truncation is nil unless bytes were omitted or lines were cut. Its byte
// counts describe the stored bytes; what rendering leaves out at the
// marker or by cutting lines does not change them. An empty buffer renders
// as the zero Output.
//
// Output holds the buffer's lock only to copy the stored bytes that a
// Write may still change into a pooled scratch buffer: the tail, and the
// head until bytes were omitted (a finished buffer's, which never change,
// not even that). The rendering and its allocations happen outside it,
// so a reader never holds up a Write for longer than a copy. The last
// rendering is kept and returned again, without a lock, a copy or an
// allocation, as long as nothing was written since; a finished buffer's
// is made once and kept for good (I1), so a final record's text costs
// its bytes twice once it was rendered. Concurrent callers render a
// change once between them: one that finds a rendering of every byte
// written before it began under way waits for that one (microseconds,
// parked) instead of making its own. A call that returns a rendering
// again yields (runtime.Gosched), so that a tight poller lets the pump
// run; while a pump of the same Manager tries its pipe between pollers'
// turns, it also offers its thread's CPU (sched_yield on Linux), which
// no pump asks of a one-off caller. Tight pollers of a Process's buffer
// are paced: while a pump of its Manager reads (pace.go), a call that
// returns the same rendering again after paceStreak (16) such returns in
// a row, each within paceGap (50 µs) of the one before, whoever made
// them, first parks for pacePause (200 µs; about a millisecond when the
// runtime's timers are coarse), then returns the newest rendering.
// Callers share its Truncation, which they must not modify.
func (b *HeadTailBuffer) Output() Output {
	out, _ := b.outputPaced(true)
	return out
}

// outputPaced is Output, and reports whether it paused; a call with paced
// false never pauses (pace.go): Manager.Run's one snapshot, a snapshot's
// stderr after its output paused, and a call right after a pause.
func (b *HeadTailBuffer) outputPaced(paced bool) (Output, bool) {
	for {
		if out, ok, paused := b.output(paced); ok {
			return out, paused
		}
		// The rendering waited for panicked (a bug of ours, recovered by
		// its caller) and was withdrawn: render again.
	}
}

// output is outputPaced, once: ok is false when the rendering it waited
// for was withdrawn because its render panicked.
func (b *HeadTailBuffer) output(paced bool) (out Output, ok, paused bool) {
	at := b.size.Load()
	if r := b.rendered.Load(); r != nil && r.at == at {
		return b.outputAgain(r, paced)
	}
	out, ok = b.renderNew(at)
	return out, ok, false
}

// outputAgain returns r, the rendering of every byte written so far,
// once more: it waits for r if r is being made, and otherwise tells the
// pumps that someone polls faster than the stream changes, and paces or
// yields the caller so that the writer runs.
func (b *HeadTailBuffer) outputAgain(r *rendering, paced bool) (out Output, ok, paused bool) {
	if r.pending.Load() {
		// Being made by another caller: wait for it, parked. Not a
		// poll of an unchanged rendering: the stream changed and
		// this caller shares the rendering of the change.
		r.done.Wait()
		return r.out, !r.broken, false
	}
	if r.broken {
		return Output{}, false, false // withdrawn since it was loaded
	}
	// polled tells the pump that someone polls faster than the
	// stream changes (pump.read); it is only written when it
	// changes, so pollers and pump do not fight over its cache line.
	if !b.polled.Load() {
		b.polled.Store(true)
	}
	// The pumps of the Manager's other records learn of it too: a
	// poller of any record, final ones included, holds a P as much
	// as one of the pump's own record.
	if b.peers != nil && !b.peers.Load() {
		b.peers.Store(true)
	}
	// Nothing was written since: the caller polls faster than the
	// stream changes. A tight poller parks for a moment and looks
	// again (pace.go), so that its thread leaves the CPU to the
	// child and the pump.
	if paced && b.paceDue(&r.polled, time.Since(paceEpoch)) {
		b.pause(&r.polled)
		out, ok, _ := b.output(false)
		return out, ok, true
	}
	// Otherwise yield, so that a poller lets the writer run: a pump
	// whose read returned after the runtime handed its P to a poller
	// waits in the global run queue, which a poller that never
	// yields leaves unvisited for a whole time slice.
	runtime.Gosched()
	if b.stepsAside() {
		yieldThread()
	}
	return r.out, true, false
}

// renderNew renders the bytes stored now, unless a rendering of at least
// the at bytes written before the call is made or being made meanwhile,
// which it returns instead: ok is false when that one was withdrawn
// because its render panicked.
func (b *HeadTailBuffer) renderNew(at int64) (out Output, ok bool) {
	b.mu.Lock()
	if b.total == 0 {
		b.mu.Unlock()
		return Output{}, true
	}
	// Any rendering of at least the at bytes written before this call
	// will do (a snapshot carries more output than its status, never
	// less): one made meanwhile, or one being made. Pollers of a record
	// that changes then render each change once between them, not once
	// each, and wait for it parked, off the Ps the pump needs.
	if r := b.rendered.Load(); r != nil && r.at >= at {
		b.mu.Unlock()
		r.done.Wait()
		return r.out, !r.broken
	}
	total := b.total
	retained := int64(len(b.head) + b.tailLen)
	scratch := renderScratch.Get().(*renderBufs)
	head, first, second := b.renderInputLocked(scratch)
	// Published before it is made: the newest rendering, which callers
	// that need no newer one wait for. rendered only moves forward (the
	// check above found it older than total), so once finished the first
	// rendering of the final bytes stays: every later call returns it.
	r := &rendering{at: total, final: b.finished}
	r.pending.Store(true)
	r.done.Add(1)
	b.rendered.Store(r)
	b.mu.Unlock()
	b.renderPublished(r, head, first, second, retained, scratch)
	renderScratch.Put(scratch)
	return r.out, true
}

// renderInputLocked returns the stored head and the tail's two segments
// as a rendering reads them: in place once the buffer is finished, else
// copied into scratch.in. The caller holds b.mu.
func (b *HeadTailBuffer) renderInputLocked(scratch *renderBufs) (head, first, second []byte) {
	total := b.total
	retained := int64(len(b.head) + b.tailLen)
	head = b.head
	first, second = b.tailSegmentsLocked()
	if !b.finished {
		// The tail changes with the next Write: copy it out. So does
		// the head until it is full; once bytes were omitted it is
		// (they are only ever dropped from the tail) and never changes
		// again, so it is read in place, as a finished buffer's slices
		// are (Finish replaced them once, under the lock we hold).
		buf := scratch.in[:0]
		if total == retained {
			buf = append(buf, head...)
		}
		buf = append(buf, first...)
		buf = append(buf, second...)
		scratch.in = buf
		if total == retained {
			head, buf = buf[:len(head)], buf[len(head):]
		}
		first, second = buf, nil
	}
	return head, first, second
}

// stepsAside reports whether a caller that returns a rendering again
// also offers its thread's CPU (yieldThread): only while a pump of the
// Manager tries its pipe between pollers' turns (pollSignal.pumps), so
// that someone polls tightly. Then the poller's thread steps aside for a
// thread that wants the CPU (a child filling its pipe, a pump's thread
// reading it) and goes on at once when none does. Never otherwise: a
// yield can last a time slice of another thread on a busy machine, which
// a one-off caller must not wait for.
//
// Pollers of a final record can never see anything new; pollers of a
// running record see something new only once the pump, which then needs
// the CPU, has read it: both step aside (BenchmarkPolled measures it).
func (b *HeadTailBuffer) stepsAside() bool {
	return b.peers != nil && b.peers.pumps.Load() > 0
}

// renderPublished makes r, which Output published in rendered, and
// releases the callers waiting for it. If render panics (a bug of ours
// that a caller may recover from), r is withdrawn first, so that no later
// call returns it, not even as a finished buffer's final rendering, and
// its waiters, released with broken set, render for themselves; the
// panic goes on to the caller.
func (b *HeadTailBuffer) renderPublished(r *rendering, head, first, second []byte, retained int64, scratch *renderBufs) {
	made := false
	defer func() {
		if !made {
			b.mu.Lock()
			b.rendered.CompareAndSwap(r, nil)
			b.mu.Unlock()
			r.broken = true
		}
		r.pending.Store(false)
		r.done.Done()
	}()
	scratch.out = b.render(r, head, first, second, retained, scratch.out)
	made = true
}

// rendering is a rendering of the stream when it was at bytes long, with
// its Truncation in the same allocation. done is released once out is
// made: callers that find it in HeadTailBuffer.rendered before wait.
// pending is set while it is being made (the zero rendering is a made
// one); broken, written before done is released, says that its render
// panicked and out is not to be used. final is set for a rendering of a
// finished buffer, which never changes again.
type rendering struct {
	at      int64
	out     Output
	trunc   Truncation
	done    sync.WaitGroup
	pending atomic.Bool
	broken  bool
	final   bool
	// polled paces the callers that return it again (pace.go).
	polled pacer
}

// render renders into r the stored bytes head, first and second (the
// tail's two segments) of a stream of r.at bytes of which retained are
// stored, in one pass through dst (a scratch buffer it returns, grown)
// and one allocation, the text.
func (b *HeadTailBuffer) render(r *rendering, head, first, second []byte, retained int64, dst []byte) []byte {
	total := r.at
	omitted := total - retained

	out := renderState{lineMax: b.lineMax, out: dst[:0]}
	out.render(head, first, second, omitted)

	r.out = Output{Text: string(out.out), marker: out.markerAt}
	if omitted > 0 || out.cuts > 0 {
		r.trunc = Truncation{
			OriginalBytes: total,
			RetainedBytes: retained,
			OmittedBytes:  omitted,
			LinesCut:      out.cuts,
			Strategy:      "head_tail",
		}
		r.out.Truncation = &r.trunc
	}
	return out.out
}

// renderScratch holds the buffers Output copies a running buffer's
// changing bytes into (in) and renders into (out), so that a steady
// poller allocates only the text it returns.
var renderScratch = sync.Pool{New: func() any { return new(renderBufs) }}

// renderBufs is one scratch of renderScratch.
type renderBufs struct{ in, out []byte }

// renderState renders a buffer's text, appending it to out.
type renderState struct {
	lineMax int
	out     []byte
	cuts    int // lines cut
	// markerAt is where the omission marker was rendered (Output.marker).
	markerAt [2]int
}

// render renders head, then the marker if omitted > 0, then the tail given
// as two segments.
func (r *renderState) render(head, tail1, tail2 []byte, omitted int64) {
	if omitted == 0 {
		r.lines(byteSpans{head, tail1, tail2})
		return
	}
	r.lines(byteSpans{trimPartialRune(head)})
	r.marker(omitted)
	tail := byteSpans{tail1, tail2}
	tail.trimContinuation(utf8.UTFMax - 1)
	r.lines(tail)
}

func (r *renderState) marker(omitted int64) {
	r.markerAt[0] = len(r.out)
	r.out = append(r.out, "\n... [omitted "...)
	r.out = strconv.AppendInt(r.out, omitted, 10)
	r.out = append(r.out, " bytes] ...\n"...)
	r.markerAt[1] = len(r.out)
}

// lines renders s, cutting every line longer than lineMax. Text between
// cuts is written in one piece.
func (r *renderState) lines(s byteSpans) {
	n := s.len()
	flushed := 0 // s[:flushed] has been rendered
	for start := 0; n-start > r.lineMax; {
		end := s.indexNewline(start)
		if end < 0 {
			end = n
		}
		window := start + r.lineMax + 1
		if end < window {
			start = s.skipShortLines(end+1, window)
			continue
		}
		// The suffix counts against the limit: the cut line renders in
		// at most lineMax bytes.
		keep := s.runeStartBefore(start+max(r.lineMax-len(lineCutSuffix), 0), start)
		s.writeTo(r, flushed, keep)
		r.out = append(r.out, lineCutSuffix...)
		r.cuts++
		flushed = end // the newline, if any, goes out with the next run
		start = end + 1
	}
	s.writeTo(r, flushed, n)
}

// skipShortLines returns where to look for the next long line. A short
// line ended just before start, and window is one past the last byte it
// could have reached: every line that starts before window and ends inside
// it is short too. Lines are usually much shorter than the limit, so
// jumping past the last newline in the window skips many of them for the
// price of one call. That backward scan goes byte by byte
// (bytes.LastIndexByte is not vectorised), so it only looks at the
// window's last few bytes.
func (s *byteSpans) skipShortLines(start, window int) int {
	const maxBack = 64
	if nl := s.lastNewline(max(start, window-maxBack), window); nl >= 0 {
		return nl + 1
	}
	return start
}

// trimPartialRune drops the bytes of an incomplete UTF-8 character ending
// p: a valid start of a multi-byte character whose remaining bytes were
// never stored.
func trimPartialRune(p []byte) []byte {
	for i := len(p) - 1; i >= 0 && i >= len(p)-(utf8.UTFMax-1); i-- {
		if utf8.RuneStart(p[i]) {
			// FullRune is false exactly for a valid prefix that is too
			// short; it is true for ASCII, complete and invalid bytes.
			if !utf8.FullRune(p[i:]) {
				return p[:i]
			}
			return p
		}
	}
	return p
}

// byteSpans is the concatenation of up to three byte slices, so rendering
// can run over head and ring tail without first copying them together.
// Positions are offsets into the concatenation.
type byteSpans [3][]byte

func (s *byteSpans) len() int {
	return len(s[0]) + len(s[1]) + len(s[2])
}

// at returns the byte at position i < s.len().
func (s *byteSpans) at(i int) byte {
	for _, p := range s {
		if i < len(p) {
			return p[i]
		}
		i -= len(p)
	}
	panic("byteSpans: index out of range")
}

// indexNewline returns the position of the first '\n' at or after from,
// or -1.
func (s *byteSpans) indexNewline(from int) int {
	off := 0
	for _, p := range s {
		if from < off+len(p) {
			if j := bytes.IndexByte(p[max(from-off, 0):], '\n'); j >= 0 {
				return max(from, off) + j
			}
		}
		off += len(p)
	}
	return -1
}

// lastNewline returns the position of the last '\n' in [from, to), or -1.
func (s *byteSpans) lastNewline(from, to int) int {
	off := s.len()
	for i := len(s) - 1; i >= 0; i-- {
		p := s[i]
		off -= len(p)
		lo, hi := max(from-off, 0), min(to-off, len(p))
		if lo >= hi {
			continue
		}
		if j := bytes.LastIndexByte(p[lo:hi], '\n'); j >= 0 {
			return off + lo + j
		}
	}
	return -1
}

// trimContinuation drops up to limit UTF-8 continuation bytes from the
// start of s.
func (s *byteSpans) trimContinuation(limit int) {
	for i := range s {
		for limit > 0 && len(s[i]) > 0 && !utf8.RuneStart(s[i][0]) {
			s[i] = s[i][1:]
			limit--
		}
		if len(s[i]) > 0 {
			return
		}
	}
}

// runeStartBefore returns where to cut s so that the kept text ends before
// position cut without splitting a valid UTF-8 character: cut itself, or
// the start (not before lo) of the valid character that cut falls inside.
func (s *byteSpans) runeStartBefore(cut, lo int) int {
	for i := cut; i >= lo && i > cut-utf8.UTFMax; i-- {
		if !utf8.RuneStart(s.at(i)) {
			continue
		}
		if i == cut {
			return cut
		}
		var buf [utf8.UTFMax]byte
		n := s.copyAt(buf[:], i)
		r, size := utf8.DecodeRune(buf[:n])
		valid := r != utf8.RuneError || size > 1
		if valid && i+size > cut {
			return i
		}
		return cut
	}
	return cut
}

// copyAt copies the bytes of s from position i into dst and returns how
// many it copied.
func (s *byteSpans) copyAt(dst []byte, i int) int {
	n := 0
	for _, p := range s {
		if i < len(p) {
			n += copy(dst[n:], p[i:])
			i = 0
		} else {
			i -= len(p)
		}
		if n == len(dst) {
			break
		}
	}
	return n
}

// writeTo renders the bytes of s between positions from and to.
func (s *byteSpans) writeTo(r *renderState, from, to int) {
	off := 0
	for _, p := range s {
		lo, hi := max(from-off, 0), min(to-off, len(p))
		if lo < hi {
			r.out = append(r.out, p[lo:hi]...)
		}
		off += len(p)
	}
}

// countPolledPump counts a pump of b's Manager in (polled true) or out of
// its signal's pumps.
func (b *HeadTailBuffer) countPolledPump(polled bool) {
	if b.peers == nil {
		return
	}
	if polled {
		b.peers.pumps.Add(1)
	} else {
		b.peers.pumps.Add(-1)
	}
}
