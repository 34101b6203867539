package proc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/quartz"
)

// scanHarness runs an eventWatch as the pump does, without a process:
// feed hands it chunks, end flushes it as finalStep does, and matches
// reads the matched events from the Manager.
type scanHarness struct {
	m *Manager
	w *eventWatch
}

func newScanHarness(t *testing.T, watches []Watch, maxLine int) *scanHarness {
	t.Helper()
	m := NewManager(Options{Clock: quartz.NewMock(t)})
	t.Cleanup(func() { _ = m.Close() })
	w, err := newEventWatch(StartRequest{Watch: watches}, maxLine)
	if err != nil {
		t.Fatalf("newEventWatch(%+v) = %v", watches, err)
	}
	p := &Process{m: m, info: &Info{ID: "scan"}, done: make(chan struct{})}
	w.of(p)
	w.pump = &pump{}
	w.pump.ended.Store(true)
	return &scanHarness{m: m, w: w}
}

func (h *scanHarness) matches() []string {
	evs, _, _ := h.m.Events(0, 0)
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Watch+"="+ev.Line)
	}
	return got
}

// wantMatches is the rule of design section 19, applied line by line to
// the whole text: each line without '\n' and a trailing '\r', cut to
// maxLine bytes (not splitting a character), against each watch in order.
func wantMatches(text string, watches []Watch, maxLine int) []string {
	lines := strings.Split(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1] // the text ended with a newline
	}
	done := make([]bool, len(watches))
	res := make([]*regexp.Regexp, len(watches))
	for i, wa := range watches {
		res[i] = regexp.MustCompile(wa.Pattern)
	}
	var want []string
	for _, l := range lines {
		l = strings.TrimSuffix(l, "\r")
		if len(l) > maxLine {
			l = l[:maxLine]
			for !utf8.ValidString(l) {
				l = l[:len(l)-1]
			}
		}
		for i, wa := range watches {
			if done[i] || !res[i].MatchString(l) {
				continue
			}
			want = append(want, wa.Name+"="+l)
			done[i] = wa.Once
		}
	}
	return want
}

// TestWatchScan feeds texts to the line watches in chunks cut at every
// place (and at random places), and checks that the matches are those of
// matching each whole line: lines that span chunks, lines longer than
// MaxLineLength (matched on their first MaxLineLength bytes, never half a
// character), "\r\n" lines, an unterminated last line, Once, and several
// watches on one line in the request's order. The patterns take every
// path that proposes lines: a literal, the pattern without assertions,
// and every line.
func TestWatchScan(t *testing.T) {
	t.Parallel()
	const maxLine = 16
	watches := []Watch{
		{Name: "ready", Pattern: `^ready$`},
		{Name: "err", Pattern: `error`},
		{Name: "warn", Pattern: `(?i)warn\b`},
		{Name: "port", Pattern: `\bport \d+$`},
		{Name: "first", Pattern: `^x`, Once: true},
		{Name: "end", Pattern: `é$`},
		{Name: "alt", Pattern: `^(filler|port|an) `},
	}
	texts := map[string]string{
		"plain":       "ready\nnot ready\nan error here\nWARN now\nport 80\nx1\nx2\n",
		"crlf":        "ready\r\nerror\r\nport 8080\r\n\r\nwarn\r\n",
		"long":        "a line much longer than sixteen bytes with error at the end\nready\n" + strings.Repeat("e", 40) + "error\n",
		"cut-at-16":   "0123456789abcdeé\nport 1234567890\r\nport 12345678901\r\n",
		"cut-char":    "0123456789abcdeé tail\n012345678901234é\n",
		"exact-cr":    "ready\r\n0123456789error\r\n0123456789012error\r\n",
		"no-newline":  "x first\nready",
		"long-last":   "ready\n" + strings.Repeat("z", 100) + "error",
		"empty-lines": "\n\n\nready\n\n",
		"many":        strings.Repeat("filler line\nready\nerror warn port 9\n", 50),
	}
	for name, text := range texts {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want := wantMatches(text, watches, maxLine)
			check := func(cuts []int) {
				t.Helper()
				h := newScanHarness(t, watches, maxLine)
				prev := 0
				for _, c := range append(cuts, len(text)) {
					h.w.scan([]byte(text[prev:c]))
					prev = c
				}
				h.w.flush()
				if got := h.matches(); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("chunks cut at %v: matches %q; want %q", cuts, got, want)
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

// TestWatchScanLarge: the rule of TestWatchScan on chunks large enough
// to be samples that choose the anchors (anchorSample), whose bytes change
// from part to part of the text (what is rare at first is common later),
// with Once watches whose end takes their literals out of the anchors.
func TestWatchScanLarge(t *testing.T) {
	t.Parallel()
	const maxLine = 64
	watches := []Watch{
		{Name: "error", Pattern: `\berror\b`},
		{Name: "port", Pattern: `listening on port (\d+)`},
		{Name: "done", Pattern: `^(PASS|FAIL)\b`},
		{Name: "once-ok", Pattern: `ok\d`, Once: true},
		{Name: "once-zq", Pattern: `zq|qz`, Once: true},
		{Name: "cr", Pattern: `end$`},
		{Name: "fold", Pattern: `(?i)\berror\b`},
		{Name: "fold-once", Pattern: `(?i)PORT 8`, Once: true},
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
	want := wantMatches(string(text), watches, maxLine)
	if len(want) < 100 {
		t.Fatalf("only %d matches in the text; the test needs more", len(want))
	}
	for round := range 8 {
		h := newScanHarness(t, watches, maxLine)
		chooses := 0
		for prev := 0; prev < len(text); {
			c := min(len(text), prev+1+rng.IntN(3*anchorSample))
			before := fmt.Sprint(h.w.anchors)
			h.w.scan(text[prev:c])
			if fmt.Sprint(h.w.anchors) != before {
				chooses++
			}
			prev = c
		}
		h.w.flush()
		if got := h.matches(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("round %d: %d matches, want %d; first difference at %s", round, len(got), len(want), firstDiff(got, want))
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

// TestWatchAnchors: the literals of BenchmarkWatch's watches ("error",
// "listening on port ", "PASS", "FAIL") are found by two anchors on log
// lines where neither occurs often: two passes over the output, not one
// per literal, each stopping rarely.
func TestWatchAnchors(t *testing.T) {
	t.Parallel()
	watches := []Watch{
		{Name: "error", Pattern: `\berror\b`},
		{Name: "ready", Pattern: `listening on port (\d+)`},
		{Name: "done", Pattern: `^(PASS|FAIL)\b`},
	}
	h := newScanHarness(t, watches, DefaultMaxLineLength)
	text := logLines(64 << 10)
	h.w.scan(text)
	if len(h.w.anchors) != 2 {
		t.Fatalf("anchors %+v; want 2", h.w.anchors)
	}
	for _, a := range h.w.anchors {
		if n := bytes.Count(text, []byte{a.c}); n > len(text)/4096 {
			t.Errorf("anchor %q occurs %d times in %d bytes; want a rare one", a.c, n, len(text))
		}
	}
}

// logLines returns about n bytes of whole log lines of about 100 bytes,
// one in 650 of which holds "error", as BenchmarkWatch's child prints
// them.
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

// TestWatchWindow: a line matches a watch exactly when its pattern matches
// the whole line, though the regexp runs only from a window before the
// literal (lineWatch.matches): patterns with a bounded part before their
// literal, with \b and \B at the window's edge, with characters of
// several bytes, and patterns that get no window.
func TestWatchWindow(t *testing.T) {
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
	}
	pieces := []string{"err", "error", "x", "a", "bc", "1", "22", "_", " ", "é", "\xa9", "\xc3", "ok", "r", "port ", "€", "\ufffd", "1x error", "😀"}
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
		w, err := newEventWatch(StartRequest{Watch: []Watch{{Name: "w", Pattern: tc.pattern}}}, DefaultMaxLineLength)
		if err != nil {
			t.Fatalf("newEventWatch(%q) = %v", tc.pattern, err)
		}
		lw := &w.watches[0]
		if lw.window != tc.window {
			t.Errorf("pattern %q: window %d; want %d", tc.pattern, lw.window, tc.window)
		}
		matched := 0
		for _, l := range lines {
			want := lw.re.MatchString(l)
			if got := lw.matches([]byte(l)); got != want {
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

// TestWatchPrefilter pins that what proposes candidate lines never misses
// a line the pattern matches: patterns whose assertions mean something
// else in a chunk of many lines than in one line.
func TestWatchPrefilter(t *testing.T) {
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
		watches := []Watch{{Name: "w", Pattern: tc.pattern}}
		h := newScanHarness(t, watches, 2048)
		h.w.scan([]byte(text))
		want := wantMatches(text, watches, 2048)
		if got := h.matches(); fmt.Sprint(got) != fmt.Sprint(want) || len(want) == 0 {
			t.Errorf("pattern %q: matches %q; want %q (not none)", tc.pattern, got, want)
		}
	}
}

// BenchmarkWatchScan scans 64 KiB chunks of log lines (one in 650 holding
// "error"), as the pump hands them over: the matching's own cost, without
// a process. "three" has the three watches of bench's BenchmarkWatch,
// "fold" one that ignores case ((?i)\berror\b). Each op scans 1 MiB and
// then makes one IndexByte pass over the same chunks (the floor: what one
// pass over the output costs); "x-indexbyte" is the time of the scans
// over that of the passes, as many passes as the scan costs. ns/op is
// both.
func BenchmarkWatchScan(b *testing.B) {
	text := logLines(1 << 20)
	for _, bc := range []struct {
		name    string
		watches []Watch
	}{
		{"three", []Watch{
			{Name: "error", Pattern: `\berror\b`},
			{Name: "ready", Pattern: `listening on port (\d+)`},
			{Name: "done", Pattern: `^(PASS|FAIL)\b`},
		}},
		{"fold", []Watch{{Name: "error", Pattern: `(?i)\berror\b`}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m := NewManager(Options{EventHistory: 16})
			b.Cleanup(func() { _ = m.Close() })
			w, err := newEventWatch(StartRequest{Watch: bc.watches}, DefaultMaxLineLength)
			if err != nil {
				b.Fatal(err)
			}
			w.of(&Process{m: m, info: &Info{ID: "bench"}, done: make(chan struct{})})
			const chunk = 64 << 10
			var scans, passes time.Duration
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				for i := 0; i < len(text); i += chunk {
					w.scan(text[i:min(i+chunk, len(text))])
				}
				mid := time.Now()
				for i := 0; i < len(text); i += chunk {
					_ = bytes.IndexByte(text[i:min(i+chunk, len(text))], 0)
				}
				scans, passes = scans+mid.Sub(start), passes+time.Since(mid)
			}
			b.ReportMetric(float64(scans)/float64(passes), "x-indexbyte")
		})
	}
}

// TestChooseAnchorsAsBruteForce: chooseAnchors, which counts what each key
// covers once per round from the literals (keysCovering), chooses the
// anchors the plain greedy choice does (chooseAnchorsBrute, which tries
// every key against every literal), on random literals, with and without
// case, of watches some of which are done.
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
		var watches []Watch
		for i := range 1 + rng.IntN(12) {
			pattern := word()
			for range rng.IntN(3) {
				pattern += "|" + word()
			}
			if rng.IntN(3) == 0 {
				pattern = "(?i)" + pattern
			}
			watches = append(watches, Watch{Name: fmt.Sprint(i), Pattern: pattern, Once: true})
		}
		h := newScanHarness(t, watches, DefaultMaxLineLength)
		for k := range h.w.watches {
			h.w.watches[k].done = rng.IntN(4) == 0
		}
		var region []byte
		for n := rng.IntN(2 * anchorSample); len(region) < n; {
			region = utf8.AppendRune(region, alphabet[rng.IntN(len(alphabet))])
		}
		want := fmt.Sprint(chooseAnchorsBrute(h.w, region))
		h.w.chooseAnchors(region)
		if got := fmt.Sprint(h.w.anchors); got != want {
			t.Fatalf("round %d, watches %+v: anchors %s; want %s", round, watches, got, want)
		}
	}
}

// chooseAnchorsBrute is the greedy choice of chooseAnchors done plainly:
// each key is tried against every literal not yet covered, each round.
func chooseAnchorsBrute(w *eventWatch, region []byte) []anchor {
	var anchors []anchor
	var need []int
	for i, wl := range w.lits {
		if !w.watches[wl.watch].done {
			need = append(need, i)
		}
	}
	cost := func(c byte) int { return len(region) + anchorHit*bytes.Count(region, []byte{c}) + 1 }
	var chosen [256]bool
	var at [256]int
	for len(need) > 0 {
		var best [2]byte
		bestCovers, bestCost := 0, 0
		var looked [256][2]bool
		for _, i := range need {
			lit := w.lits[i].lit
			for _, c := range lit.b {
				key, pair := [2]byte{c, c}, 0
				if lit.fold && isLetterASCII(c) {
					key, pair = [2]byte{c, c - 'a' + 'A'}, 1
				}
				if looked[c][pair] {
					continue
				}
				looked[c][pair] = true
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
					if _, ok := w.lits[k].lit.coveredBy(&try); ok {
						covers++
					}
				}
				if covers > 0 && (bestCovers == 0 || covers*bestCost > bestCovers*keyCost) {
					best, bestCovers, bestCost = key, covers, keyCost
				}
			}
		}
		for _, c := range best {
			if !chosen[c] {
				chosen[c], at[c] = true, len(anchors)
				anchors = append(anchors, anchor{c: c})
			}
		}
		rest := need[:0]
		for _, i := range need {
			lit := w.lits[i].lit
			off, ok := lit.coveredBy(&chosen)
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
		need = rest
	}
	return anchors
}

// BenchmarkChooseAnchors: one choice of the anchors for MaxWatches watches
// of a literal each, over a 64 KiB region of log lines (chooseAnchors: a
// count per key each round, not a try of each key against each literal).
func BenchmarkChooseAnchors(b *testing.B) {
	watches := make([]Watch, MaxWatches)
	for i := range watches {
		watches[i] = Watch{Name: fmt.Sprint(i), Pattern: fmt.Sprintf("job %d (done|failed)", i), Once: true}
	}
	w, err := newEventWatch(StartRequest{Watch: watches}, DefaultMaxLineLength)
	if err != nil {
		b.Fatal(err)
	}
	region := logLines(64 << 10)
	b.ReportAllocs()
	for b.Loop() {
		w.chooseAnchors(region)
	}
}

// TestWatchLineBufferGrows: the line buffer of a watch grows with the
// lines it sees, not to MaxLineLength: a request at the cap holds what
// its output wrote.
func TestWatchLineBufferGrows(t *testing.T) {
	t.Parallel()
	h := newScanHarness(t, []Watch{{Name: "a", Pattern: "hi"}}, DefaultMaxBufferBytes)
	h.w.scan([]byte("h"))
	h.w.scan([]byte("i"))
	if c := cap(h.w.partial); c > 1<<10 {
		t.Errorf("after 2 bytes of a line, its buffer holds %d bytes; want it to grow with the line", c)
	}
	h.w.scan([]byte("\n"))
	if got := h.matches(); len(got) != 1 || got[0] != "a=hi" {
		t.Errorf("matches %q; want [a=hi]", got)
	}
}

// TestRequiredLiteralsLinear: the literal of a long pattern is copied
// once, not once per rune. Not parallel: AllocsPerRun refuses to run
// beside other tests.
func TestRequiredLiteralsLinear(t *testing.T) {
	tree, err := syntax.Parse(strings.Repeat("ab", MaxWatchPattern/2), syntax.Perl)
	if err != nil {
		t.Fatal(err)
	}
	var lits []literal
	allocs := testing.AllocsPerRun(10, func() { lits = requiredLiterals(tree) })
	if allocs > 32 {
		t.Errorf("requiredLiterals of a %d-byte literal made %v allocations; want a few", MaxWatchPattern, allocs)
	}
	if len(lits) != 1 || len(lits[0].b) != MaxWatchPattern {
		t.Errorf("requiredLiterals = %d literals; want one of %d bytes", len(lits), MaxWatchPattern)
	}
}
