package proc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
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
			if done[i] || !regexp.MustCompile(wa.Pattern).MatchString(l) {
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
		{`(?i)ready`, 0},
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
	text := "foo\nREADY\nready\n12 passed\n\na\nok then\nfail\nABC\n99\nlistening on port 80\nPASS x\nFAIL\nthethen\n"
	for _, tc := range cases {
		lits, pre := prefilter(tc.pattern)
		if len(lits) != tc.lits {
			t.Errorf("prefilter(%q) literals %q; want %d", tc.pattern, lits, tc.lits)
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
// "error") with the three watches of bench's BenchmarkWatch, as the pump
// hands them over: the matching's own cost, without a process.
func BenchmarkWatchScan(b *testing.B) {
	var text []byte
	for i := 0; len(text) < 1<<20; i++ {
		level, msg := "INFO", "served"
		if i%650 == 300 {
			level, msg = "WARN", "error"
		}
		text = fmt.Appendf(text, "2026-11-25T14:%02d:%02d.%03dZ %s http: GET /api/v1/items/%05d 200 %s in 1.%03dms\n",
			i/60%60, i%60, i%1000, level, i, msg, i%1000)
	}
	watches := []Watch{
		{Name: "error", Pattern: `\berror\b`},
		{Name: "ready", Pattern: `listening on port (\d+)`},
		{Name: "done", Pattern: `^(PASS|FAIL)\b`},
	}
	m := NewManager(Options{Clock: quartz.NewMock(b).WithLogger(quartz.NoOpLogger), EventHistory: 16})
	b.Cleanup(func() { _ = m.Close() })
	w, err := newEventWatch(StartRequest{Watch: watches}, DefaultMaxLineLength)
	if err != nil {
		b.Fatal(err)
	}
	w.of(&Process{m: m, info: &Info{ID: "bench"}, done: make(chan struct{})})
	const chunk = 64 << 10
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		b.ReportAllocs()
		for b.Loop() {
			for i := 0; i < len(text); i += chunk {
				w.scan(text[i:min(i+chunk, len(text))])
			}
		}
	})
	// The floor: one pass of IndexByte over the same chunks.
	b.Run("indexbyte", func(b *testing.B) {
		b.SetBytes(int64(len(text)))
		for b.Loop() {
			for i := 0; i < len(text); i += chunk {
				_ = bytes.IndexByte(text[i:min(i+chunk, len(text))], 0)
			}
		}
	})
}
