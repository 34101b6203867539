package sandbox

import (
	"strings"
	"testing"
)

func TestSeatbeltProfile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		p        Policy
		want     []string // lines the profile must hold
		dontWant []string // substrings it must not hold
	}{
		{
			name: "read-only",
			p:    Policy{},
			want: []string{
				"(version 1)", "(deny default)", "(allow file-read*)", "(allow process-exec)", "(allow process-fork)",
				"(allow signal (target same-sandbox))", `    (literal "/dev/null")`, `    (literal "/dev/zero")`,
				"(allow process-info* (target same-sandbox))",
				"(deny file-write-setugid)", "(deny file-write-xattr)", "(deny file-write-flags)",
				`(deny file-read* file-write* (regex #"^/dev/ttys[0-9]+$") (regex #"^/dev/tty[p-w][0-9a-f]$") (literal "/dev/console"))`,
			},
			dontWant: []string{"network", "subpath", "file-ioctl", `(literal "/dev/tty")`},
		},
		{
			name: "workspace-write",
			p:    Policy{WritableRoots: []string{"/Users/me/src", "/private/tmp"}, Network: true},
			want: []string{
				`    (subpath "/Users/me/src")`, `    (subpath "/private/tmp")`, "(allow network*)", "(allow system-socket)",
			},
		},
		{
			name: "tty",
			p:    Policy{TTY: "/dev/ttys003"},
			want: []string{
				`    (literal "/dev/ttys003")`, `    (literal "/dev/tty")`,
				`(allow file-ioctl (literal "/dev/ttys003") (literal "/dev/tty"))`,
				`(allow file-read* file-write* (literal "/dev/ttys003"))`,
			},
			dontWant: []string{"network"},
		},
		{
			name: "quotes",
			p:    Policy{WritableRoots: []string{`/a "b"\c`}},
			want: []string{`    (subpath "/a \"b\"\\c")`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := SeatbeltProfile(tt.p)
			if err != nil {
				t.Fatalf("SeatbeltProfile(%+v) = %v", tt.p, err)
			}
			lines := map[string]bool{}
			for _, l := range strings.Split(got, "\n") {
				lines[l] = true
			}
			for _, w := range tt.want {
				if !lines[w] {
					t.Errorf("SeatbeltProfile(%+v) lacks the line %q:\n%s", tt.p, w, got)
				}
			}
			for _, d := range tt.dontWant {
				if strings.Contains(got, d) {
					t.Errorf("SeatbeltProfile(%+v) holds %q:\n%s", tt.p, d, got)
				}
			}
			if strings.Count(got, "(") != strings.Count(got, ")") {
				t.Errorf("SeatbeltProfile(%+v): unbalanced parentheses:\n%s", tt.p, got)
			}
			// Every write the profile allows is in the one file-write*
			// form, whose paths are exactly the roots and devices, and
			// the record's terminal allowed again after the terminals'
			// deny.
			allows := 0
			for l := range lines {
				if strings.HasPrefix(l, "(allow") && strings.Contains(l, "file-write") {
					allows++
				}
			}
			if want := map[bool]int{false: 1, true: 2}[tt.p.TTY != ""]; allows != want {
				t.Errorf("SeatbeltProfile(%+v): %d rules allow writes, want %d:\n%s", tt.p, allows, want, got)
			}
		})
	}
}

func TestSeatbeltProfileControlCharacter(t *testing.T) {
	t.Parallel()
	for _, p := range []Policy{{WritableRoots: []string{"/tmp/a\nb"}}, {TTY: "/dev/tty\x7f"}} {
		if got, err := SeatbeltProfile(p); err == nil {
			t.Errorf("SeatbeltProfile(%q) = %q, nil; want an error", p.WritableRoots, got)
		}
	}
}
