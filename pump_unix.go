//go:build unix

package proc

import "golang.org/x/sys/unix"

// tryRead reads once from the non-blocking descriptor fd. again reports
// that nothing is there yet (EAGAIN); it allocates nothing, as the pump
// calls it on every chunk.
func tryRead(fd uintptr, p []byte) (n int, again bool, err error) {
	n, err = unix.Read(int(fd), p)
	if err == unix.EAGAIN {
		return 0, true, nil
	}
	return n, false, err
}
