package proc

import (
	"strings"

	"golang.org/x/xerrors"
)

// Signal names a portable signal. On Unix it is delivered to the child's
// whole process group. On Windows, where each child runs in a Job Object,
// Kill terminates the job, and Interrupt and Terminate send CTRL_BREAK to
// the child's console process group (ending the job if the child has no
// console). The zero Signal, like any name but the three below, is invalid
// (ErrInvalid); [ParseSignal] reads one from text.
type Signal string

// The signals proc can deliver.
const (
	Interrupt Signal = "interrupt" // SIGINT; CTRL_BREAK on Windows
	Terminate Signal = "terminate" // SIGTERM; CTRL_BREAK on Windows
	Kill      Signal = "kill"      // SIGKILL; TerminateJobObject on Windows
)

// ParseSignal turns a user-supplied name into a [Signal]. It accepts the
// portable names ("kill", "terminate", "interrupt") and the Unix names with
// or without the SIG prefix ("SIGKILL", "TERM", "int"), in any case.
// Anything else is an error wrapping [ErrInvalid].
func ParseSignal(s string) (Signal, error) {
	name := strings.ToUpper(strings.TrimSpace(s))
	name = strings.TrimPrefix(name, "SIG")
	switch name {
	case "KILL":
		return Kill, nil
	case "TERM", "TERMINATE":
		return Terminate, nil
	case "INT", "INTERRUPT":
		return Interrupt, nil
	}
	return "", xerrors.Errorf("parse signal %q: want kill, terminate or interrupt: %w", s, ErrInvalid)
}

func (s Signal) valid() bool {
	return s == Interrupt || s == Terminate || s == Kill
}
