package linematch

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// FuzzStream: for any patterns (one a line of the first argument, at most
// eight; one that does not compile ends the case), any text, any cuts of
// it into chunks and any line length, a Stream finds what matching each
// whole line of the text finds, and a Beside that keeps pace too.
func FuzzStream(f *testing.F) {
	f.Add("error\n^\\d+$\n(?i)warn\\b", []byte("ready\n12\nan error\r\nWARN x\n"), uint64(1), uint16(16))
	f.Add("^(PASS|FAIL)\\b\n\\bport (\\d+)\n.\\Berr", []byte("PASS\nport 80\r\nxerr\n"+strings.Repeat("é", 20)), uint64(7), uint16(5))
	f.Add("(?i)sky|ok\n^$\n[\\x{FFFD}].?err", []byte("O\u212a\n\n\xffxerr\n\xc3"), uint64(3), uint16(1))
	f.Fuzz(func(t *testing.T, patterns string, text []byte, seed uint64, maxLine uint16) {
		max := 1 + int(maxLine)%300
		var specs []testSpec
		for i, p := range strings.Split(patterns, "\n") {
			if i == 8 {
				break
			}
			if _, err := Compile(p); err != nil {
				return
			}
			specs = append(specs, testSpec{pattern: p, once: seed>>i&1 == 1})
		}
		want := referenceMatches(text, specs, max)
		rng := rand.New(rand.NewPCG(seed, uint64(len(text))))
		st, r := newTestStream(t, specs, max)
		beside := &recorder{}
		b := NewBeside(NewMatcher(compileSpecs(t, specs), max, beside.match), func(lines int64) {
			t.Errorf("Beside skipped %d lines of %d bytes", lines, len(text))
		}, Budget{})
		split := NewSplitter(max)
		for prev := 0; prev < len(text); {
			c := min(len(text), prev+1+rng.IntN(64))
			st.Write(text[prev:c])
			split.Split(text[prev:c], b)
			prev = c
		}
		st.End()
		split.End(b)
		b.Close(nil)
		if fmt.Sprint(r.got) != fmt.Sprint(want) {
			t.Fatalf("patterns %+v, text %q, maxLine %d: matches %q; want %q", specs, text, max, r.got, want)
		}
		if fmt.Sprint(beside.got) != fmt.Sprint(want) {
			t.Fatalf("patterns %+v, text %q, maxLine %d: beside, matches %q; want %q", specs, text, max, beside.got, want)
		}
	})
}

// referenceMatches is the rule applied plainly to the whole text: each
// line without '\n' and a trailing '\r', cut as a Matcher cuts it,
// against each pattern in order with regexp alone.
func referenceMatches(text []byte, specs []testSpec, maxLine int) []string {
	lines := bytes.Split(text, []byte{'\n'})
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	done := make([]bool, len(specs))
	var want []string
	for _, l := range lines {
		l = cutLine(bytes.TrimSuffix(l, []byte{'\r'}), maxLine)
		for i, s := range specs {
			if done[i] || !regexp.MustCompile(s.pattern).Match(l) {
				continue
			}
			want = append(want, fmt.Sprintf("%d=%s", i, l))
			done[i] = s.once
		}
	}
	return want
}
