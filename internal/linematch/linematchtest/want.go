// Package linematchtest holds the rule that line matching is checked
// against, applied plainly, for the tests of linematch and of the watches
// built on it.
package linematchtest

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Spec is a pattern as the rule sees it: matches are named Name, and a
// Once pattern matches one line at most.
type Spec struct {
	Name, Pattern string
	Once          bool
}

// WantMatches is the rule, applied line by line to the whole text: each
// line without '\n' and a trailing '\r', cut to maxLine bytes (not
// splitting a character), against each pattern in order. A match is
// "name=line".
func WantMatches(text string, specs []Spec, maxLine int) []string {
	lines := strings.Split(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1] // the text ended with a newline
	}
	done := make([]bool, len(specs))
	res := make([]*regexp.Regexp, len(specs))
	for i, s := range specs {
		res[i] = regexp.MustCompile(s.Pattern)
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
		for i, s := range specs {
			if done[i] || !res[i].MatchString(l) {
				continue
			}
			want = append(want, s.Name+"="+l)
			done[i] = s.Once
		}
	}
	return want
}
