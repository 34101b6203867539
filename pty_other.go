//go:build !unix

package proc

import (
	"os"

	"golang.org/x/xerrors"
)

const ttySupported = false

func openTTY(TermSize) (master, slave *os.File, err error) {
	return nil, nil, xerrors.Errorf("pseudo-terminals are only supported on Unix: %w", ErrUnsupported)
}

func resizeTTY(*os.File, TermSize) error {
	return xerrors.Errorf("pseudo-terminals are only supported on Unix: %w", ErrUnsupported)
}
