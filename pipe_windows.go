//go:build windows && go1.25

package proc

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sync/atomic"

	"golang.org/x/sys/windows"
	"golang.org/x/xerrors"
)

// newPipe returns a pipe whose parent end can be stopped by a deadline.
//
// The child's stdin is a named pipe: the parent's end is opened for
// overlapped I/O, which Go 1.25 and later attach to the runtime poller, so
// SetWriteDeadline ends a write blocked on a child that never reads
// (WriteContext). An anonymous pipe (os.Pipe) is synchronous on Windows and
// takes no deadline. The child's end stays synchronous, as programs expect
// of their standard handles.
//
// The output pipes stay anonymous: closing the parent's end stops a
// blocked read (stopReading).
func newPipe(parentReads bool) (parent, child *os.File, err error) {
	if parentReads {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, nil, xerrors.Errorf("pipe: %w", err)
		}
		return r, w, nil
	}
	return newStdinNamedPipe()
}

// pipeSeq numbers the named pipes of this process.
var pipeSeq atomic.Uint64

// pipeBufSize is the named pipe's buffer: as much as a Linux pipe holds.
const pipeBufSize = 64 << 10

func newStdinNamedPipe() (parent, child *os.File, err error) {
	// The name is unique on the machine: our PID, a counter, and random
	// bits against a squatter guessing it. FILE_FLAG_FIRST_PIPE_INSTANCE
	// makes a name somebody else made fail instead of joining their pipe,
	// and a single instance lets no second client in once ours connected.
	name := fmt.Sprintf(`\\.\pipe\procvisor-%d-%d-%016x`, os.Getpid(), pipeSeq.Add(1), rand.Uint64())
	name16, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, nil, xerrors.Errorf("pipe name: %w", err)
	}
	server, err := windows.CreateNamedPipe(name16,
		windows.PIPE_ACCESS_OUTBOUND|windows.FILE_FLAG_OVERLAPPED|windows.FILE_FLAG_FIRST_PIPE_INSTANCE,
		windows.PIPE_TYPE_BYTE|windows.PIPE_READMODE_BYTE|windows.PIPE_WAIT|windows.PIPE_REJECT_REMOTE_CLIENTS,
		1, pipeBufSize, pipeBufSize, 0, nil)
	if err != nil {
		return nil, nil, xerrors.Errorf("create named pipe: %w", err)
	}
	// Opening the client end connects the pipe; no ConnectNamedPipe is
	// needed. The handle is not inheritable: os/exec makes the child's
	// inheritable copy itself.
	client, err := windows.CreateFile(name16, windows.GENERIC_READ, 0, nil, windows.OPEN_EXISTING, 0, 0)
	if err != nil {
		_ = windows.CloseHandle(server)
		return nil, nil, xerrors.Errorf("open named pipe: %w", err)
	}
	// NewFile sees that server is overlapped and registers it with the
	// poller (Go 1.25).
	return os.NewFile(uintptr(server), "|stdin"), os.NewFile(uintptr(client), "|stdin-child"), nil
}
