// Package sandbox holds the operating system mechanics of proc's sandbox
// (design section 17): what a child and everything it starts may change,
// and whether it may use the network. It knows nothing of a Manager.
//
// On Linux, [Start] starts an exec.Cmd from one dedicated OS thread that
// it restricts first — Landlock for files (and TCP, as a second layer), a
// seccomp filter for sockets and io_uring when the network is off,
// no-new-privileges, no capabilities — and that then ends, so that the
// rest of the process is never restricted. The child is held stopped at
// its exec until that thread is gone. [Probe] finds out once whether the
// kernel can do all of it.
//
// On every OS, [SeatbeltProfile] writes the macOS sandbox-exec profile of
// a policy; it is plain text, so it is tested everywhere.
package sandbox
