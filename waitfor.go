package proc

import (
	"bytes"
	"context"
	"regexp"

	"golang.org/x/xerrors"
)

// WaitFor: waiting for a line of output.

// waitForLineMax bounds the part of one line that WaitFor matches.
const waitForLineMax = 64 << 10

// WaitFor blocks until a line of the Output stream matches re and returns
// that line, without its newline and a trailing '\r'. It matches lines
// written after the call — including a line begun before the call and
// finished after it — or, with fromStart, every retained line from the
// start. A line whose beginning was not retained is skipped (matching
// resumes after the next newline, never on a fragment); only the first
// 64 KiB of a very long line is matched; an unterminated last line counts
// once the process is final. If the process becomes final without a match
// it returns an error wrapping ErrNotRunning; when ctx ends, one wrapping
// ctx.Err(). It starts no goroutine.
func (p *Process) WaitFor(ctx context.Context, re *regexp.Regexp, fromStart bool) (string, error) {
	if re == nil {
		return "", xerrors.Errorf("wait for in %q: nil regexp: %w", p.info.ID, ErrInvalid)
	}
	var (
		cursor int64
		line   []byte
		// skipping: the current line's beginning is not retained.
		skipping bool
	)
	if !fromStart {
		cursor, line, skipping = p.currentLine()
	}
	matches := func(l []byte) bool {
		return re.Match(bytes.TrimSuffix(l, []byte{'\r'}))
	}
	found := func(l []byte) string {
		return string(bytes.TrimSuffix(l, []byte{'\r'}))
	}
	// WaitFor is a poller: it waits with WaitOutput, whose window keeps
	// the newest bytes while it matches, and never holds the child.
	for {
		c, lineStart := p.out.readSinceLine(cursor, 0)
		c = p.finalEOF(c)
		if c.Lost > 0 {
			// The end of the current line was dropped; so was the beginning
			// of the next, unless the bytes after the gap begin a line.
			line, skipping = line[:0], !lineStart
		}
		data := c.Data
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				if !skipping {
					line = appendCapped(line, data)
				}
				break
			}
			if !skipping {
				line = appendCapped(line, data[:i])
				if matches(line) {
					return found(line), nil
				}
			}
			line, skipping = line[:0], false
			data = data[i+1:]
		}
		cursor = c.Next
		if c.EOF {
			if len(line) > 0 && !skipping && matches(line) {
				return found(line), nil
			}
			return "", xerrors.Errorf("wait for %q in %q: no match before the process ended: %w", re, p.info.ID, ErrNotRunning)
		}
		if err := p.waitStream(ctx, p.out, cursor); err != nil {
			return "", xerrors.Errorf("wait for %q in %q: %w", re, p.info.ID, err)
		}
	}
}

// currentLine finds where the line being written now began: the cursor to
// read on from, the part of the line already retained, and whether its
// beginning is lost. It looks back at most waitForLineMax bytes, and takes
// no byte written after it was called: those are WaitFor's to match.
func (p *Process) currentLine() (cursor int64, line []byte, skipping bool) {
	end := p.out.Len()
	cursor = max(end-waitForLineMax, 0)
	for first := true; cursor < end; first = false {
		c, lineStart := p.out.readSinceLine(cursor, int(end-cursor))
		start := c.Next - int64(len(c.Data)) // the offset of Data[0]
		if first || c.Lost > 0 {
			line, skipping = line[:0], !lineStart
		}
		if start >= end {
			return start, line, skipping // a gap reached past the call
		}
		data := c.Data[:min(int64(len(c.Data)), end-start)]
		if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			line, skipping = append(line[:0], data[i+1:]...), false
		} else if !skipping {
			line = append(line, data...)
		}
		if len(data) == 0 {
			break
		}
		cursor = start + int64(len(data))
	}
	return cursor, line, skipping
}

func appendCapped(line, b []byte) []byte {
	if room := waitForLineMax - len(line); len(b) > room {
		b = b[:max(room, 0)]
	}
	return append(line, b...)
}
