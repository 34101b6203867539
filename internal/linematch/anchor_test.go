package linematch

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"regexp"
	"testing"
	"time"
	"unicode/utf8"
)

// timeIt returns how long f took, in nanoseconds.
func timeIt(f func()) float64 {
	start := time.Now()
	f()
	return float64(time.Since(start))
}

// indexByte is one IndexByte pass over b, the floor of a scan.
func indexByte(b []byte) int { return bytes.IndexByte(b, 0) }

// TestAnchors: the literals of three patterns a server's log is watched
// with ("error", "listening on port ", "PASS", "FAIL") are found by two
// anchors on log lines where neither occurs often: two passes over the
// output, not one per literal, each stopping rarely.
func TestAnchors(t *testing.T) {
	t.Parallel()
	st, _ := newTestStream(t, []testSpec{{pattern: `\berror\b`}, {pattern: `listening on port (\d+)`}, {pattern: `^(PASS|FAIL)\b`}}, 2048)
	text := logLines(64 << 10)
	st.Write(text)
	if len(st.m.anchors) != 2 {
		t.Fatalf("anchors %+v; want 2", st.m.anchors)
	}
	for _, a := range st.m.anchors {
		if n := bytes.Count(text, []byte{a.c}); n > len(text)/4096 {
			t.Errorf("anchor %q occurs %d times in %d bytes; want a rare one", a.c, n, len(text))
		}
	}
}

// TestChooseAnchorsAsBruteForce: chooseAnchors, which counts what each key
// covers once per round from the literals (keysCovering), chooses the
// anchors the plain greedy choice does (chooseAnchorsBrute, which tries
// every key against every literal), on random literals, with and without
// case, of patterns some of which are done.
func TestChooseAnchorsAsBruteForce(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 5))
	alphabet := []rune("abcABCKSkszZ019 _-é\uFFFD")
	word := func() string {
		b := make([]rune, 1+rng.IntN(6))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return regexp.QuoteMeta(string(b))
	}
	for round := range 300 {
		var specs []testSpec
		for range 1 + rng.IntN(12) {
			pattern := word()
			for range rng.IntN(3) {
				pattern += "|" + word()
			}
			if rng.IntN(3) == 0 {
				pattern = "(?i)" + pattern
			}
			specs = append(specs, testSpec{pattern: pattern, once: true})
		}
		st, _ := newTestStream(t, specs, 2048)
		m := st.m
		for k := range m.pats {
			m.pats[k].done = rng.IntN(4) == 0
		}
		var region []byte
		for n := rng.IntN(2 * anchorSample); len(region) < n; {
			region = utf8.AppendRune(region, alphabet[rng.IntN(len(alphabet))])
		}
		want := fmt.Sprint(chooseAnchorsBrute(m, region))
		m.chooseAnchors(region)
		if got := fmt.Sprint(m.anchors); got != want {
			t.Fatalf("round %d, patterns %+v: anchors %s; want %s", round, specs, got, want)
		}
	}
}

// chooseAnchorsBrute is the greedy choice of chooseAnchors done plainly:
// each key (eachKey) is tried against every literal not yet covered, each
// round, instead of counting the keys that cover each literal.
func chooseAnchorsBrute(m *Matcher, region []byte) []anchor {
	var anchors []anchor
	var need []int
	for i, pl := range m.lits {
		if !m.pats[pl.pat].done {
			need = append(need, i)
		}
	}
	cost := func(c byte) int { return len(region) + anchorHit*bytes.Count(region, []byte{c}) + 1 }
	var chosen [256]bool
	var at [256]int
	for len(need) > 0 {
		var best [2]byte
		bestCovers, bestCost := 0, 0
		m.eachKey(need, func(key [2]byte, pair int) {
			try := chosen
			keyCost := 0
			for _, k := range key[:1+pair] {
				if !try[k] {
					try[k] = true
					keyCost += cost(k)
				}
			}
			covers := 0
			for _, k := range need {
				if _, ok := m.lits[k].lit.coveredBy(&try); ok {
					covers++
				}
			}
			if covers > 0 && (bestCovers == 0 || covers*bestCost > bestCovers*keyCost) {
				best, bestCovers, bestCost = key, covers, keyCost
			}
		})
		anchors, need = m.place(anchors, best, &chosen, &at, need)
	}
	return anchors
}

// BenchmarkChooseAnchors: one choice of the anchors for 64 patterns of a
// literal each, over a 64 KiB region of log lines (chooseAnchors: a count
// per key each round, not a try of each key against each literal).
func BenchmarkChooseAnchors(b *testing.B) {
	specs := make([]testSpec, 64)
	for i := range specs {
		specs[i] = testSpec{pattern: fmt.Sprintf("job %d (done|failed)", i), once: true}
	}
	st, _ := newTestStream(b, specs, 2048)
	region := logLines(64 << 10)
	b.ReportAllocs()
	for b.Loop() {
		st.m.chooseAnchors(region)
	}
}
