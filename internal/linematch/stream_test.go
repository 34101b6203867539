package linematch

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/procvisor/proc/internal/linematch/linematchtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testSpec is a pattern of a test, by its source.
type testSpec struct {
	pattern string
	once    bool
}

// compileSpecs compiles specs or fails the test.
func compileSpecs(t testing.TB, specs []testSpec) []Spec {
	t.Helper()
	out := make([]Spec, len(specs))
	for i, s := range specs {
		out[i] = Spec{Pattern: mustCompile(t, s.pattern), Once: s.once}
	}
	return out
}

// mustCompile compiles pattern or fails the test.
func mustCompile(t testing.TB, pattern string) *Pattern {
	t.Helper()
	p, err := Compile(pattern)
	if err != nil {
		t.Fatalf("Compile(%.20q) = %v", pattern, err)
	}
	return p
}

// recorder collects the matches of a Matcher as "index=line".
type recorder struct{ got []string }

func (r *recorder) match(line []byte, hits []int) {
	for _, h := range hits {
		r.got = append(r.got, fmt.Sprintf("%d=%s", h, line))
	}
}

// newTestStream is a Stream of specs that records its matches.
func newTestStream(t testing.TB, specs []testSpec, maxLine int) (*Stream, *recorder) {
	t.Helper()
	r := &recorder{}
	return NewStream(compileSpecs(t, specs), maxLine, r.match), r
}

// wantMatches is the rule (linematchtest.WantMatches), a match named by
// the index of its pattern.
func wantMatches(text string, specs []testSpec, maxLine int) []string {
	rule := make([]linematchtest.Spec, len(specs))
	for i, s := range specs {
		rule[i] = linematchtest.Spec{Name: strconv.Itoa(i), Pattern: s.pattern, Once: s.once}
	}
	return linematchtest.WantMatches(text, rule, maxLine)
}

// TestStream feeds texts to a Stream in chunks cut at every place (and at
// random places), and checks that the matches are those of matching each
// whole line: lines that span chunks, lines longer than maxLine (matched
// on their first maxLine bytes, never half a character), "\r\n" lines, an
// unterminated last line, Once, and several patterns on one line in
// order. The patterns take every path that proposes lines: a literal,
// the pattern without assertions, and every line.
func TestStream(t *testing.T) {
	t.Parallel()
	const maxLine = 16
	specs := []testSpec{
		{pattern: `^ready$`},
		{pattern: `error`},
		{pattern: `(?i)warn\b`},
		{pattern: `\bport \d+$`},
		{pattern: `^x`, once: true},
		{pattern: `é$`},
		{pattern: `^(filler|port|an) `},
		{pattern: `^\d+$`},
		{pattern: `^$|^\pL{3}$`, once: true},
	}
	texts := map[string]string{
		"plain":       "ready\nnot ready\nan error here\nWARN now\nport 80\nx1\nx2\n12\n",
		"crlf":        "ready\r\nerror\r\nport 8080\r\n\r\nwarn\r\n99\r\n",
		"long":        "a line much longer than sixteen bytes with error at the end\nready\n" + strings.Repeat("e", 40) + "error\n",
		"cut-at-16":   "0123456789abcdeé\nport 1234567890\r\nport 12345678901\r\n",
		"cut-char":    "0123456789abcdeé tail\n012345678901234é\n",
		"exact-cr":    "ready\r\n0123456789error\r\n0123456789012error\r\n",
		"no-newline":  "x first\nready",
		"long-last":   "ready\n" + strings.Repeat("z", 100) + "error",
		"empty-lines": "\n\n\nready\n\n",
		"many":        strings.Repeat("filler line\nready\nerror warn port 9\n7\n", 50),
	}
	for name, text := range texts {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want := wantMatches(text, specs, maxLine)
			check := func(cuts []int) {
				t.Helper()
				st, r := newTestStream(t, specs, maxLine)
				prev := 0
				for _, c := range append(cuts, len(text)) {
					st.Write([]byte(text[prev:c]))
					prev = c
				}
				st.End()
				if fmt.Sprint(r.got) != fmt.Sprint(want) {
					t.Fatalf("chunks cut at %v: matches %q; want %q", cuts, r.got, want)
				}
			}
			check(nil)
			for i := 1; i < len(text) && i < 200; i++ {
				check([]int{i})
			}
			rng := rand.New(rand.NewPCG(1, uint64(len(text))))
			for range 50 {
				var cuts []int
				for c := rng.IntN(8); c < len(text); c += 1 + rng.IntN(12) {
					cuts = append(cuts, c)
				}
				check(cuts)
			}
		})
	}
}

// TestStreamLarge: the rule of TestStream on chunks large enough to be
// samples that choose the anchors (anchorSample), whose bytes change from
// part to part of the text (what is rare at first is common later), with
// Once patterns whose end takes their literals out of the anchors.
func TestStreamLarge(t *testing.T) {
	t.Parallel()
	const maxLine = 64
	specs := []testSpec{
		{pattern: `\berror\b`},
		{pattern: `listening on port (\d+)`},
		{pattern: `^(PASS|FAIL)\b`},
		{pattern: `ok\d`, once: true},
		{pattern: `zq|qz`, once: true},
		{pattern: `end$`},
		{pattern: `(?i)\berror\b`},
		{pattern: `(?i)PORT 8`, once: true},
	}
	words := []string{"error", "ERROR", "Error", "listening on port 8", "PASS", "FAIL", "ok7", "zq", "qz", "end", "\r", "é", "o", "A", "x"}
	const fillers = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	rng := rand.New(rand.NewPCG(7, 11))
	var text []byte
	for part := range 6 {
		filler := fillers[part*8 : part*8+12]
		for len(text) < (part+1)*40<<10 {
			switch r := rng.IntN(100); {
			case r < 3:
				text = append(text, words[rng.IntN(len(words))]...)
			case r < 6:
				text = append(text, '\n')
			default:
				text = append(text, filler[rng.IntN(len(filler))])
			}
		}
	}
	want := wantMatches(string(text), specs, maxLine)
	if len(want) < 100 {
		t.Fatalf("only %d matches in the text; the test needs more", len(want))
	}
	for round := range 8 {
		st, r := newTestStream(t, specs, maxLine)
		chooses := 0
		for prev := 0; prev < len(text); {
			c := min(len(text), prev+1+rng.IntN(3*anchorSample))
			before := fmt.Sprint(st.m.anchors)
			st.Write(text[prev:c])
			if fmt.Sprint(st.m.anchors) != before {
				chooses++
			}
			prev = c
		}
		st.End()
		if fmt.Sprint(r.got) != fmt.Sprint(want) {
			t.Fatalf("round %d: %d matches, want %d; first difference at %s", round, len(r.got), len(want), firstDiff(r.got, want))
		}
		if chooses < 2 {
			t.Fatalf("round %d: the anchors were chosen %d times; want them chosen again", round, chooses)
		}
	}
}

// firstDiff describes where got and want first differ.
func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("%d: %q, want %q", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("%d (one is a prefix of the other)", min(len(got), len(want)))
}

// TestSplitterGrows: a Splitter's line buffer grows with the lines it
// sees, not to the line length it matches, and lets a long one go once
// the line ended.
func TestSplitterGrows(t *testing.T) {
	t.Parallel()
	const maxLine = 256 << 20
	st, r := newTestStream(t, []testSpec{{pattern: "hi"}}, maxLine)
	st.Write([]byte("h"))
	st.Write([]byte("i"))
	if c := cap(st.split.partial); c > 1<<10 {
		t.Errorf("after 2 bytes of a line, its buffer holds %d bytes; want it to grow with the line", c)
	}
	st.Write([]byte("\n"))
	st.Write(bytes.Repeat([]byte("x"), 1<<20))
	st.Write([]byte("hi\n"))
	if c := cap(st.split.partial); c > keptLine {
		t.Errorf("after a line of 1 MiB ended, its buffer holds %d bytes; want at most %d", c, keptLine)
	}
	if want := []string{"0=hi", "0=" + strings.Repeat("x", 1<<20) + "hi"}; fmt.Sprint(r.got) != fmt.Sprint(want) {
		t.Errorf("matched %d lines; want 2 (the short one and the long one)", len(r.got))
	}
}

// TestCompileBounds: a pattern of MaxPattern bytes compiles, one byte
// more is a *TooLongError; and extracting the literal of the longest
// pattern copies it once, not once per rune. Not parallel: AllocsPerRun
// refuses to run beside other tests.
func TestCompileBounds(t *testing.T) {
	if _, err := Compile(strings.Repeat("ab", MaxPattern/2)); err != nil {
		t.Errorf("Compile(%d bytes) = %v; want it compiled", MaxPattern, err)
	}
	_, err := Compile(strings.Repeat("a", MaxPattern+1))
	if _, ok := err.(*TooLongError); !ok {
		t.Errorf("Compile(%d bytes) = %v; want a *TooLongError", MaxPattern+1, err)
	}
	for _, pattern := range []string{strings.Repeat("ab", MaxPattern/2), "(?i)" + strings.Repeat("ab", MaxPattern/2-2)} {
		var lits []literal
		allocs := testing.AllocsPerRun(10, func() { lits, _, _ = prefilter(pattern) })
		if allocs > 200 {
			t.Errorf("prefilter of a %d-byte literal made %v allocations; want them not to grow with it", len(pattern), allocs)
		}
		if len(lits) != 1 || len(lits[0].b) != maxLiteral {
			t.Errorf("prefilter(%d bytes) = %d literals; want one of %d bytes", len(pattern), len(lits), maxLiteral)
		}
	}
}
