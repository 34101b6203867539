//go:build !linux || proc_otherunix

package proc

import "os"

// Activity reads /proc, which only Linux has in the form it needs.
const activitySupported = false

// inputID is empty here: no member is ever seen waiting for input.
type inputID struct{ pipeIno uint64 }

func inputOf(*os.File) inputID { return inputID{} }

func treeActivity([]int, inputID, bool) Activity { return Activity{} }

func inputPending(*os.File) bool { return false }
