//go:build (!linux || proc_otherunix) && !darwin

package proc

import (
	"os/exec"

	"golang.org/x/xerrors"
)

// The sandbox needs Linux (Landlock, seccomp) or macOS (sandbox-exec):
// elsewhere every sandboxed start fails with ErrUnsupported.

type (
	sandboxSteps  struct{}
	sandboxKernel struct{}
)

func probeSandbox(sandboxSteps) (sandboxKernel, error, bool) {
	return sandboxKernel{}, xerrors.New("sandbox: needs Linux (Landlock and seccomp) or macOS (sandbox-exec)"), true
}

func describeSandbox(sandboxKernel, *Sandbox) string { return "" }

// sandboxStart is never used: the probe refuses every policy.
type sandboxStart struct {
	sb     *Sandbox
	kernel sandboxKernel
}

func (s *sandboxStart) start(*treeSetup, *exec.Cmd, func() error, bool) (func(), error) {
	return nil, xerrors.Errorf("sandbox: %w", ErrUnsupported)
}

// rootThroughSymlink: there is no sandbox here to redirect.
func rootThroughSymlink(string) (string, bool) { return "", false }

func kernelAllows(sandboxKernel, *Sandbox) error { return nil }

func closeSandboxKernel(sandboxKernel) {}
