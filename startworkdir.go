package proc

import (
	"path/filepath"
	"sync/atomic"
)

// The work dir of a request that names none (workBase) is a directory the
// Manager found before, most of the time: $HOME, or Options.WorkingDir().
// A stat of it on every start costs what os/exec, which changes no
// directory, does not pay. The Manager keeps the last candidate it found
// a directory, and trusts it while it is still the candidate, without a
// look: the child's chdir is the look, and a start that fails makes the
// Manager look again (workDirGone), so that a base gone meanwhile falls
// back as it always did, before the start is refused.

// seenBase is one candidate workBase found an existing directory, and
// what it resolved to.
type seenBase struct{ dir, abs string }

// workBaseSeen holds the Manager's seenBase; nil until one is found, or
// since a start with it failed.
type workBaseSeen struct{ last atomic.Pointer[seenBase] }

// lookup returns what dir resolved to when it was last found an existing
// directory, or "" if it is not the candidate last found so.
func (s *workBaseSeen) lookup(dir string) string {
	if b := s.last.Load(); b != nil && b.dir == dir {
		return b.abs
	}
	return ""
}

// found records that dir was found an existing directory, resolving to
// abs; a relative dir is not kept, as it resolves against the host's work
// dir, which may change.
func (s *workBaseSeen) found(dir, abs string) {
	if filepath.IsAbs(dir) {
		s.last.Store(&seenBase{dir: dir, abs: abs})
	}
}

// workDirGone is asked after a start of sp failed: it reports whether
// sp's work dir was the default (the request named none) and is no
// longer an existing directory, and then forgets it, so that the next
// workBase looks again; launch then starts sp again with the work dir
// resolved afresh.
func (m *Manager) workDirGone(sp *spec) bool {
	if sp.req.WorkDir != "" || isDir(sp.dir) == nil {
		return false
	}
	m.workBases.last.Store(nil)
	return true
}
