//go:build linux && !proc_otherunix

package proc

// ActivityAfresh is Activity with nothing kept from earlier looks at p's
// tree: what the first look costs.
func ActivityAfresh(p *Process) (Activity, error) {
	p.dropLooks()
	return p.Activity()
}

// HostCPU is hostCPU, for the benchmarks of package proc_test.
var HostCPU = hostCPU
