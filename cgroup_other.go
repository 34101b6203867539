//go:build !linux || proc_otherunix

package proc

import (
	"context"

	"github.com/coder/quartz"
	"golang.org/x/xerrors"
)

// cgroupHost: cgroups are Linux-only.
type cgroupHost struct{}

func openCgroupHost(string, bool, quartz.Clock) (*cgroupHost, error) {
	return nil, xerrors.Errorf("cgroups are Linux-only: %w", ErrUnsupported)
}

func (*cgroupHost) close() {}

func (*cgroupHost) drain() {}

func (*cgroupHost) waitEmpty(context.Context) {}

func (*cgroupHost) path() string { return "" }
