package proc_test

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/procvisor/proc"
)

// TestPlain pins Plain case by case (design section 18).
func TestPlain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", ""},
		{"plain-text", "hello\nworld\n", "hello\nworld\n"},
		{"no-final-newline", "prompt> ", "prompt> "},
		{"blank-lines", "\n\n", "\n\n"},
		// Carriage return: back to the line's start, later characters overwrite.
		{"cr-longer", "50%\r100%", "100%"},
		{"cr-shorter", "Working\rDo", "Dorking"},
		{"cr-then-newline", "progress\r\nnext\r\n", "progress\nnext\n"},
		{"cr-many", "1\r2\r3\r4", "4"},
		{"cr-line-local", "abc\ndef\rX\n", "abc\nXef\n"},
		// Backspace, cursor back (CSI D), to column (CSI G), forward (CSI C).
		{"backspace", "abc\bX", "abX"},
		{"backspace-at-start", "\b\bab", "ab"},
		{"backspace-bold", "a\bab\bb", "ab"},
		{"cub", "abcdef\x1b[3DX", "abcXef"},
		{"cub-default", "abc\x1b[DX", "abX"},
		{"cub-zero-is-one", "abc\x1b[0DX", "abX"},
		{"cub-past-start", "abc\x1b[99DX", "Xbc"},
		{"cha", "abcdef\x1b[2GX", "aXcdef"},
		{"cha-default", "abcdef\x1b[GX", "Xbcdef"},
		{"cha-past-end", "abc\x1b[99GX", "abcX"},
		{"cuf-over-text", "abcdef\r\x1b[2CX", "abXdef"},
		{"cuf-clamped", "abc\r\x1b[99CX", "abcX"},
		{"cuf-at-end", "abc\x1b[5CX", "abcX"},
		// Erase in line.
		{"el0", "abcdef\x1b[3D\x1b[K", "abc"},
		{"el0-explicit", "abcdef\x1b[3D\x1b[0KX", "abcX"},
		{"el0-then-forward", "abc\x1b[2D\x1b[K\x1b[2Cx", "a  x"},
		{"el1", "abcdef\x1b[3D\x1b[1K", "    ef"},
		{"el1-then-write", "abcdef\r\x1b[3C\x1b[1KX", "   Xef"},
		{"el1-at-end", "abc\x1b[1K", ""},
		{"el2", "abcdef\x1b[2K", ""},
		{"el2-cursor-stays", "abcdef\x1b[2Kxy", "      xy"},
		{"el2-cr", "old text\x1b[2K\rnew", "new"},
		{"el2-then-cuf", "abcdef\x1b[2K\r\x1b[3CX", "   X"},
		{"erase-then-rewrite", "abc\r\x1b[Kxy", "xy"},
		{"el-unknown-mode", "abc\x1b[3D\x1b[5KX", "Xbc"},
		{"erased-trailing-blank-trimmed-written-kept", "ab  \x1b[1D\x1b[K", "ab "},
		// Escape sequences removed.
		{"sgr", "\x1b[1;31mred\x1b[0m plain", "red plain"},
		{"sgr-256", "\x1b[38;5;196mx\x1b[m", "x"},
		{"private-csi", "\x1b[?25lhidden cursor\x1b[?25h", "hidden cursor"},
		{"private-csi-no-effect", "abc\x1b[?2K", "abc"},
		{"intermediate-csi", "abc\x1b[2 qX", "abcX"},
		{"cursor-up-line-local", "one\ntwo\n\x1b[2A\x1b[2Kthree\n", "one\ntwo\nthree\n"},
		{"cup-dropped", "ab\x1b[1;1Hc", "abc"},
		{"osc-bel", "\x1b]0;title\x07text", "text"},
		{"osc-st", "\x1b]0;title\x1b\\text", "text"},
		{"osc-c1-st", "\x1b]0;title\u009ctext", "text"},
		{"osc-hyperlink", "\x1b]8;;http://example.invalid/\x1b\\link\x1b]8;;\x1b\\ after", "link after"},
		{"osc-ended-by-newline", "a\x1b]0;never ended\nnext\n", "a\nnext\n"},
		{"osc-esc-starts-new", "\x1b]0;t\x1b[31mred", "red"},
		{"dcs", "\x1bPq#0;2;0;0;0\x1b\\after", "after"},
		{"apc", "\x1b_Gf=24;data\x1b\\after", "after"},
		{"sos-pm", "\x1bXsos\x1b\\\x1b^pm\x07ok", "ok"},
		{"charset", "\x1b(Bplain\x1b)0", "plain"},
		{"two-byte", "\x1b7saved\x1b8\x1b=\x1b>\x1bM", "saved"},
		{"esc-at-end", "text\x1b", "text"},
		{"esc-bracket-at-end", "text\x1b[12", "text"},
		{"esc-esc", "\x1b\x1b[31mx", "x"},
		{"esc-control", "a\x1b\rb", "b"},
		{"csi-aborted-by-control", "ab\x1b[1\bX", "aX"},
		{"csi-huge-param", "abc\x1b[99999999999999999999DX", "Xbc"},
		// Control characters.
		{"controls-dropped", "a\x00b\x07c\x0bd\x0ce\x7ff", "abcdef"},
		{"tab-kept", "a\tb\n", "a\tb\n"},
		{"tab-one-column", "a\tbc\rXYZ", "XYZc"},
		{"c1-dropped", "a\u0085b\u009bc", "abc"},
		// UTF-8: one column per character.
		{"utf8-kept", "héllo wörld ✓ 日本\n", "héllo wörld ✓ 日本\n"},
		{"utf8-overwrite-narrower", "日本語\rab", "ab語"},
		{"utf8-overwrite-wider", "abc\r日本", "日本c"},
		{"utf8-backspace", "é\bx", "x"},
		{"combining-one-column", "e\u0301x\rab", "abx"},
		{"emoji", "🙂🙂\b😀", "🙂😀"},
		{"progress-blocks", "━━━━      10%\r━━━━━━━━━━ 100%\n", "━━━━━━━━━━ 100%\n"},
		// Invalid bytes kept, except a stray byte joining into a C1 control.
		{"invalid-kept", "a\xffb\xfe\n", "a\xffb\xfe\n"},
		{"invalid-overwrite", "\xff\xfe\rx", "x\xfe"},
		{"truncated-rune", "ab\xe2\x94", "ab\xe2\x94"},
		{"stray-join-dropped", "\xc2\x1b[m\x85x", "\xc2x"},
		{"stray-join-several", "\xc2\x1b[m\x85\x86x", "\xc2x"},
		{"stray-join-edit", "\xc2ab\r\x1b[C\x85", "\xc2b"},
		{"stray-no-join-across-blank", "\xc2ab\x1b[2D\x1b[K\x1b[C\x85", "\xc2 \x85"},
		{"stray-valid-join", "\xc3\x1b[m\xa9", "é"},
		{"nbsp-kept", "a\u00a0b", "a\u00a0b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := proc.Plain(tc.in); got != tc.want {
				t.Errorf("Plain(%q) = %q; want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestPlainWideLine edits a line wider than the cells Plain keeps on the
// stack, so its cells live in the result's allocation after the text.
func TestPlainWideLine(t *testing.T) {
	t.Parallel()
	wide := strings.Repeat("é", 1000)
	for _, tc := range []struct{ name, in, want string }{
		{"overwrite", wide + "\rab", "ab" + wide[4:]},
		{"last-line", "first\n" + wide + "\x1b[1000D\x1b[998C\x1b[K", "first\n" + wide[:2*998]},
		{"erase-middle", "x\n" + wide + "\r\x1b[500C\x1b[1K!", "x\n" + strings.Repeat(" ", 500) + "!" + wide[2*501:]},
		{"followed-by-short", wide + "\r\x1b[2K\n" + "short\n", "\nshort\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := proc.Plain(tc.in); got != tc.want {
				t.Errorf("Plain(%d bytes) = %q...; want %q...", len(tc.in), head(got), head(tc.want))
			}
		})
	}
}

// TestPlainWraps: a line wider than 65,536 columns wraps into rows of
// that width, as a terminal's, and a carriage return, a cursor move or an
// erase then acts on the last row; an edited row that wide keeps the one
// allocation small (it was 12 bytes a column of the line, the cells of
// which now stop at a row).
//
// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
func TestPlainWraps(t *testing.T) {
	const width = 1 << 16
	row := strings.Repeat("x", width)
	for _, tc := range []struct{ name, in, want string }{
		{"exactly-a-row", row + "\rb", "b" + row[1:]},
		{"one-more", row + "y\rb", row + "\nb"},
		{"back-stops-at-the-row", row + "yz\x1b[99D\x1b[Kq\n", row + "\nq\n"},
		{"three-rows", row + row + "tail\rT", row + "\n" + row + "\nTail"},
		{"wide-chars", strings.Repeat("é", width+2) + "\r\x1b[1C!", strings.Repeat("é", width) + "\né!"},
		{"next-line-unwrapped", row + "y\nshort\rS", row + "\ny\nShort"},
	} {
		if got := proc.Plain(tc.in); got != tc.want {
			t.Errorf("%s: Plain(%d bytes) = %d bytes %q...%q; want %d bytes %q...%q", tc.name, len(tc.in),
				len(got), head(got), got[max(0, len(got)-8):], len(tc.want), head(tc.want), tc.want[max(0, len(tc.want)-8):])
		}
	}
	huge := strings.Repeat("x", 4<<20) + "\rb"
	var out string
	if n := testing.AllocsPerRun(2, func() { out = proc.Plain(huge) }); n != 1 {
		t.Errorf("Plain(4 MiB line + \\rb) made %v allocations; want 1", n)
	}
	if want := len(huge) - 2 + (4<<20)/width - 1; len(out) != want || !strings.HasSuffix(out, "\nb"+row[1:]) {
		t.Errorf("Plain(4 MiB line + \\rb) is %d bytes ending %q; want %d ending in a last row \"bxxx...\"", len(out), out[len(out)-8:], want)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out = proc.Plain(huge)
	runtime.ReadMemStats(&after)
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(len(huge))+uint64(len(huge))/4; got > limit {
		t.Errorf("Plain(4 MiB line + \\rb) allocated %d bytes; want at most %d (the output and one row's cells)", got, limit)
	}
}

func head(s string) string {
	if len(s) > 40 {
		return s[:40]
	}
	return s
}

// TestPlainOneAllocation pins one allocation whatever the input, and an
// output never longer than the input.
//
// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
func TestPlainOneAllocation(t *testing.T) {
	for _, in := range []string{
		"plain text\n",
		"\x1b[31mred\x1b[0m\n",
		strings.Repeat("━━━━ 50%\r", 100),
		strings.Repeat("x", 2000) + strings.Repeat("\b", 2000) + "y",
		strings.Repeat("é", 2000) + strings.Repeat("\x1b[1K\x1b[D", 2000),
	} {
		var out string
		if n := testing.AllocsPerRun(10, func() { out = proc.Plain(in) }); n != 1 {
			t.Errorf("Plain(%q...) made %v allocations; want 1", head(in), n)
		}
		if len(out) > len(in) {
			t.Errorf("Plain(%q...) is %d bytes, longer than its %d", head(in), len(out), len(in))
		}
	}
}

// FuzzPlain checks Plain's invariants: it never panics, its output is
// never longer than its input but for the newlines of its wraps, Plain(Plain(s)) == Plain(s), and valid
// UTF-8 stays valid. Seeds: testdata/plain/*.txt and
// testdata/fuzz/FuzzPlain.
func FuzzPlain(f *testing.F) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "plain", "*.txt"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range inputs {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	for _, s := range []string{"", "50%\r100%", "Working\rDo", "\x1b[1K\x1b[2K\x1b[K", "\xc2\x1b[m\x85", "é\b\b\bx", "\x1b]8;;x\x07y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := proc.Plain(in)
		if len(out) > len(in)+len(in)>>16 { // a newline per wrap at most
			t.Fatalf("Plain(%q) = %q: longer than the input", in, out)
		}
		if again := proc.Plain(out); again != out {
			t.Fatalf("Plain(%q) = %q, but Plain of that is %q", in, out, again)
		}
		if utf8.ValidString(in) && !utf8.ValidString(out) {
			t.Fatalf("Plain(%q) = %q: valid UTF-8 became invalid", in, out)
		}
	})
}

// TestPlainGolden keeps Plain's results as files a reviewer can read:
// testdata/plain/<case>.txt is the input, <case>.golden what Plain makes
// of it, and <case>.truncated.golden what Output().Plain() makes of it
// once it went through a buffer keeping 96 bytes of head and of tail
// (the omission marker between the two, kept as it is). `go test -run
// TestPlainGolden -update` rewrites them.
func TestPlainGolden(t *testing.T) {
	t.Parallel()
	inputs, err := filepath.Glob(filepath.Join("testdata", "plain", "*.txt"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs in testdata/plain (%v)", err)
	}
	for _, name := range inputs {
		base := strings.TrimSuffix(name, ".txt")
		t.Run(filepath.Base(base), func(t *testing.T) {
			t.Parallel()
			in, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			b := proc.NewHeadTailBuffer(96, 96, 0)
			_, _ = b.Write(in)
			b.Finish()
			for file, got := range map[string]string{
				base + ".golden":           proc.Plain(string(in)),
				base + ".truncated.golden": b.Output().Plain(),
			} {
				if *updateGolden {
					if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(file)
				if err != nil {
					t.Fatalf("%v (run with -update to create it)", err)
				}
				if got != string(want) {
					t.Errorf("%s differs:\ngot:\n%s\nwant:\n%s", file, got, want)
				}
			}
		})
	}
}

var _ = helper("plain-print", func(args []string) int {
	for _, a := range args {
		_, _ = os.Stdout.WriteString(a)
	}
	return 0
})

// TestOutputPlain runs records that print progress bars, colours and
// more than their buffers keep, and reads Output().Plain(): head and tail
// plain, the marker and Truncation as they are.
func TestOutputPlain(t *testing.T) {
	t.Parallel()
	m := newManager(t, proc.Options{})
	var progress strings.Builder
	for i := 0; i <= 100; i += 5 {
		progress.WriteString("\r\x1b[36mdownloading\x1b[0m " + strings.Repeat("#", i/5) + " " + strconv.Itoa(i) + "%")
	}
	head := "\x1b[1;32mstarting\x1b[0m\n" + progress.String() + "\n"
	filler := strings.Repeat("\x1b[2mfiller line\x1b[0m\n", 100)
	tail := "\x1b]0;title\x07Working\rDone\x1b[K\n\x1b[31merror\x1b[0m: none\n"

	for _, tc := range []struct {
		name      string
		req       proc.StartRequest
		wantPlain string
		omitted   int64
	}{
		{
			name:      "whole",
			req:       helperReq("plain-print", head, tail),
			wantPlain: "starting\ndownloading #################### 100%\nDone\nerror: none\n",
		},
		{
			name: "truncated",
			req: func() proc.StartRequest {
				r := helperReq("plain-print", head, filler, tail)
				r.HeadBytes, r.TailBytes = len(head), len(tail)
				return r
			}(),
			omitted:   int64(len(filler)),
			wantPlain: "starting\ndownloading #################### 100%\n" + "\n... [omitted " + strconv.Itoa(len(filler)) + " bytes] ...\n" + "Done\nerror: none\n",
		},
		{
			name: "marker-inside-lines",
			req: func() proc.StartRequest {
				r := helperReq("plain-print", head, filler, tail)
				r.HeadBytes, r.TailBytes = len(head)+4, len(tail)+3 // cuts mid-line, mid-escape
				return r
			}(),
			omitted: int64(len(filler)) - 7,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t) // the subtest's own: it may wait long for a slot
			p := mustStart(t, m, tc.req)
			snap := waitFinal(ctx, t, p)
			out := snap.Output
			got := out.Plain()
			if tc.wantPlain == "" {
				// Plain of head and tail, each as the rendering cut them.
				marker := "\n... [omitted " + strconv.FormatInt(tc.omitted, 10) + " bytes] ...\n"
				h, tl, ok := strings.Cut(out.Text, marker)
				if !ok {
					t.Fatalf("Output().Text %q has no marker %q", out.Text, marker)
				}
				tc.wantPlain = proc.Plain(h) + marker + proc.Plain(tl)
			}
			if got != tc.wantPlain {
				t.Errorf("Output().Plain() = %q; want %q", got, tc.wantPlain)
			}
			if tc.omitted == 0 && out.Truncation != nil {
				t.Errorf("Truncation = %+v; want nil", *out.Truncation)
			}
			if tc.omitted > 0 && (out.Truncation == nil || out.Truncation.OmittedBytes != tc.omitted) {
				t.Errorf("Truncation = %+v; want %d bytes omitted", out.Truncation, tc.omitted)
			}
			if again := p.Output(); again.Text != out.Text || again.Truncation == nil != (out.Truncation == nil) {
				t.Errorf("Output() changed after Plain(): %q -> %q", out.Text, again.Text)
			}
		})
	}

	// An Output built by hand (or decoded from JSON) has no recorded
	// marker: text that looks like one is plain text like any other.
	fake := proc.Output{Text: "a\rb\n... [omitted 5 bytes] ...\nc\x1b[1mD\n"}
	if got, want := fake.Plain(), "b\n... [omitted 5 bytes] ...\ncD\n"; got != want {
		t.Errorf("hand-built Output.Plain() = %q; want %q", got, want)
	}
}

// Benchmarks of Plain: typical progress-bar output (a line redrawn with
// \r, colours), and 8 MB of backspaces and erases, where a naive cell
// array that shifts or re-blanks goes quadratic. Compare ns/op per MB
// across them (b.SetBytes): all stay linear. Several goroutines run them
// at once (RunParallel), each over the whole input: sustained load.
func BenchmarkPlain(b *testing.B) {
	const size = 8 << 20
	fill := func(unit string) string { return strings.Repeat(unit, size/len(unit)) }
	var bar strings.Builder
	for bar.Len() < size {
		for i := 0; i <= 100; i++ {
			bar.WriteString("\r\x1b[36m" + strings.Repeat("━", i/5) + strings.Repeat(" ", 20-i/5) + "\x1b[0m " + strconv.Itoa(i) + "%")
		}
		bar.WriteString("\ndone\n")
	}
	wide := strings.Repeat("é", 100_000)
	for _, bc := range []struct{ name, in string }{
		{"plain-log", fill("2026-11-25T14:10:00Z INFO request served path=/api/v1/items status=200\n")},
		{"colour-log", fill("\x1b[2m2026-11-25\x1b[0m \x1b[32mINFO\x1b[0m request served \x1b[1mstatus\x1b[0m=200\n")},
		{"progress-bar", bar.String()},
		{"backspaces", "x" + fill("ab\b\b")},
		{"backspaces-long-line", strings.Repeat("x", size/4) + fill("\b")},
		{"erase-prefix-wide-line", wide + fill("\x1b[99999D\x1b[50000C\x1b[1K")},
		{"erase-whole-line", strings.Repeat("y", size/4) + fill("\x1b[2Kz")},
		{"cr-overwrite-wide", wide + fill("\r\x1b[99999Gé")},
		{"overwrite-4MiB-line", strings.Repeat("x", 4<<20) + "\rb"},
		{"overwrite-60k-line", strings.Repeat("x", 60_000) + "\rb"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.in)))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if out := proc.Plain(bc.in); len(out) > len(bc.in)+len(bc.in)>>16 {
						b.Fatal("longer than the input and its wraps")
					}
				}
			})
		})
	}
}

// BenchmarkPlainWriter feeds inputs of BenchmarkPlain to a PlainWriter in
// 4 KiB writes, to io.Discard: its cost per byte against Plain's on the
// whole (BenchmarkPlain), and its allocations, which stay few (its
// buffers are reused from line to line).
func BenchmarkPlainWriter(b *testing.B) {
	const size = 8 << 20
	var bar strings.Builder
	for bar.Len() < size {
		for i := 0; i <= 100; i++ {
			bar.WriteString("\r\x1b[36m" + strings.Repeat("━", i/5) + strings.Repeat(" ", 20-i/5) + "\x1b[0m " + strconv.Itoa(i) + "%")
		}
		bar.WriteString("\ndone\n")
	}
	for _, bc := range []struct{ name, in string }{
		{"plain-log", strings.Repeat("2026-11-25T14:10:00Z INFO request served path=/api/v1/items status=200\n", size/72)},
		{"progress-bar", bar.String()},
		{"progress-bar-no-newline", strings.ReplaceAll(bar.String(), "\n", "\r")},
		{"overwrite-4MiB-line", strings.Repeat("x", 4<<20) + "\rb"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.in)))
			in := []byte(bc.in)
			for b.Loop() {
				w := proc.NewPlainWriter(io.Discard)
				for p := in; len(p) > 0; {
					k := min(len(p), 4096)
					if _, err := w.Write(p[:k]); err != nil {
						b.Fatal(err)
					}
					p = p[k:]
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
