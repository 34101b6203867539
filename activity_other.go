//go:build !linux

package proc

import "os"

// Activity reads /proc, which only Linux has in the form it needs.
const activitySupported = false

func inputOf(*os.File) inputID { return inputID{} }

func treeActivity([]int, inputID, bool) Activity { return Activity{} }

func inputPending(*os.File) bool { return false }
