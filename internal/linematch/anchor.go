package linematch

import "bytes"

// anchor is a byte that IndexByte looks for at memory speed on behalf of
// the literals that hold it: only where it occurs are they compared. One
// byte shared by several literals (the 'o' of "error" and of "listening
// on port") makes one pass find them all; a rare one (the first byte,
// which bytes.Index would look for, is often a common one: 'e' of
// "error") makes the pass rarely stop.
type anchor struct {
	c    byte
	lits []litAt
	next int // Lines: where the next candidate starts
}

// litAt is the literal lits[lit], whose byte off is its anchor's.
type litAt struct{ lit, off int }

// The anchors are chosen from the stream itself (chooseAnchors): the bytes
// a region holds fewest of, and that cover most literals. A region of at
// least anchorSample bytes is a sample: the first reads of a command
// often hold a line or two. anchorHit is what one stop of the search
// costs, in bytes the search passes over meanwhile.
const (
	anchorSample = 8 << 10
	anchorEvery  = 256
	anchorHit    = 256
)

// coveredBy reports whether anchors on the bytes in set find l: one of its
// bytes is in set, in each case it may take in the text.
func (l literal) coveredBy(set *[256]bool) (off int, ok bool) {
	for i, c := range l.b {
		if set[c] && (!l.fold || !isLetterASCII(c) || set[c-'a'+'A']) {
			return i, true
		}
	}
	return 0, false
}

// The keys chooseAnchors weighs: a byte (its value), or both cases of an
// ASCII letter (256 + the letter's place in the alphabet).
const numKeys = 256 + 26

func keyIndex(c byte, pair bool) int {
	if pair {
		return 256 + int(c|0x20-'a')
	}
	return int(c)
}

// keysCovering calls add with every key (keyIndex; perhaps more than once)
// that, added to set, makes coveredBy(set) true, for l not covered by set
// alone: the keys holding a byte of l, and for a letter of l that ignores
// case, each key holding the case set lacks.
func (l literal) keysCovering(set *[256]bool, add func(k int)) {
	for _, c := range l.b {
		if !isLetterASCII(c) {
			add(keyIndex(c, false))
			continue
		}
		lower, upper := c|0x20, c&^0x20
		add(keyIndex(c, true)) // both cases
		switch {
		case !l.fold:
			add(keyIndex(c, false))
		case set[lower]:
			add(keyIndex(upper, false))
		case set[upper]:
			add(keyIndex(lower, false))
		}
	}
}

// chooseAnchors chooses the anchors of the literals of the live patterns
// from region, greedily: the key that covers the most literals not yet
// covered for the least cost, a pass over the stream and a stop at each
// occurrence in region for each byte not chosen yet. A key is a byte, or
// both cases of a letter of a literal that ignores case.
func (m *Matcher) chooseAnchors(region []byte) {
	m.chosen, m.prune = true, false
	if len(region) >= anchorSample {
		m.untilAnchors = anchorEvery
	} else {
		m.untilAnchors = 0 // the first sample chooses again
	}
	m.anchors = m.anchors[:0]
	need := make([]int, 0, len(m.lits)) // literals not yet covered
	for i, pl := range m.lits {
		if !m.pats[pl.pat].done {
			need = append(need, i)
		}
	}
	var count [256]int
	for i := range count {
		count[i] = -1 // not counted yet
	}
	cost := func(c byte) int {
		if count[c] < 0 {
			count[c] = bytes.Count(region, []byte{c})
		}
		return len(region) + anchorHit*count[c] + 1
	}
	var chosen [256]bool
	var at [256]int // the index in m.anchors of a chosen byte
	var covers [numKeys]int
	var stamp [numKeys]int // 1 + the literal that last counted the key
	for len(need) > 0 {
		// covers[k]: the literals not yet covered that key k would cover,
		// with the bytes chosen so far; each literal counts a key once.
		covers, stamp = [numKeys]int{}, [numKeys]int{}
		for _, i := range need {
			m.lits[i].lit.keysCovering(&chosen, func(k int) {
				if stamp[k] != i+1 {
					stamp[k] = i + 1
					covers[k]++
				}
			})
		}
		var best [2]byte
		bestCovers, bestCost := 0, 0
		m.eachKey(need, func(key [2]byte, pair int) {
			keyCost := 0
			for _, k := range key[:1+pair] {
				if !chosen[k] {
					keyCost += cost(k)
				}
			}
			n := covers[keyIndex(key[0], pair == 1)]
			if n > 0 && (bestCovers == 0 || n*bestCost > bestCovers*keyCost) {
				best, bestCovers, bestCost = key, n, keyCost
			}
		})
		if bestCovers == 0 {
			break // cannot be: the bytes of a literal cover it
		}
		m.anchors, need = m.place(m.anchors, best, &chosen, &at, need)
	}
}

// eachKey calls f once for each key of the literals need: a byte (pair
// 0), or both cases of a letter of a literal that ignores case (pair 1,
// the lower case first).
func (m *Matcher) eachKey(need []int, f func(key [2]byte, pair int)) {
	var looked [256][2]bool
	for _, i := range need {
		lit := m.lits[i].lit
		for _, c := range lit.b {
			key, pair := [2]byte{c, c}, 0
			if lit.fold && isLetterASCII(c) {
				key, pair = [2]byte{c, c - 'a' + 'A'}, 1
			}
			if looked[c][pair] {
				continue
			}
			looked[c][pair] = true
			f(key, pair)
		}
	}
}

// place chooses the bytes of key (at[c]: the index in anchors of a chosen
// byte), puts each literal of need that the chosen bytes now cover on the
// anchor of its first covered byte (and of its other case, for a letter
// of a literal that ignores case), and returns the anchors and the
// literals still to cover.
func (m *Matcher) place(anchors []anchor, key [2]byte, chosen *[256]bool, at *[256]int, need []int) ([]anchor, []int) {
	for _, c := range key {
		if !chosen[c] {
			chosen[c], at[c] = true, len(anchors)
			anchors = append(anchors, anchor{c: c})
		}
	}
	rest := need[:0]
	for _, i := range need {
		lit := m.lits[i].lit
		off, ok := lit.coveredBy(chosen)
		if !ok {
			rest = append(rest, i)
			continue
		}
		c := lit.b[off]
		anchors[at[c]].lits = append(anchors[at[c]].lits, litAt{lit: i, off: off})
		if lit.fold && isLetterASCII(c) {
			u := c - 'a' + 'A'
			anchors[at[u]].lits = append(anchors[at[u]].lits, litAt{lit: i, off: off})
		}
	}
	return anchors, rest
}

// pruneAnchors takes the literals of patterns that are done out of the
// anchors, and drops the anchors left with none.
func (m *Matcher) pruneAnchors() {
	m.prune = false
	kept := m.anchors[:0]
	for _, a := range m.anchors {
		lits := a.lits[:0]
		for _, la := range a.lits {
			if !m.pats[m.lits[la.lit].pat].done {
				lits = append(lits, la)
			}
		}
		if a.lits = lits; len(lits) > 0 {
			kept = append(kept, a)
		}
	}
	clear(m.anchors[len(kept):])
	m.anchors = kept
}

// nextLit returns where in region, at or after pos (a line's start), the
// next literal of a live pattern that a holds begins, or len(region).
func (m *Matcher) nextLit(a *anchor, region []byte, pos int) int {
	for i := pos; i < len(region); i++ {
		j := bytes.IndexByte(region[i:], a.c)
		if j < 0 {
			break
		}
		i += j
		for _, la := range a.lits {
			pl := &m.lits[la.lit]
			// A literal holds no '\n', so none begins before pos.
			s := i - la.off
			if s >= pos && s+len(pl.lit.b) <= len(region) && !m.pats[pl.pat].done &&
				pl.lit.equal(region[s:s+len(pl.lit.b)]) {
				return s
			}
		}
	}
	return len(region)
}
