//go:build darwin

package proc

import (
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/xerrors"

	"github.com/procvisor/proc/internal/sandbox"
)

// On macOS the sandbox is sandbox-exec with a generated profile
// (internal/sandbox.SeatbeltProfile), which execs the command: its PID,
// process group and signals are the command's. Not verified at runtime
// here: no machine of the project runs macOS.

// sandboxSteps: the probe's one step, the runner's path ("": the
// system's).
type sandboxSteps struct{ exec string }

// sandboxKernel is the runner found.
type sandboxKernel struct{ exec string }

// probeSandbox checks that sandbox-exec is there.
func probeSandbox(steps sandboxSteps) (k sandboxKernel, err error, lasting bool) {
	path := steps.exec
	if path == "" {
		path = sandbox.SeatbeltExec
	}
	if _, err := os.Stat(path); err != nil {
		return sandboxKernel{}, xerrors.Errorf("sandbox: %s is needed: %w", path, err), true
	}
	return sandboxKernel{exec: path}, nil, true
}

func describeSandbox(sandboxKernel, *Sandbox) string { return "seatbelt" }

// sandboxStart is a start's sandbox.
type sandboxStart struct {
	sb     *Sandbox
	kernel sandboxKernel
}

// start makes cmd run through sandbox-exec with the policy's profile and
// forks it with fork (cmd.Start, from lifecycle.go's fork). Roots
// are resolved through symbolic links: the profile matches real paths
// (/private/tmp, not /tmp).
func (s *sandboxStart) start(_ *treeSetup, cmd *exec.Cmd, fork func() error, tty bool) (release func(), err error) {
	p := sandbox.Policy{Network: s.sb.Network}
	for _, root := range s.sb.WritableRoots {
		real, err := filepath.EvalSymlinks(root)
		if err != nil {
			return nil, xerrors.Errorf("sandbox: %w", err)
		}
		p.WritableRoots = append(p.WritableRoots, real)
	}
	if tty {
		f, ok := cmd.Stdin.(*os.File)
		if !ok {
			return nil, xerrors.New("sandbox: the terminal is not the child's stdin")
		}
		p.TTY = f.Name()
	}
	profile, err := sandbox.SeatbeltProfile(p)
	if err != nil {
		return nil, xerrors.Errorf("%v: %w", err, ErrUnsupported)
	}
	cmd.Args = append([]string{s.kernel.exec, "-p", profile, cmd.Path}, cmd.Args[1:]...)
	cmd.Path = s.kernel.exec
	if err := fork(); err != nil {
		return nil, err
	}
	return func() {}, nil
}

// rootThroughSymlink: macOS resolves roots at the start instead (Seatbelt
// matches real paths), and Info.Sandbox's profile shows the real ones.
func rootThroughSymlink(string) (string, bool) { return "", false }

// kernelAllows: Seatbelt cannot allow TCP by port without the rest of the
// network.
func kernelAllows(_ sandboxKernel, sb *Sandbox) error {
	if sb.Listen || len(sb.ConnectPorts) > 0 {
		return xerrors.New("Listen and ConnectPorts are not expressed in the macOS profile")
	}
	return nil
}

func closeSandboxKernel(sandboxKernel) {}
