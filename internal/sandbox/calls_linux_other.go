//go:build linux && !amd64

package sandbox

// archMetaCalls: arm64 has only the *at forms of the metadata calls, and
// no filter is written for other architectures (filterArch is 0 there).
var archMetaCalls []metaCall
