//go:build unix && (!linux || proc_otherunix)

package proc_test

// stressSandboxed: TestStress sandboxes on Linux only (macOS's
// sandbox-exec is not verified at runtime here).
func stressSandboxed() bool { return false }
