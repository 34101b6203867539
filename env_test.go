package proc_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/procvisor/proc"
)

// envInherited is the inherited environment the tests' UpdateEnv makes
// (in place of the test process's own, which parallel tests cannot set
// and whose names the patterns below might match).
var envInherited = []string{
	"GH_TOKEN=tok-7d1e", "MY_SECRET_X=sec-5b2a", "AWS_KEY=aws-9c3f",
	"AWS_REGION=inherited-region", "CI=inherited-ci", "PAGER=less", "TERM=xterm-256color",
	"KEEP_ME=1",
}

func envUpdate([]string) ([]string, error) {
	return slices.Clone(envInherited), nil
}

// envChild runs the mgr-env helper with req's settings and returns the
// child's real environment as a map, and the record's final Info.
func envChild(t *testing.T, m *proc.Manager, edit func(*proc.StartRequest)) (map[string]string, proc.Info) {
	t.Helper()
	ctx := testCtx(t)
	req := helperReq("mgr-env")
	edit(&req)
	p := mustStart(t, m, req)
	env := map[string]string{}
	for _, kv := range mgrEnviron(ctx, t, p) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env, p.Info()
}

func TestNonInteractive(t *testing.T) {
	t.Parallel()
	m := newManager(t, proc.Options{UpdateEnv: envUpdate})
	env, _ := envChild(t, m, func(r *proc.StartRequest) {
		r.NonInteractive = true
		r.Env["GIT_PAGER"] = "delta" // the request's own Env wins
		r.UnsetEnv = []string{"GH_PAGER"}
	})
	want := map[string]string{
		"TERM": "dumb", "NO_COLOR": "1", "PAGER": "cat", "GIT_PAGER": "delta",
		"GIT_TERMINAL_PROMPT": "0", "DEBIAN_FRONTEND": "noninteractive", "CI": "1",
	}
	for k, v := range want {
		if got, ok := env[k]; !ok || got != v {
			t.Errorf("NonInteractive child: %s=%q (set %v); want %q", k, got, ok, v)
		}
	}
	if v, ok := env["GH_PAGER"]; ok {
		t.Errorf("NonInteractive child with UnsetEnv GH_PAGER: GH_PAGER=%q; want it unset", v)
	}

	// The control: without NonInteractive the inherited values stay.
	env, _ = envChild(t, m, func(*proc.StartRequest) {})
	if env["PAGER"] != "less" || env["TERM"] != "xterm-256color" || env["CI"] != "inherited-ci" {
		t.Errorf("without NonInteractive: PAGER=%q TERM=%q CI=%q; want the inherited less, xterm-256color, inherited-ci",
			env["PAGER"], env["TERM"], env["CI"])
	}
	if _, ok := env["NO_COLOR"]; ok {
		t.Error("without NonInteractive the child has NO_COLOR")
	}

	// ClearEnv: nothing inherited, NonInteractive's variables still set.
	env, _ = envChild(t, m, func(r *proc.StartRequest) { r.ClearEnv, r.NonInteractive = true, true })
	if env["NO_COLOR"] != "1" || env["TERM"] != "dumb" || env["KEEP_ME"] != "" {
		t.Errorf("ClearEnv + NonInteractive: NO_COLOR=%q TERM=%q KEEP_ME=%q; want 1, dumb, unset", env["NO_COLOR"], env["TERM"], env["KEEP_ME"])
	}
}

func TestDropEnv(t *testing.T) {
	t.Parallel()
	sink := &mgrLogSink{t: t}
	m := newManager(t, proc.Options{
		Logger:    sink.logger(),
		UpdateEnv: envUpdate,
		OwnerEnv:  "AWS_OWNER",
		DropEnv:   []string{"*_TOKEN", "*SECRET*", "AWS_*", "CI", "NOT_SET_ANYWHERE"},
	})
	secrets := []string{"tok-7d1e", "sec-5b2a", "aws-9c3f"}

	// The Manager's patterns; the request's own Env, the owner and what
	// NonInteractive sets survive them.
	env, info := envChild(t, m, func(r *proc.StartRequest) {
		r.Env["AWS_REGION"] = "mine"
		r.Owner = "alice"
		r.NonInteractive = true
	})
	for _, name := range []string{"GH_TOKEN", "MY_SECRET_X", "AWS_KEY"} {
		if v, ok := env[name]; ok {
			t.Errorf("DropEnv: the child has %s=%q", name, v)
		}
	}
	for k, v := range map[string]string{"AWS_REGION": "mine", "AWS_OWNER": "alice", "CI": "1", "KEEP_ME": "1"} {
		if env[k] != v {
			t.Errorf("DropEnv: the child has %s=%q; want %q", k, env[k], v)
		}
	}
	if want := []string{"AWS_KEY", "GH_TOKEN", "MY_SECRET_X"}; !slices.Equal(info.DroppedEnv, want) {
		t.Errorf("Info.DroppedEnv = %q; want %q", info.DroppedEnv, want)
	}
	encoded, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(encoded), `"dropped_env":["AWS_KEY","GH_TOKEN","MY_SECRET_X"]`) {
		t.Errorf("Info as JSON lacks dropped_env: %s", encoded)
	}
	for _, s := range secrets {
		if strings.Contains(string(encoded), s) {
			t.Errorf("Info as JSON holds the dropped value %q: %s", s, encoded)
		}
	}

	// A request's own list replaces the Manager's; an empty one drops
	// nothing.
	env, info = envChild(t, m, func(r *proc.StartRequest) { r.DropEnv = []string{"GH_*"} })
	if _, ok := env["GH_TOKEN"]; ok || env["AWS_KEY"] != "aws-9c3f" || !slices.Equal(info.DroppedEnv, []string{"GH_TOKEN"}) {
		t.Errorf("DropEnv GH_*: GH_TOKEN present %v, AWS_KEY=%q, DroppedEnv %q; want absent, aws-9c3f, [GH_TOKEN]", ok, env["AWS_KEY"], info.DroppedEnv)
	}
	env, info = envChild(t, m, func(r *proc.StartRequest) { r.DropEnv = []string{} })
	if env["GH_TOKEN"] != "tok-7d1e" || info.DroppedEnv != nil {
		t.Errorf("empty DropEnv: GH_TOKEN=%q, DroppedEnv %q; want tok-7d1e, nil", env["GH_TOKEN"], info.DroppedEnv)
	}
	// ClearEnv inherits nothing, so nothing is dropped.
	env, info = envChild(t, m, func(r *proc.StartRequest) { r.ClearEnv = true })
	if _, ok := env["GH_TOKEN"]; ok || info.DroppedEnv != nil {
		t.Errorf("ClearEnv: GH_TOKEN present %v, DroppedEnv %q; want absent, nil", ok, info.DroppedEnv)
	}

	if err := m.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	for _, e := range sink.snapshot() {
		text := mgrEntryText(e)
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("log entry at %v holds the dropped value %q: %s", e.Level, s, text)
			}
		}
	}
}

func TestDropEnvMalformed(t *testing.T) {
	t.Parallel()
	m := newManager(t, proc.Options{})
	req := helperReq("mgr-env")
	req.DropEnv = []string{"OK_*", "BAD_[", "ALSO_OK"}
	if p, err := m.Start(req); !errors.Is(err, proc.ErrInvalid) || !strings.Contains(err.Error(), "BAD_[") {
		t.Errorf("Start(DropEnv BAD_[) = %v, %v; want an ErrInvalid naming the pattern", p, err)
	}
	bad := newManager(t, proc.Options{DropEnv: []string{"[z-a"}})
	if p, err := bad.Start(helperReq("mgr-env")); !errors.Is(err, proc.ErrInvalid) {
		t.Errorf("Start with Options.DropEnv [z-a = %v, %v; want ErrInvalid", p, err)
	}
	// A request's own list replaces the malformed default.
	req = helperReq("mgr-env")
	req.DropEnv = []string{}
	if _, err := bad.Start(req); !errors.Is(err, proc.ErrInvalid) {
		t.Errorf("Start with a malformed Options.DropEnv and an empty own list = %v; want ErrInvalid still (the Manager is misconfigured)", err)
	}
	if n := len(m.List()) + len(bad.List()); n != 0 {
		t.Errorf("refused starts left %d records", n)
	}
}

func TestStartOrGetQuietEnv(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	orig := helperReq("mgr-exit", "0")
	orig.ID, orig.NonInteractive, orig.DropEnv = "quiet", true, []string{"A_*"}
	p, started, err := m.StartOrGet(orig)
	if err != nil || !started {
		t.Fatalf("first StartOrGet() = %v, %v; want true, nil", started, err)
	}
	waitFinal(ctx, t, p)
	for _, tc := range []struct {
		name string
		edit func(*proc.StartRequest)
		same bool
	}{
		{"equal", func(*proc.StartRequest) {}, true},
		{"equal-copy", func(r *proc.StartRequest) { r.DropEnv = []string{"A_*"} }, true},
		{"not-non-interactive", func(r *proc.StartRequest) { r.NonInteractive = false }, false},
		{"other-drop-env", func(r *proc.StartRequest) { r.DropEnv = []string{"B_*"} }, false},
		{"nil-drop-env", func(r *proc.StartRequest) { r.DropEnv = nil }, false},
	} {
		req := orig
		tc.edit(&req)
		got, started, err := m.StartOrGet(req)
		switch {
		case tc.same && (err != nil || started || got != p):
			t.Errorf("%s: StartOrGet() = %p, %v, %v; want %p, false, nil", tc.name, got, started, err, p)
		case !tc.same && (!errors.Is(err, proc.ErrDuplicateID) || started || got != nil):
			t.Errorf("%s: StartOrGet() = %p, %v, %v; want nil, false, ErrDuplicateID", tc.name, got, started, err)
		}
	}
	// nil (the Manager's default) and empty (drop nothing) differ.
	bare := helperReq("mgr-exit", "0")
	bare.ID = "bare"
	if _, _, err := m.StartOrGet(bare); err != nil {
		t.Fatalf("StartOrGet(bare) = %v", err)
	}
	bare.DropEnv = []string{}
	if _, _, err := m.StartOrGet(bare); !errors.Is(err, proc.ErrDuplicateID) {
		t.Errorf("StartOrGet(bare with an empty DropEnv) = %v; want ErrDuplicateID", err)
	}
}

// TestDropEnvJSON: an empty DropEnv (drop nothing) survives encoding as
// [], apart from a nil one (the Manager's default), which is left out.
func TestDropEnvJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		req  proc.StartRequest
		want string
	}{
		{proc.StartRequest{}, `{}`},
		{proc.StartRequest{DropEnv: []string{}}, `{"drop_env":[]}`},
		{proc.StartRequest{DropEnv: []string{"A_*"}, NonInteractive: true}, `{"non_interactive":true,"drop_env":["A_*"]}`},
	} {
		b, err := json.Marshal(tc.req)
		if err != nil || string(b) != tc.want {
			t.Errorf("Marshal = %s, %v; want %s", b, err, tc.want)
			continue
		}
		var back proc.StartRequest
		if err := json.Unmarshal(b, &back); err != nil || (back.DropEnv == nil) != (tc.req.DropEnv == nil) {
			t.Errorf("Unmarshal(%s) = DropEnv %#v, %v; want %#v", b, back.DropEnv, err, tc.req.DropEnv)
		}
	}
}

// TestSecretEnv: the six patterns drop what commonly holds a credential,
// in any case, keep what merely looks near (AWS_CA_BUNDLE), and never drop
// the request's own Env; Info.DroppedEnv names, never values.
func TestSecretEnv(t *testing.T) {
	t.Parallel()
	if want := []string{"*KEY*", "*SECRET*", "*TOKEN*", "*PASSWORD*", "*PASSWD*", "*CREDENTIAL*"}; !slices.Equal(proc.SecretEnv, want) {
		t.Fatalf("SecretEnv = %q; want %q", proc.SecretEnv, want)
	}
	inherited := []string{
		"OPENAI_API_KEY=v-openai", "ANTHROPIC_API_KEY=v-anthropic", "GH_TOKEN=v-gh",
		"db_password=v-db", "MYSQL_PWD_PASSWD=v-mysql", "Google_Application_Credentials=v-google",
		"client_secret=v-client", "SSH_KEY=v-ssh",
		"AWS_CA_BUNDLE=/etc/ca.pem", "KEEP_ME=1", "PATH=/usr/bin:/bin",
	}
	m := newManager(t, proc.Options{
		UpdateEnv: func([]string) ([]string, error) { return slices.Clone(inherited), nil },
		DropEnv:   proc.SecretEnv,
	})
	env, info := envChild(t, m, func(r *proc.StartRequest) { r.Env["SSH_KEY"] = "mine" })
	for _, kv := range inherited {
		name, value, _ := strings.Cut(kv, "=")
		keep := name == "AWS_CA_BUNDLE" || name == "KEEP_ME" || name == "PATH"
		if got, ok := env[name]; keep && got != value {
			t.Errorf("SecretEnv: the child has %s=%q (set %v); want %q", name, got, ok, value)
		} else if !keep && name != "SSH_KEY" && ok {
			t.Errorf("SecretEnv: the child has %s=%q; want it dropped", name, got)
		}
	}
	if env["SSH_KEY"] != "mine" {
		t.Errorf("SecretEnv: the child has SSH_KEY=%q; want the request's own mine", env["SSH_KEY"])
	}
	want := []string{"ANTHROPIC_API_KEY", "GH_TOKEN", "Google_Application_Credentials", "MYSQL_PWD_PASSWD", "OPENAI_API_KEY", "client_secret", "db_password"}
	if !slices.Equal(info.DroppedEnv, want) {
		t.Errorf("Info.DroppedEnv = %q; want %q (the request's own SSH_KEY replaced, not dropped)", info.DroppedEnv, want)
	}
	encoded, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(encoded), "v-") {
		t.Errorf("Info as JSON holds a dropped value: %s", encoded)
	}

	// Patterns of any case match names of any case.
	env, info = envChild(t, m, func(r *proc.StartRequest) { r.DropEnv = []string{"*_token", "Db_*"} })
	if _, ok := env["GH_TOKEN"]; ok || env["OPENAI_API_KEY"] != "v-openai" || !slices.Equal(info.DroppedEnv, []string{"GH_TOKEN", "db_password"}) {
		t.Errorf("DropEnv [*_token Db_*]: GH_TOKEN present %v, OPENAI_API_KEY=%q, DroppedEnv %q; want absent, v-openai, [GH_TOKEN db_password]",
			ok, env["OPENAI_API_KEY"], info.DroppedEnv)
	}
}

// ecoSetSecret sets a variable in the test process that no child started
// with ClearEnv may see, and removes it when the test ends. Its children
// inherit it, so the test must not run in parallel with one that compares
// a child's whole environment (TestStartEnv): t.Setenv enforces that.
func ecoSetSecret(t *testing.T) (name, value string) {
	t.Helper()
	name = "PROC_TEST_SECRET_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	value = "hunter2"
	t.Setenv(name, value)
	return name, value
}

// TestClearEnv is not parallel: its variable would show in the children
// of parallel tests that compare their whole environment (TestStartEnv).
func TestClearEnv(t *testing.T) {
	ctx := testCtx(t)
	secret, value := ecoSetSecret(t)
	var updates atomic.Int32
	m := newManager(t, proc.Options{
		OwnerEnv: "PROC_TEST_OWNER",
		UpdateEnv: func(env []string) ([]string, error) {
			updates.Add(1)
			return append(env, "PROC_TEST_UPDATED=1"), nil
		},
	})

	// The control: without ClearEnv the child sees the test's variable and
	// the hook's, so their absence below means something.
	plain := mgrEnvOwn(ctx, t, m, helperReq("mgr-env"))
	for _, kv := range []string{secret + "=" + value, "PROC_TEST_UPDATED=1"} {
		if !slices.Contains(plain, kv) {
			t.Fatalf("without ClearEnv the child's environment lacks %s", kv)
		}
	}

	req := helperReq("mgr-env")
	req.ClearEnv = true
	req.Env["KEEP"] = "1"
	req.Env["DROP"] = "2"
	req.UnsetEnv = []string{"DROP", "HOME"}
	req.Owner = "alice"
	calls := updates.Load()
	got := mgrEnvOwn(ctx, t, m, req)
	want := []string{"GORACE=" + helperGorace, "KEEP=1", helperEnv + "=mgr-env", "PROC_TEST_OWNER=alice"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("with ClearEnv the child's environment is\n%q\nwant exactly\n%q", got, want)
	}
	if n := updates.Load() - calls; n != 0 {
		t.Errorf("UpdateEnv was called %d times for a ClearEnv start; want 0", n)
	}
}

func TestStartOrGetEnvironment(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	env := map[string]string{helperEnv: "mgr-exit", "GORACE": helperGorace, "A": "1"}
	orig := proc.StartRequest{ID: "env", Args: helperArgv("0"), Env: env, UnsetEnv: []string{"B"}}
	p, started, err := m.StartOrGet(orig)
	if err != nil || !started {
		t.Fatalf("first StartOrGet() = %v, %v; want true, nil", started, err)
	}
	waitFinal(ctx, t, p)
	env["A"] = "changed by the caller after the start" // must not change the record

	with := func(edit func(*proc.StartRequest)) proc.StartRequest {
		req := orig
		req.Env = map[string]string{helperEnv: "mgr-exit", "GORACE": helperGorace, "A": "1"}
		req.UnsetEnv = []string{"B"}
		edit(&req)
		return req
	}
	for _, tc := range []struct {
		name string
		req  proc.StartRequest
		same bool
	}{
		{"equal-copies", with(func(*proc.StartRequest) {}), true},
		{"not-compared-timeout", with(func(r *proc.StartRequest) { r.Timeout = time.Hour }), true},
		{"callers-map-changed", with(func(r *proc.StartRequest) { r.Env = env }), false},
		{"other-env-value", with(func(r *proc.StartRequest) { r.Env["A"] = "2" }), false},
		{"extra-env", with(func(r *proc.StartRequest) { r.Env["C"] = "3" }), false},
		{"env-missing", with(func(r *proc.StartRequest) { delete(r.Env, "A") }), false},
		{"other-unset-env", with(func(r *proc.StartRequest) { r.UnsetEnv = []string{"C"} }), false},
		{"no-unset-env", with(func(r *proc.StartRequest) { r.UnsetEnv = nil }), false},
		{"clear-env", with(func(r *proc.StartRequest) { r.ClearEnv = true }), false},
		{"background", with(func(r *proc.StartRequest) { r.Background = true }), false},
	} {
		got, started, err := m.StartOrGet(tc.req)
		switch {
		case tc.same && (err != nil || started || got != p):
			t.Errorf("%s: StartOrGet() = %p, %v, %v; want %p, false, nil", tc.name, got, started, err, p)
		case !tc.same && (!errors.Is(err, proc.ErrDuplicateID) || started || got != nil):
			t.Errorf("%s: StartOrGet() = %p, %v, %v; want nil, false, ErrDuplicateID", tc.name, got, started, err)
		}
	}

	// An empty Env or UnsetEnv asks for the same as a nil one.
	bare := proc.StartRequest{ID: "bare", Args: helperArgv("0")}
	if _, _, err := m.StartOrGet(bare); err != nil {
		t.Fatalf("StartOrGet(bare) = %v", err)
	}
	bare.Env, bare.UnsetEnv = map[string]string{}, []string{}
	if _, started, err := m.StartOrGet(bare); err != nil || started {
		t.Errorf("StartOrGet(bare with empty Env and UnsetEnv) = %v, %v; want the record, false, nil", started, err)
	}
}
