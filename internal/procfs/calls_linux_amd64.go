package procfs

import "golang.org/x/sys/unix"

// The older calls that can wait to read, which amd64 has besides the ones
// every architecture has (scan_linux.go). arm64 has none of them.
func init() {
	readCalls[unix.SYS_POLL] = callPoll
	readCalls[unix.SYS_SELECT] = callSelect
	readCalls[unix.SYS_EPOLL_WAIT] = callEpoll
}
