package sandbox

import "golang.org/x/sys/unix"

// archMetaCalls are amd64's path-only metadata calls, which newer
// architectures (arm64) have only as their *at forms.
var archMetaCalls = []metaCall{
	{nr: unix.SYS_CHMOD, op: opMode, dir: -1, path: 0, arg: 1, flags: -1},
	{nr: unix.SYS_CHOWN, op: opOwner, dir: -1, path: 0, arg: 1, flags: -1},
	{nr: unix.SYS_LCHOWN, op: opOwner, dir: -1, path: 0, arg: 1, flags: -1, nofollow: true},
	{nr: unix.SYS_UTIME, op: opTimes, dir: -1, path: 0, arg: 1, flags: -1, times: timesBuf},
	{nr: unix.SYS_UTIMES, op: opTimes, dir: -1, path: 0, arg: 1, flags: -1, times: timesVal},
	{nr: unix.SYS_FUTIMESAT, op: opTimes, dir: 0, path: 1, arg: 2, flags: -1, times: timesVal},
}
