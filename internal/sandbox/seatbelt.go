package sandbox

import (
	"strings"

	"golang.org/x/xerrors"
)

// SeatbeltExec is macOS's sandbox runner: sandbox-exec -p PROFILE
// PROGRAM ARGS... applies the profile and execs the program, so its PID,
// process group and signals are the program's.
const SeatbeltExec = "/usr/bin/sandbox-exec"

// SeatbeltProfile writes the macOS sandbox profile (SBPL) of p: deny by
// default; read everything but other terminals; execute and fork; write
// (mode, owner and times included) only beneath p.WritableRoots (which
// the caller resolved through symbolic links: Seatbelt matches real
// paths, /private/tmp rather than /tmp), the null devices and the
// terminal p.TTY with /dev/tty; no setuid or setgid bit, extended
// attribute or file flag anywhere; other processes' information and
// signals only within the sandbox; the network only with p.Network.
// ExitKill has no meaning here.
// A path holding a control character is refused: the profile language's
// escapes for them are not documented.
func SeatbeltProfile(p Policy) (string, error) {
	for _, path := range append([]string{p.TTY}, p.WritableRoots...) {
		if strings.ContainsFunc(path, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return "", xerrors.Errorf("sandbox profile: path %q holds a control character", path)
		}
	}
	var b strings.Builder
	line := func(s ...string) {
		b.WriteString(strings.Join(s, " "))
		b.WriteByte('\n')
	}
	line("(version 1)")
	line("(deny default)")
	line("(allow process-exec)")
	line("(allow process-fork)")
	line("(allow process-info* (target same-sandbox))")
	line("(allow signal (target same-sandbox))")
	line("(allow file-read*)")
	line("(allow sysctl-read)")
	// Name services (getpwuid, DNS through the resolver) and the shared
	// memory the C library reads its configuration from.
	line("(allow mach-lookup (global-name \"com.apple.system.opendirectoryd.libinfo\") (global-name \"com.apple.system.notification_center\"))")
	line("(allow ipc-posix-shm-read-data (ipc-posix-name \"apple.shm.notification_center\"))")
	writable := []string{`(literal "/dev/null")`, `(literal "/dev/zero")`}
	if p.TTY != "" {
		writable = append(writable, "(literal "+sbplString(p.TTY)+")", `(literal "/dev/tty")`)
	}
	for _, root := range p.WritableRoots {
		writable = append(writable, "(subpath "+sbplString(root)+")")
	}
	line("(allow file-write*")
	for _, w := range writable {
		line("   ", w)
	}
	line(")")
	// As on Linux (design section 17): no setuid or setgid bit, extended
	// attribute or file flag may be set anywhere, roots included; mode,
	// owner and times change only beneath a root (file-write* above).
	// Later rules win.
	line("(deny file-write-setugid)")
	line("(deny file-write-xattr)")
	line("(deny file-write-flags)")
	// No terminal but the record's own may be read or written: another's
	// could be taken over, or read for what is typed into it.
	line(`(deny file-read* file-write* (regex #"^/dev/ttys[0-9]+$") (regex #"^/dev/tty[p-w][0-9a-f]$") (literal "/dev/console"))`)
	if p.TTY != "" {
		line("(allow file-read* file-write* (literal " + sbplString(p.TTY) + "))")
		line("(allow file-ioctl (literal " + sbplString(p.TTY) + ") (literal \"/dev/tty\"))")
	}
	if p.Network {
		line("(allow network*)")
		line("(allow system-socket)")
		line("(allow mach-lookup (global-name \"com.apple.dnssd.service\") (global-name \"com.apple.SystemConfiguration.configd\"))")
	}
	return b.String(), nil
}

// sbplString quotes s as a string of the profile language (a Scheme
// string): backslash and double quote are escaped.
func sbplString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}
