//go:build !linux || proc_otherunix

package proc

// yieldThread is a no-op where the thread is not offered up.
func yieldThread() {}
