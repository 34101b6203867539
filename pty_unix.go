//go:build unix

package proc

import (
	"os"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

const ttySupported = true

// openTTY opens a pseudo-terminal of the given size. The master is made
// non-blocking and pollable, so that read and write deadlines work on it:
// a PTY master that blocks cannot be stopped by the drain, nor a write to a
// program that never reads.
func openTTY(size TermSize) (master, slave *os.File, err error) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		return nil, nil, xerrors.Errorf("open pty: %w", err)
	}
	defer func() {
		if err != nil {
			_ = ptmx.Close()
			_ = tty.Close()
		}
	}()
	master, err = pollable(ptmx)
	if err != nil {
		return nil, nil, err
	}
	ptmx = master
	if err := resizeTTY(master, size); err != nil {
		return nil, nil, err
	}
	return master, tty, nil
}

// pollable returns a non-blocking, poller-registered copy of f and closes
// f. It reaches the descriptor through SyscallConn, because f.Fd() would
// put f into blocking mode.
func pollable(f *os.File) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, xerrors.Errorf("pty descriptor: %w", err)
	}
	var dup int
	var opErr error
	err = rc.Control(func(fd uintptr) {
		// F_DUPFD_CLOEXEC: close-on-exec from the start, so that a child
		// started at this moment cannot inherit the master.
		dup, opErr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
		if opErr != nil {
			return
		}
		if opErr = unix.SetNonblock(dup, true); opErr != nil {
			_ = unix.Close(dup)
		}
	})
	if err == nil {
		err = opErr
	}
	if err != nil {
		return nil, xerrors.Errorf("make pty non-blocking: %w", err)
	}
	_ = f.Close()
	// os.NewFile registers a non-blocking descriptor with the poller.
	return os.NewFile(uintptr(dup), f.Name()), nil
}

// resizeTTY sets the terminal size; the kernel sends SIGWINCH to the
// terminal's foreground process group.
func resizeTTY(master *os.File, size TermSize) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return xerrors.Errorf("pty descriptor: %w", err)
	}
	var opErr error
	err = rc.Control(func(fd uintptr) {
		opErr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Row: size.Rows, Col: size.Cols})
	})
	if err == nil {
		err = opErr
	}
	if err != nil {
		return xerrors.Errorf("set terminal size: %w", err)
	}
	return nil
}
