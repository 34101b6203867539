// Package cgroup2 holds the mechanics of cgroup v2 directories on Linux:
// finding the mount, a directory handle (its members, whether it is
// populated, kill, waiting until it is empty, limits, usage, removal), and
// the probe that tells whether a child can be cloned into a cgroup. It
// knows nothing of a Manager: which cgroups exist, what they are named and
// when they are made, reused or removed is decided in package proc. On
// other systems the package is empty.
package cgroup2
