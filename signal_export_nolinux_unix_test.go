//go:build unix && (!linux || proc_otherunix)

package proc

// CanLookChild reports whether this backend can look at a child, stopped
// or a zombie, without reaping it (haltChild, exitsSoon).
const CanLookChild = canLookChild
