package proc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/procvisor/proc"
)

func headTailMarker(n int) string {
	return fmt.Sprintf("\n... [omitted %d bytes] ...\n", n)
}

func TestHeadTailBufferOutput(t *testing.T) {
	t.Parallel()

	// hugeLines is 1 MiB of 64-byte lines, so that head and tail of the
	// default sizes end on line boundaries.
	var hugeLines strings.Builder
	for i := 0; hugeLines.Len() < 1<<20; i++ {
		fmt.Fprintf(&hugeLines, "line %058d\n", i)
	}
	huge := hugeLines.String()

	var small strings.Builder
	for i := range 100 {
		small.WriteByte(byte('a' + i%26))
	}
	smalls := small.String()

	tests := []struct {
		name                string
		head, tail, lineMax int
		writes              []string
		want                string
		wantTrunc           *proc.Truncation
	}{
		{"empty", 0, 0, 0, nil, "", nil},
		{"under-head", 16, 16, 0, []string{"hello\n"}, "hello\n", nil},
		{"under-head-plus-tail", 4, 16, 0, []string{"hello\n", "world\n"}, "hello\nworld\n", nil},
		{"exact-head+tail", 4, 4, 0, []string{"abcdefgh"}, "abcdefgh", nil},
		{"omitted-middle", 4, 4, 0, []string{"abcd", "0123456789", "wxyz"}, "abcd" + headTailMarker(10) + "wxyz", headTailTrunc(18, 8, 0)},
		{"omitted-one-byte", 4, 4, 0, []string{"abcd.wxyz"}, "abcd" + headTailMarker(1) + "wxyz", headTailTrunc(9, 8, 0)},
		// The head ends with the first byte of "€" (e2 82 ac).
		{"utf8-seam-head", 5, 4, 0, []string{"abcd€", "0123456789", "wxyz"}, "abcd" + headTailMarker(12) + "wxyz", headTailTrunc(21, 9, 0)},
		// The head ends with two bytes of "😀" (f0 9f 98 80).
		{"utf8-seam-head-4-byte", 6, 3, 0, []string{"abcd😀", "0123456789", "xyz"}, "abcd" + headTailMarker(12) + "xyz", headTailTrunc(21, 9, 0)},
		// The tail starts with the last two bytes of "€".
		{"utf8-seam-tail", 4, 5, 0, []string{"abcd", "0123456789", "€xyz"}, "abcd" + headTailMarker(11) + "xyz", headTailTrunc(20, 9, 0)},
		// Complete characters at both ends of the seam stay.
		{"utf8-seam-complete", 5, 5, 0, []string{"abcé", "0123456789", "éxyz"}, "abcé" + headTailMarker(10) + "éxyz", headTailTrunc(20, 10, 0)},
		// Invalid bytes are not characters: nothing to trim.
		{"invalid-utf8-seam", 4, 4, 0, []string{"abc\xff", "0123456789", "\xfexyz"}, "abc\xff" + headTailMarker(10) + "\xfexyz", headTailTrunc(18, 8, 0)},
		{"long-line-cut", 64, 64, 24, []string{"short\n0123456789abcdef0123456789\nend"}, "short\n01234567 ... [truncated]\nend", headTailTrunc(36, 36, 1)},
		{"long-line-exactly-max", 64, 64, 8, []string{"01234567\n01234567"}, "01234567\n01234567", nil},
		{"long-last-line", 64, 64, 20, []string{"ab\n0123456789abcdefghij!"}, "ab\n0123 ... [truncated]", headTailTrunc(24, 24, 1)},
		// The cut at 8 bytes (24 less the suffix) lands inside "é"
		// (bytes 7-8).
		{"long-line-utf8", 64, 64, 24, []string{"abcdefgéhij0123456789abcdef\n", "abcdefghé0123456789abcdef\n"}, "abcdefg ... [truncated]\nabcdefgh ... [truncated]\n", headTailTrunc(56, 56, 2)},
		// Invalid bytes are cut wherever the limit falls.
		{"long-line-invalid-utf8", 64, 64, 20, []string{"abc\xe2\x82x0123456789abcdef\n"}, "abc\xe2 ... [truncated]\n", headTailTrunc(23, 23, 1)},
		// Nothing omitted: the line "abcdefghij..." starts in the
		// head and ends in the tail, and is cut as one line.
		{"line-spanning-seam", 4, 40, 22, []string{"ab", "cdefghij0123456789abcdef\nxy"}, "abcdef ... [truncated]\nxy", headTailTrunc(29, 29, 1)},
		// "€" spans head and tail, and the cut at 4 falls inside it.
		{"line-spanning-seam-utf8", 4, 32, 20, []string{"abc€def0123456789abcdef"}, "abc ... [truncated]", headTailTrunc(25, 25, 1)},
		{"no-invented-newline", 4, 8, 64, []string{"abc€def"}, "abc€def", nil},
		// The marker ends the head's last line; each side is cut
		// on its own and the marker never is.
		{"long-lines-around-marker", 24, 24, 20, []string{"abcd" + strings.Repeat("x", 20), "XXXX", "ijkl" + strings.Repeat("y", 20)}, "abcd ... [truncated]" + headTailMarker(4) + "ijkl ... [truncated]", headTailTrunc(52, 48, 2)},
		{"huge-single-write", 0, 0, 0, []string{huge}, huge[:16384] + headTailMarker(len(huge)-32768) + huge[len(huge)-16384:], headTailTrunc(int64(len(huge)), 32768, 0)},
		{"huge-write-after-tail-filled", 4, 4, 0, []string{"abcd12345", strings.Repeat("-", 100) + "wxyz"}, "abcd" + headTailMarker(105) + "wxyz", headTailTrunc(113, 8, 0)},
		{"many-small-writes", 8, 8, 0, strings.Split(smalls, ""), smalls[:8] + headTailMarker(84) + smalls[92:], headTailTrunc(100, 16, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := proc.NewHeadTailBuffer(tt.head, tt.tail, tt.lineMax)
			for _, w := range tt.writes {
				n, err := b.Write([]byte(w))
				if n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v; want %d, nil", w, n, err, len(w))
				}
			}
			got := b.Output()
			if got.Text != tt.want {
				t.Errorf("Output() = %q; want %q", got.Text, tt.want)
			}
			if g, w := headTailTruncString(got.Truncation), headTailTruncString(tt.wantTrunc); g != w {
				t.Errorf("Output().Truncation = %s; want %s", g, w)
			}

			// Finishing changes the storage, never the rendering.
			b.Finish()
			if again := b.Output(); again.Text != got.Text ||
				headTailTruncString(again.Truncation) != headTailTruncString(got.Truncation) {
				t.Errorf("Output() after Finish = %q, %s; want %q, %s", again.Text,
					headTailTruncString(again.Truncation), got.Text, headTailTruncString(got.Truncation))
			}
		})
	}
}

// headTailTrunc builds the expected Truncation from the bytes written, the
// bytes retained and the number of lines cut.
func headTailTrunc(original, retained int64, linesCut int) *proc.Truncation {
	return &proc.Truncation{
		OriginalBytes: original,
		RetainedBytes: retained,
		OmittedBytes:  original - retained,
		LinesCut:      linesCut,
		Strategy:      "head_tail",
	}
}

func headTailTruncString(tr *proc.Truncation) string {
	if tr == nil {
		return "nil"
	}
	return fmt.Sprintf("%+v", *tr)
}

func TestHeadTailBufferDefaults(t *testing.T) {
	t.Parallel()
	b := proc.NewHeadTailBuffer(0, -1, 0)
	line := strings.Repeat("x", 2049) + "\n"
	head := line + strings.Repeat("y\n", (16384-len(line))/2)
	tail := strings.Repeat("z\n", 16384/2)
	data := head + "-------" + tail
	if _, err := b.Write([]byte(data)); err != nil {
		t.Fatalf("Write: %v", err)
	}
	got := b.Output()
	// The cut line, suffix included, takes at most 2048 bytes.
	want := strings.Repeat("x", 2048-16) + " ... [truncated]" + head[2049:] + headTailMarker(7) + tail
	if got.Text != want {
		t.Errorf("Output() = %q; want %q", got.Text, want)
	}
	if g, w := headTailTruncString(got.Truncation), headTailTruncString(headTailTrunc(int64(len(data)), 32768, 1)); g != w {
		t.Errorf("Output().Truncation = %s; want %s", g, w)
	}
}

// TestHeadTailBufferOutputReused pins the reuse of a rendering: Output of a
// buffer nothing was written to since returns the same rendering (the
// same Truncation), a Write makes the next Output render anew, and every
// rendering equals that of a fresh buffer holding the same stream, before
// and after Finish; a finished buffer's rendering is made once.
func TestHeadTailBufferOutputReused(t *testing.T) {
	t.Parallel()
	const head, tail, lineMax = 8, 8, 6
	b := proc.NewHeadTailBuffer(head, tail, lineMax)
	var stream []byte
	fresh := func() proc.Output {
		f := proc.NewHeadTailBuffer(head, tail, lineMax)
		_, _ = f.Write(stream)
		return f.Output()
	}
	check := func(when string, got proc.Output) {
		t.Helper()
		want := fresh()
		if got.Text != want.Text || headTailTruncString(got.Truncation) != headTailTruncString(want.Truncation) {
			t.Errorf("%s: Output() = %q %s; want %q %s", when, got.Text, headTailTruncString(got.Truncation), want.Text, headTailTruncString(want.Truncation))
		}
	}
	var last proc.Output
	for i, w := range []string{"abcdefghij\n", "klmnopqrstuvwxyz", "0123\n", "é€😀\n"} {
		_, _ = b.Write([]byte(w))
		stream = append(stream, w...)
		first := b.Output()
		check(fmt.Sprintf("after write %d", i), first)
		if last.Truncation != nil && first.Truncation == last.Truncation {
			t.Errorf("after write %d: Output() returned the rendering of before the write", i)
		}
		again := b.Output()
		check(fmt.Sprintf("again after write %d", i), again)
		if first.Truncation == nil || again.Truncation != first.Truncation {
			t.Errorf("after write %d: a second Output() rendered again; want the first rendering reused", i)
		}
		last = again
	}
	b.Finish()
	final := b.Output()
	check("after Finish", final)
	if again := b.Output(); final.Truncation == nil || again.Truncation != final.Truncation {
		t.Errorf("after Finish: a second Output() rendered again; want the final rendering made once (I1)")
	}
}

func TestMaxLineLength(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("y", 100)
	req := func(maxLine int) proc.StartRequest {
		r := cvReq("out:"+long+`\n`, "err:"+long+`\n`)
		r.SeparateStderr = true
		r.MaxLineLength = maxLine
		return r
	}
	for _, tc := range []struct {
		name           string
		manager, asked int
		cut            bool
	}{
		{"request-cuts", 4096, 40, true},
		{"zero-takes-managers", 40, 0, true},
		{"request-longer-than-managers", 40, 500, false},
		{"neither-cuts", 4096, 0, false},
	} {
		withManager(t, tc.name, proc.Options{MaxLineLength: tc.manager}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
			snap, err := m.Run(ctx, req(tc.asked))
			if err != nil {
				t.Fatalf("Run = %v", err)
			}
			for _, out := range []struct {
				name string
				o    proc.Output
			}{{"Output", snap.Output}, {"Stderr", snap.Stderr}} {
				cut := out.o.Truncation != nil && out.o.Truncation.LinesCut == 1 && strings.Contains(out.o.Text, "[truncated]")
				if cut != tc.cut || (!tc.cut && out.o.Text != long+"\n") {
					t.Errorf("%s with Options.MaxLineLength %d, request %d = %q, truncation %+v; want the line cut: %v",
						out.name, tc.manager, tc.asked, out.o.Text, out.o.Truncation, tc.cut)
				}
			}
		})
	}

	t.Run("negative", func(t *testing.T) {
		t.Parallel()
		m := newManager(t, proc.Options{})
		mgrWantRefused(t, m, m, "Start(MaxLineLength -1)", req(-1), proc.ErrInvalid, "MaxLineLength", "-1")
	})
}
