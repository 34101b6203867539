//go:build !linux || proc_otherunix

package proc

import "os"

// Activity reads /proc, which only Linux has in the form it needs.
const activitySupported = false

// inputID is empty here: no member is ever seen waiting for input.
type inputID struct{ pipeIno uint64 }

func inputOf(*os.File) inputID { return inputID{} }

// activityLooks keeps nothing here.
type activityLooks struct{}

func (*activityLooks) look(*tree, inputID, bool, bool) (Activity, bool) { return Activity{}, false }

func (*activityLooks) close() {}

func inputPending(*os.File) bool { return false }
