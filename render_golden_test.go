package proc_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/procvisor/proc"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden renderings in testdata/render")

// TestRenderGolden keeps the renderings of section 3 as files a reviewer
// can read: testdata/render/<case>.golden holds Output().Text, then a line
// "=== truncation ===" and the Truncation as JSON. `go test -run
// TestRenderGolden -update` rewrites them; the diff is then the review.
// TestHeadTailBufferOutput pins the same rules case by case; these files
// show whole renderings, marker and cuts in place.
func TestRenderGolden(t *testing.T) {
	t.Parallel()
	lines := func(from, to int) string {
		var b strings.Builder
		for i := from; i <= to; i++ {
			fmt.Fprintf(&b, "line %d\n", i)
		}
		return b.String()
	}
	for _, tc := range []struct {
		name            string
		head, tail, max int
		writes          []string
	}{
		{"short", 64, 64, 0, []string{"hello\n", "world\n"}},
		{"no-final-newline", 64, 64, 0, []string{"prompt> "}},
		{"empty", 64, 64, 0, nil},
		{"head-and-tail", 32, 32, 0, []string{lines(1, 50)}},
		{"exactly-full", 16, 16, 0, []string{strings.Repeat("a", 16), strings.Repeat("b", 16)}},
		{"one-byte-over", 16, 16, 0, []string{strings.Repeat("a", 16), "X", strings.Repeat("b", 16)}},
		{"crlf", 24, 24, 0, []string{strings.Repeat("progress\r\n", 20)}},
		{"long-line-cut", 4096, 4096, 40, []string{"short\n", strings.Repeat("x", 500) + "\n", "after\n"}},
		{"utf8-line-cut", 4096, 4096, 41, []string{strings.Repeat("é", 100) + "\n"}},
		{"utf8-head-tail-split", 10, 10, 0, []string{strings.Repeat("日本", 20)}},
		{"invalid-utf8", 64, 64, 20, []string{"\xff\xfe\xfd bad bytes and more\n", "ok\n"}},
		{"nul-bytes", 64, 64, 0, []string{"a\x00b\n"}},
		{"many-small-writes", 24, 24, 0, strings.SplitAfter(lines(1, 30), " ")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := proc.NewHeadTailBuffer(tc.head, tc.tail, tc.max)
			for _, w := range tc.writes {
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%d bytes) = %d, %v", len(w), n, err)
				}
			}
			b.Finish()
			out := b.Output()
			trunc, err := json.Marshal(out.Truncation)
			if err != nil {
				t.Fatal(err)
			}
			got := []byte(out.Text + "\n=== truncation ===\n" + string(trunc) + "\n")
			path := filepath.Join("testdata", "render", tc.name+".golden")
			if *updateGolden {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("rendering differs from %s:\ngot:\n%s\nwant:\n%s", path, got, want)
			}
		})
	}
}
