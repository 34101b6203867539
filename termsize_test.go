package proc_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/procvisor/proc"
)

// TestStartSizeCap pins that a terminal size above 1,000,000 cells is
// refused at Start, whether built in Go or decoded from a client's JSON,
// before anything starts, and that the cap itself is allowed.
func TestStartSizeCap(t *testing.T) {
	t.Parallel()
	m := newManager(t, proc.Options{})
	var decoded proc.StartRequest
	if err := json.Unmarshal([]byte(`{"command":"true","tty":true,"size":{"rows":65535,"cols":65535}}`), &decoded); err != nil {
		t.Fatalf("decoding the request: %v", err)
	}
	for _, tc := range []struct {
		name string
		req  proc.StartRequest
	}{
		{"json-65535x65535", decoded},
		{"1000x1001", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.Size = proc.TermSize{Rows: 1000, Cols: 1001} })},
		{"65535x16", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.Size = proc.TermSize{Rows: 65535, Cols: 16} })},
		{"16x65535", withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.Size = proc.TermSize{Rows: 16, Cols: 65535} })},
	} {
		mgrWantRefused(t, m, m, fmt.Sprintf("Start(%s)", tc.name), tc.req, proc.ErrInvalid, "Size", "1000000")
	}
	// At the cap, without a terminal (the size is checked either way).
	ok := withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.Size = proc.TermSize{Rows: 1000, Cols: 1000} })
	waitFinal(testCtx(t), t, mustStart(t, m, ok))
}
