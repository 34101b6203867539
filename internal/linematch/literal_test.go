package linematch

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// logLines returns about n bytes of whole log lines of about 100 bytes,
// one in 650 of which holds "error", as a busy server prints them.
func logLines(n int) []byte {
	var text []byte
	for i := 0; len(text) < n; i++ {
		level, msg := "INFO", "served"
		if i%650 == 300 {
			level, msg = "WARN", "error"
		}
		text = fmt.Appendf(text, "2026-11-25T14:%02d:%02d.%03dZ %s http: GET /api/v1/items/%05d 200 %s in 1.%03dms\n",
			i/60%60, i%60, i%1000, level, i, msg, i%1000)
	}
	return text
}

// TestWindow: a line matches a pattern exactly when it matches the whole
// line, though the regexp runs only from a window before the literal
// (Pattern.matches): patterns with a bounded part before their literal,
// with \b and \B at the window's edge, with characters of several bytes,
// and patterns that get no window.
func TestWindow(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pattern string
		window  int // -1: none
	}{
		{`\berror\b`, 0},
		{`port (\d+)`, 0},
		{`\d{1,3}x error`, 3 * utf8.UTFMax}, // a class: any character's width
		{`\d{1,3}xerror`, 3 * utf8.UTFMax},
		{`(?:a|bc)\Berr\b`, 2},
		{`.error`, utf8.UTFMax},
		{`[é]?rr`, len("é")},
		{`\b(err)`, 0},
		{`^error`, -1},
		{`(?m)^error`, -1},
		{`.*error`, -1},
		{`x+error`, -1},
		{`(?i)error`, -1},
		{`err|warn`, -1},
		{`\Berr`, 0},
		{`é\berr`, 2},
		// A window that began inside a character (7 bytes before "err"
		// in "😀😀err") would see U+FFFD there.
		{`[\x{FFFD}].?err`, len("\ufffd") + utf8.UTFMax},
		{`\B[\x{FFFD}]r`, -1}, // "r" is a run of the literal "\ufffdr"
		{`[\x{FFFD}]err`, -1}, // "err" is a run of the literal "\ufffderr"
		// The literal is the first maxLiteral bytes of a longer piece,
		// which begins with it.
		{`.` + strings.Repeat("err", 30), utf8.UTFMax},
	}
	pieces := []string{"err", "error", "x", "a", "bc", "1", "22", "_", " ", "é", "\xa9", "\xc3", "ok", "r", "port ", "€", "\ufffd", "1x error", "😀", strings.Repeat("err", 30)}
	rng := rand.New(rand.NewPCG(3, 5))
	lines := make([]string, 20000)
	for i := range lines {
		var b strings.Builder
		for range rng.IntN(10) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		lines[i] = b.String()
	}
	for _, tc := range cases {
		p := mustCompile(t, tc.pattern)
		if p.window != tc.window {
			t.Errorf("pattern %q: window %d; want %d", tc.pattern, p.window, tc.window)
		}
		matched := 0
		for _, l := range lines {
			want := p.re.MatchString(l)
			if got := p.matches([]byte(l)); got != want {
				t.Errorf("pattern %q, line %q: matches %v; want %v", tc.pattern, l, got, want)
			}
			if want {
				matched++
			}
		}
		if matched == 0 || matched == len(lines) {
			t.Errorf("pattern %q matched %d of %d lines: the lines test nothing", tc.pattern, matched, len(lines))
		}
	}
}

// TestPrefilter pins that what proposes candidate lines never misses a
// line the pattern matches: patterns whose assertions mean something
// else in a chunk of many lines than in one line.
func TestPrefilter(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pattern string
		lits    int // required literals found
	}{
		{`ready`, 1},
		{`^listening on port (\d+)$`, 1},
		{`(?i)ready`, 1},
		{`(?i)ok|sKy`, 2},         // "o" and "y": 'k' and 's' have cases beyond ASCII
		{`(?i)(sky|take) off`, 1}, // " off"
		{`(?i)\bſK\b`, 0},
		{`^\d+ passed$`, 1},
		{`\d+$`, 0},
		{`^$`, 0},
		{`\Afoo\z`, 1},
		{`(?m)^a$`, 1},
		{`\bok\b|\bfail`, 2},
		{`^(PASS|FAIL|ok)\b`, 3},
		{`x?(then|fail)`, 2},
		{`(ok|\d)`, 0},
		{`[[:upper:]]{3}`, 0},
		{`(the){2}n`, 1},
	}
	text := "foo\nREADY\nready\n12 passed\n\na\nok then\nfail\nABC\n99\nlistening on port 80\nPASS x\nFAIL\nthethen\n" +
		"O\u212a\nx \u017fKY\nTake OFF\nsk\n"
	for _, tc := range cases {
		lits, pre, _ := prefilter(tc.pattern)
		if len(lits) != tc.lits {
			t.Errorf("prefilter(%q) literals %v; want %d", tc.pattern, lits, tc.lits)
		}
		if lits == nil && pre == nil {
			t.Errorf("prefilter(%q) found neither literals nor a pattern", tc.pattern)
		}
		specs := []testSpec{{pattern: tc.pattern}}
		st, r := newTestStream(t, specs, 2048)
		st.Write([]byte(text))
		want := wantMatches(text, specs, 2048)
		if fmt.Sprint(r.got) != fmt.Sprint(want) || len(want) == 0 {
			t.Errorf("pattern %q: matches %q; want %q (not none)", tc.pattern, r.got, want)
		}
	}
}

// BenchmarkStream writes 64 KiB chunks of log lines (one in 650 holding
// "error") to a Stream, as a pump hands them over. "three" has three
// patterns with literals, "fold" one that ignores case ((?i)\berror\b).
// Each op writes 1 MiB and then makes one IndexByte pass over the same
// chunks (the floor: what one pass over the output costs); "x-indexbyte"
// is the time of the writes over that of the passes, as many passes as
// the matching costs. ns/op is both.
func BenchmarkStream(b *testing.B) {
	text := logLines(1 << 20)
	for _, bc := range []struct {
		name  string
		specs []testSpec
	}{
		{"three", []testSpec{{pattern: `\berror\b`}, {pattern: `listening on port (\d+)`}, {pattern: `^(PASS|FAIL)\b`}}},
		{"fold", []testSpec{{pattern: `(?i)\berror\b`}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			benchStream(b, bc.specs, text)
		})
	}
}

// BenchmarkStreamNoLiteral writes 64 KiB chunks of short lines
// ("n0001234") to a Stream of 64 patterns without a literal (^\d+$: each
// line is a candidate, none matches): what a Beside's goroutine does per
// byte. "x-indexbyte" as in BenchmarkStream.
func BenchmarkStreamNoLiteral(b *testing.B) {
	var text []byte
	for i := 0; len(text) < 1<<20; i++ {
		text = fmt.Appendf(text, "n%07d\n", i)
	}
	specs := make([]testSpec, 64)
	for i := range specs {
		specs[i] = testSpec{pattern: `^\d+$`}
	}
	benchStream(b, specs, text)
}

// benchStream writes text in 64 KiB chunks to a Stream of specs, and
// then makes one IndexByte pass over the same chunks, each op; it
// reports "x-indexbyte", the time of the writes over that of the passes.
func benchStream(b *testing.B, specs []testSpec, text []byte) {
	st := NewStream(compileSpecs(b, specs), 2048, func([]byte, []int) {})
	const chunk = 64 << 10
	var scans, passes float64
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		scans += timeIt(func() {
			for i := 0; i < len(text); i += chunk {
				st.Write(text[i:min(i+chunk, len(text))])
			}
		})
		passes += timeIt(func() {
			for i := 0; i < len(text); i += chunk {
				_ = indexByte(text[i:min(i+chunk, len(text))])
			}
		})
	}
	b.ReportMetric(scans/passes, "x-indexbyte")
}

// TestExactLiteral: a pattern that is one literal is matched by looking
// for it in the line, and only such a pattern: not one with anchors, a
// case to ignore, or U+FFFD (which matches any byte that is no UTF-8);
// either way a line matches exactly when regexp says it does.
func TestExactLiteral(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pattern string
		exact   bool
	}{
		{"ready", true},
		{"(ready)", true},
		{strings.Repeat("x", MaxPattern), true},
		{"^ready$", false},
		{"(?i)ready", false},
		{"re\ufffdady", false},
		{"read+y", false},
		{"", false},
	}
	lines := []string{"ready", "not ready", "READY", "re\xffady", "re\ufffdady", "readdy", "", strings.Repeat("x", MaxPattern+3)}
	for _, tc := range cases {
		p := mustCompile(t, tc.pattern)
		if p.exact != tc.exact {
			t.Errorf("pattern %q: exact %v; want %v", tc.pattern, p.exact, tc.exact)
		}
		for _, l := range lines {
			if got, want := p.matches([]byte(l)), p.re.MatchString(l); got != want {
				t.Errorf("pattern %q, line %q: matches %v; want %v", tc.pattern, l, got, want)
			}
		}
	}
}

// TestNear: patterns with a literal and a small program, or one literal
// exactly, are near; long ones and those without a literal are not.
func TestNear(t *testing.T) {
	t.Parallel()
	for pattern, want := range map[string]bool{
		`\berror\b`:                       true,
		`listening on port (\d+)`:         true,
		strings.Repeat("x", MaxPattern):   true,
		`^\d+$`:                           false,
		`(x)` + strings.Repeat("x", 1000): false,
		`x` + strings.Repeat(`\d?`, 300):  false,
	} {
		p := mustCompile(t, pattern)
		if got := p.Near(); got != want {
			t.Errorf("Near(%.20q) = %v (%d instructions); want %v", pattern, got, p.insts, want)
		}
	}
}
