//go:build unix

package main

import (
	"bytes"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		args []string
		out  string
		code int
	}{
		{"screen-and-exit-code", []string{"-rows", "5", "-cols", "20", "--", "sh", "-c", `printf 'Working\rDo\n\033[31mred\033[0m\n'; exit 3`}, "Dorking\nred\n", 3},
		{"scrollback", []string{"-rows", "3", "-scrollback", "2", "--", "seq", "6"}, "3\n4\n5\n6\n", 0},
		{"not-found", []string{"--", "procscreen-no-such-command"}, "", exitNotFound},
		{"usage", []string{"-rows", "0", "--", "true"}, "", exitUsage},
		{"help", []string{"-h"}, "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			if code := run(c.args, &out, &errOut); code != c.code || out.String() != c.out {
				t.Errorf("run(%q) = %d, %q; want %d, %q (stderr %q)", c.args, code, out.String(), c.code, c.out, errOut.String())
			}
		})
	}
}
