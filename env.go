package proc

import (
	"context"
	"os"
	"path"
	"slices"
	"sort"
	"strings"

	"cdr.dev/slog/v3"
	"golang.org/x/xerrors"
)

// SecretEnv holds DropEnv patterns for the names that commonly carry a
// credential: any name holding KEY, SECRET, TOKEN, PASSWORD, PASSWD or
// CREDENTIAL, in any case ("OPENAI_API_KEY", "GH_TOKEN", "db_password").
// It casts a wide net on purpose: a harmless variable that is dropped is
// named in Info.DroppedEnv, a secret that leaks is not seen at all. Pass
// it as Options.DropEnv or StartRequest.DropEnv, alone or appended to
// patterns of one's own (append(slices.Clone(proc.SecretEnv), "AWS_*")).
// Callers must not modify it.
var SecretEnv = []string{"*KEY*", "*SECRET*", "*TOKEN*", "*PASSWORD*", "*PASSWD*", "*CREDENTIAL*"}

func validEnvName(name string) error {
	if name == "" || strings.ContainsAny(name, "=\x00") {
		return xerrors.Errorf("start: environment variable name %q is empty or holds '=' or NUL: %w", name, ErrInvalid)
	}
	return nil
}

// environ builds the child's environment: os.Environ(), then UpdateEnv
// (or nothing with ClearEnv), less what DropEnv drops, then the request's
// overrides (NonInteractive's under Env's), then its removals, then the
// owner. The result is never nil: a nil Env would make exec.Cmd inherit
// ours. dropped names the variables DropEnv removed.
func (m *Manager) environ(req StartRequest, id string) (_, dropped []string) {
	var env []string
	if !req.ClearEnv {
		env = os.Environ()
	}
	if m.opts.UpdateEnv != nil && !req.ClearEnv {
		updated, err := m.opts.UpdateEnv(env)
		if err != nil {
			m.logger.Warn(context.Background(), "update environment failed; keeping the current one",
				slog.F("id", id), slog.Error(err))
		} else {
			env = updated
		}
	}
	if m.opts.UpdateEnv == nil && len(req.Env) == 0 && len(req.UnsetEnv) == 0 && !req.NonInteractive &&
		(m.opts.OwnerEnv == "" || req.Owner == "") && len(m.dropPatterns(req)) == 0 {
		// Nothing to add, remove or drop (the common start): the
		// environment as inherited, already a copy of its own.
		if env == nil {
			env = []string{}
		}
		return env, nil
	}
	overrides := make(map[string]string, len(req.Env)+1)
	for k, v := range req.Env {
		overrides[k] = v
	}
	if m.opts.OwnerEnv != "" && req.Owner != "" {
		overrides[m.opts.OwnerEnv] = req.Owner
	}
	addQuietEnv(overrides, req)
	drop := make(map[string]bool, len(overrides)+len(req.UnsetEnv))
	for k := range overrides {
		drop[envKey(k)] = true
	}
	for _, k := range req.UnsetEnv {
		drop[envKey(k)] = true
	}
	env, dropped = dropInherited(env, m.dropPatterns(req), func(key string) bool { return drop[key] })
	out := make([]string, 0, len(env)+len(overrides))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !drop[envKey(name)] {
			out = append(out, kv)
		}
	}
	unset := make(map[string]bool, len(req.UnsetEnv))
	for _, k := range req.UnsetEnv {
		unset[envKey(k)] = true
	}
	names := make([]string, 0, len(overrides))
	for k := range overrides {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !unset[envKey(k)] || k == m.opts.OwnerEnv {
			out = append(out, k+"="+overrides[k])
		}
	}
	return out, dropped
}

// quietEnv is what StartRequest.NonInteractive sets (design section 18):
// a command neither pages, nor prompts for git credentials, nor paints
// colours. TERM=dumb is added without a TTY only.
var quietEnv = [...][2]string{
	{"NO_COLOR", "1"},
	{"PAGER", "cat"},
	{"GIT_PAGER", "cat"},
	{"GH_PAGER", "cat"},
	{"GIT_TERMINAL_PROMPT", "0"},
	{"DEBIAN_FRONTEND", "noninteractive"},
	{"CI", "1"},
}

// addQuietEnv adds the variables NonInteractive sets to overrides, except
// those the request's Env sets.
func addQuietEnv(overrides map[string]string, req StartRequest) {
	if !req.NonInteractive {
		return
	}
	set := func(name, value string) {
		for k := range req.Env {
			if envKey(k) == envKey(name) {
				return
			}
		}
		overrides[name] = value
	}
	for _, kv := range quietEnv {
		set(kv[0], kv[1])
	}
	if !req.TTY {
		set("TERM", "dumb")
	}
}

// dropPatterns returns the DropEnv patterns of req: its own, or
// Options.DropEnv when it has none (nil).
func (m *Manager) dropPatterns(req StartRequest) []string {
	if req.DropEnv != nil {
		return req.DropEnv
	}
	return m.opts.DropEnv
}

// validDropEnv checks DropEnv patterns: path.Match must accept each, as
// written and as matchesAny uses it (case-folded).
func validDropEnv(field string, patterns []string) error {
	for _, p := range patterns {
		_, err := path.Match(p, "")
		if err == nil {
			_, err = path.Match(foldName(p), "")
		}
		if err != nil {
			return xerrors.Errorf("start: %s pattern %q: %v: %w", field, p, err, ErrInvalid)
		}
	}
	return nil
}

// dropInherited removes from env (the inherited environment, as NAME=value
// entries) the variables whose names match a pattern, except those keep
// reports (the request's own, the owner's, NonInteractive's: they replace
// the inherited ones anyway). It returns what is left and the names it
// removed, sorted and once each, spelled as env spells them; never a
// value. Patterns match names regardless of case; keep compares names as
// the OS does (case-insensitively on Windows only).
func dropInherited(env, patterns []string, keep func(key string) bool) (kept, dropped []string) {
	if len(patterns) == 0 {
		return env, nil
	}
	kept = env[:0:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !keep(envKey(name)) && matchesAny(patterns, name) {
			dropped = append(dropped, name)
			continue
		}
		kept = append(kept, kv)
	}
	slices.Sort(dropped)
	return kept, slices.Compact(dropped)
}

// matchesAny reports whether name matches one of the patterns, both
// upper-cased first, so "*key*" drops OPENAI_API_KEY and "*KEY*" drops
// ssh_key. (In a character class a range is folded bound by bound:
// "[a-z]" matches any letter.)
func matchesAny(patterns []string, name string) bool {
	name = foldName(name)
	for _, p := range patterns {
		// Validated before: Match cannot fail here.
		if ok, _ := path.Match(foldName(p), name); ok {
			return true
		}
	}
	return false
}

// foldName upper-cases s for DropEnv's case-insensitive match.
func foldName(s string) string { return strings.ToUpper(s) }
