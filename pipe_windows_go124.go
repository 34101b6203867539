//go:build windows && !go1.25

package proc

import (
	"os"

	"golang.org/x/xerrors"
)

// newPipe returns a pipe as os.Pipe makes it; parent is the read end if
// parentReads. Before Go 1.25 os.NewFile cannot attach an overlapped handle
// to the runtime poller, so the child's stdin takes no deadline here:
// WriteContext to a child that never reads ends only when the child exits
// or Close runs (see pipe_windows.go for Go 1.25 and later).
func newPipe(parentReads bool) (parent, child *os.File, err error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, xerrors.Errorf("pipe: %w", err)
	}
	if parentReads {
		return r, w, nil
	}
	return w, r, nil
}
