//go:build linux

package sandbox

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	"golang.org/x/xerrors"
)

// MinABI is the oldest Landlock ABI the sandbox accepts: ABI 3 (Linux
// 6.2) controls truncation, without which a child could empty any file it
// can read.
const MinABI = 3

// Support is what the kernel offers the sandbox, as [Probe] found it.
type Support struct {
	// ABI is the kernel's Landlock ABI version (MinABI or newer).
	ABI int
	// Reads keeps the read layer for the starts made with this answer
	// (nil: each start makes its own); its owner closes it.
	Reads *ReadRules
}

// Describe says what policy p is enforced with, for Info.Sandbox:
// "landlock abi 7, seccomp, no connect, no capabilities" with the network
// off (below ABI 9 every connect(2) is refused, which "no connect" says);
// "listen" when the tree may bind TCP ports, and "connect 80,443, no unix
// sockets" when it may connect to those (its AF_UNIX sockets but
// socketpair's are refused then); "landlock abi 7, network, no
// capabilities" with the network on. Below ABI 6 Landlock cannot scope
// signals, so the tree may signal the host (a child of the same user
// always can): "signals" says so.
func (s Support) Describe(p Policy) string {
	parts := []string{"landlock abi " + strconv.Itoa(s.ABI)}
	switch {
	case p.Network:
		parts = append(parts, "network")
	default:
		parts = append(parts, "seccomp")
		if p.Listen {
			parts = append(parts, "listen")
		}
		if len(p.ConnectPorts) == 0 {
			parts = append(parts, "no connect")
		} else {
			ports := make([]string, len(p.ConnectPorts))
			for i, port := range p.ConnectPorts {
				ports[i] = strconv.Itoa(port)
			}
			parts = append(parts, "connect "+strings.Join(ports, ","), "no unix sockets")
		}
	}
	parts = append(parts, "no capabilities")
	if s.ABI < 6 {
		parts = append(parts, "signals")
	}
	return strings.Join(parts, ", ")
}

// Steps are the probe's steps, in order. Tests replace one to play a
// kernel without that feature; [DefaultSteps] asks the kernel.
type Steps struct {
	// Landlock returns the Landlock ABI version, or the errno of
	// landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION).
	Landlock func() (abi int, err error)
	// Seccomp checks that seccomp filters with the actions used work on
	// this architecture.
	Seccomp func() error
	// Hold checks that the child can be held at its exec
	// (PTRACE_TRACEME; Yama's ptrace_scope 3 refuses it).
	Hold func() error
	// Capabilities checks that a root child can be left without
	// capabilities (emptying the bounding set needs CAP_SETPCAP).
	Capabilities func() error
}

// DefaultSteps are the steps that ask the kernel.
func DefaultSteps() Steps {
	return Steps{Landlock: landlockABI, Seccomp: probeSeccomp, Hold: probeHold, Capabilities: probeCapabilities}
}

// Probe finds out whether the kernel can enforce every policy, with the
// steps given (nil ones ask the kernel). A missing feature is an
// *UnsupportedError naming it and what to change; any other error is of
// the moment (the hold step could not fork, say) and tells nothing about
// the kernel: the caller keeps no such answer. It starts nothing that
// outlives it: the hold step starts a child that fails its exec and is
// reaped before Probe returns. The caller caches the answer.
func Probe(s Steps) (Support, error) {
	def := DefaultSteps()
	if s.Landlock == nil {
		s.Landlock = def.Landlock
	}
	if s.Seccomp == nil {
		s.Seccomp = def.Seccomp
	}
	if s.Hold == nil {
		s.Hold = def.Hold
	}
	if s.Capabilities == nil {
		s.Capabilities = def.Capabilities
	}
	abi, err := s.Landlock()
	switch {
	case errors.Is(err, unix.ENOSYS):
		return Support{}, &UnsupportedError{Step: "landlock", Msg: "Landlock is not built into this kernel: it needs CONFIG_SECURITY_LANDLOCK (Linux 6.2 or newer)", Err: err}
	case errors.Is(err, unix.EOPNOTSUPP):
		return Support{}, &UnsupportedError{Step: "landlock", Msg: "Landlock not enabled: add landlock to the kernel's lsm= list", Err: err}
	case err != nil:
		return Support{}, &UnsupportedError{Step: "landlock", Msg: "Landlock cannot be used", Err: err}
	case abi < MinABI:
		return Support{}, &UnsupportedError{Step: "landlock", Msg: "Landlock ABI " + strconv.Itoa(abi) + " cannot control truncation: ABI " + strconv.Itoa(MinABI) + " (Linux 6.2) or newer is needed"}
	}
	if err := s.Seccomp(); err != nil {
		return Support{}, asUnsupported("seccomp", "seccomp filters cannot be used: the kernel needs CONFIG_SECCOMP_FILTER (Linux 4.14 or newer), on amd64 or arm64", err)
	}
	if err := s.Hold(); err != nil {
		return Support{}, asUnsupported("hold", holdMessage(), err)
	}
	if err := s.Capabilities(); err != nil {
		return Support{}, asUnsupported("capabilities", "the host is root without CAP_SETPCAP, so a child would keep capabilities: give the host CAP_SETPCAP or run it as another user", err)
	}
	return Support{ABI: abi, Reads: &ReadRules{}}, nil
}

// asUnsupported wraps err, unless it is an *UnsupportedError already or
// an error of the moment (transient), which says nothing of the kernel.
func asUnsupported(step, msg string, err error) error {
	var u *UnsupportedError
	if errors.As(err, &u) {
		return u
	}
	if transient(err) {
		return xerrors.Errorf("sandbox %s: probe: %w", step, err)
	}
	return &UnsupportedError{Step: step, Msg: msg, Err: err}
}

// transient reports whether err is a shortage of the moment (processes,
// memory, descriptors) or an interruption: asked again later, the same
// step may well succeed (the hold step forks a child).
func transient(err error) bool {
	for _, e := range []error{unix.EAGAIN, unix.ENOMEM, unix.EMFILE, unix.ENFILE, unix.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// holdMessage explains a refused PTRACE_TRACEME.
func holdMessage() string {
	scope, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	if err == nil && strings.TrimSpace(string(scope)) == "3" {
		return "Yama's ptrace_scope is 3, so the child cannot be held at its exec: set kernel.yama.ptrace_scope to 2 or less (it can only be lowered by a reboot)"
	}
	return "the child cannot be held at its exec: ptrace(PTRACE_TRACEME) is refused (Yama's ptrace_scope, or another security module's policy)"
}

// probeSeccomp checks the architecture and that the kernel's seccomp
// filters know the actions the filter returns.
func probeSeccomp() error {
	if filterArch == 0 {
		return &UnsupportedError{Step: "seccomp", Msg: "no seccomp filter is written for this architecture: amd64 and arm64 are supported"}
	}
	for _, action := range []uint32{unix.SECCOMP_RET_ERRNO, unix.SECCOMP_RET_KILL_PROCESS, unix.SECCOMP_RET_USER_NOTIF, unix.SECCOMP_RET_ALLOW} {
		if err := seccompActionAvail(action); err != nil {
			return err
		}
	}
	return nil
}

// probeHold starts a child that asks to be traced and then fails its exec
// (a directory): a refused PTRACE_TRACEME fails with EPERM before the
// exec, a working one lets the exec fail with EACCES. Go's fork reaps the
// child either way.
func probeHold() error {
	_, err := syscall.ForkExec("/", []string{"proc-sandbox-probe"}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Ptrace: true}})
	if errors.Is(err, unix.EACCES) {
		return nil
	}
	if err == nil {
		// Cannot happen (a directory does not execute); say so rather
		// than leave a traced child behind.
		return errors.New("the hold probe's exec of a directory succeeded")
	}
	return err
}

// probeCapabilities checks that a root host can empty a child's bounding
// set: it needs CAP_SETPCAP. Another user's child gets no capabilities at
// its exec anyway (no ambient or inheritable ones, and no-new-privileges
// ignores file capabilities and set-user-ID bits).
func probeCapabilities() error {
	if unix.Getuid() != 0 && unix.Geteuid() != 0 {
		return nil
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	if data[unix.CAP_SETPCAP/32].Effective&(1<<(unix.CAP_SETPCAP%32)) == 0 {
		return unix.EPERM
	}
	return nil
}
