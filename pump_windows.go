//go:build windows

package proc

// tryRead is not used on Windows: pipes from os.Pipe are not pollable
// there, so a Read never parks the pump in the network poller. It reports
// an error, and the pump reads as usual.
func tryRead(uintptr, []byte) (n int, again bool, err error) {
	return 0, false, ErrUnsupported
}
