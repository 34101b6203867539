//go:build linux

package sandbox

import "golang.org/x/sys/unix"

// The system calls the filter refuses or routes beyond the network ones,
// and the shape of their arguments, which the host reads when a call is
// routed to it. The calls that exist on one architecture only are in
// calls_linux_<arch>.go.

// refusedCalls fail with EPERM in every sandboxed tree: the kernel
// keyring (keys hold credentials); setting or removing extended
// attributes, ACLs included (reading them stays allowed), and inode flags
// by file_setattr; and the mount API, whose detached mounts (open_tree)
// would show the host an object outside the roots under a root's name
// (the host checks that too, notify_linux.go's sameObject).
var refusedCalls = []uint32{
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_SETXATTR, unix.SYS_LSETXATTR, unix.SYS_FSETXATTR, unix.SYS_SETXATTRAT,
	unix.SYS_REMOVEXATTR, unix.SYS_LREMOVEXATTR, unix.SYS_FREMOVEXATTR, unix.SYS_REMOVEXATTRAT,
	sysFileSetattr,
	unix.SYS_OPEN_TREE, unix.SYS_MOVE_MOUNT, unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT,
	unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR, unix.SYS_OPEN_TREE_ATTR,
}

// System call numbers shared by amd64 and arm64 (the table is unified
// from 424 on) that golang.org/x/sys does not name yet.
const (
	sysFileSetattr = 469 // Linux 6.17: sets inode flags like FS_IOC_SETFLAGS
	// maxReviewedCall is the highest call number the filter was written
	// against: newer ones fail with ENOSYS (as on an older kernel, so that
	// programs fall back) until someone reviews what they can do.
	maxReviewedCall = 469
)

// metaOp is what a routed metadata call changes.
type metaOp uint8

const (
	opMode  metaOp = iota + 1 // the mode; arg is the mode
	opOwner                   // owner and group; arg is the owner, arg+1 the group
	opTimes                   // the times; arg points at them (NULL: now)
)

// timesKind is the layout of a times call's argument.
type timesKind uint8

const (
	timesSpec timesKind = iota // struct timespec[2] (utimensat)
	timesVal                   // struct timeval[2] (utimes, futimesat)
	timesBuf                   // struct utimbuf (utime)
)

// metaCall is a system call that changes the metadata of a file, routed
// to the host. Argument indexes are -1 where the call has none.
type metaCall struct {
	nr uint32
	op metaOp
	// dir is the directory descriptor the path is relative to (-1:
	// the working directory); for an f* call (path -1), the descriptor
	// the call applies to.
	dir  int8
	path int8
	arg  int8
	// flags holds AT_SYMLINK_NOFOLLOW and AT_EMPTY_PATH.
	flags    int8
	nofollow bool // the call never follows a final symlink (lchown)
	times    timesKind
}

// metaCalls are the metadata calls of every architecture, then those of
// this one.
var metaCalls = append([]metaCall{
	{nr: unix.SYS_FCHMOD, op: opMode, dir: 0, path: -1, arg: 1, flags: -1},
	{nr: unix.SYS_FCHMODAT, op: opMode, dir: 0, path: 1, arg: 2, flags: -1},
	{nr: unix.SYS_FCHMODAT2, op: opMode, dir: 0, path: 1, arg: 2, flags: 3},
	{nr: unix.SYS_FCHOWN, op: opOwner, dir: 0, path: -1, arg: 1, flags: -1},
	{nr: unix.SYS_FCHOWNAT, op: opOwner, dir: 0, path: 1, arg: 2, flags: 4},
	{nr: unix.SYS_UTIMENSAT, op: opTimes, dir: 0, path: 1, arg: 2, flags: 3, times: timesSpec},
}, archMetaCalls...)

// processCall is a system call that acts on another process: target is
// the argument that names it (0: the caller), and label the filter's
// check of its arguments.
type processCall struct {
	nr     uint32
	target int8
	kind   string // "pid": target only; "prlimit"; "which": setpriority; "ioprio"
}

// label is the filter's entry for the call.
func (c processCall) label() string {
	if c.kind == "pid" {
		return "pid0"
	}
	return c.kind
}

var processCalls = []processCall{
	{nr: unix.SYS_PRLIMIT64, target: 0, kind: "prlimit"},
	{nr: unix.SYS_SCHED_SETAFFINITY, target: 0, kind: "pid"},
	{nr: unix.SYS_SCHED_SETSCHEDULER, target: 0, kind: "pid"},
	{nr: unix.SYS_SCHED_SETPARAM, target: 0, kind: "pid"},
	{nr: unix.SYS_SCHED_SETATTR, target: 0, kind: "pid"},
	{nr: unix.SYS_SETPRIORITY, target: 1, kind: "which"},
	{nr: unix.SYS_IOPRIO_SET, target: 1, kind: "ioprio"},
}
