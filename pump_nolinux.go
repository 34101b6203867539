//go:build !linux || proc_otherunix

package proc

import "os"

// growPipe does nothing where pipes cannot be resized: it reports false.
func growPipe(*os.File) bool { return false }
