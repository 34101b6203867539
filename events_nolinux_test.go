//go:build !linux || proc_otherunix

package proc_test

import "github.com/procvisor/proc"

// watchActivityErr is what a start with WatchActivity returns here:
// activity is Linux only.
var watchActivityErr = proc.ErrUnsupported
