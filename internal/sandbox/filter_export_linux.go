//go:build linux

package sandbox

import "golang.org/x/sys/unix"

// Filter is the seccomp program [Start] installs for p, made once for
// each network setting and shared: the caller must not change it. It is
// exported for bench/'s floor (BenchmarkSandboxFloor), which installs the
// library's own filter by hand on a thread of its own.
func Filter(p Policy) ([]unix.SockFilter, error) { return filter(p) }
