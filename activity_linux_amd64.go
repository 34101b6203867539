package proc

import "golang.org/x/sys/unix"

// The older calls that wait for input, which amd64 has besides the ones
// every architecture has (activity_linux.go). arm64 has none of them.
func init() {
	inputCalls[unix.SYS_POLL] = callPoll
	inputCalls[unix.SYS_SELECT] = callSelect
	inputCalls[unix.SYS_EPOLL_WAIT] = callEpoll
}
