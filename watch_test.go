package proc_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/procvisor/proc"
)

// Tests of what a request may ask of watches and buffers (design
// sections 8 and 19): the caps a request is held to, whether it comes
// from JSON or from Go.

// TestStartBounds: a request whose HeadBytes + TailBytes or whose
// MaxLineLength is above Options.MaxBufferBytes is ErrInvalid naming the
// cap, sums that overflow included, and starts nothing; one at the cap
// starts. The first case is a request that once crashed the host: a line
// buffer sized by max_line_length.
func TestStartBounds(t *testing.T) {
	t.Parallel()
	const capBytes = 1 << 20
	for name, tc := range map[string]struct {
		opts proc.Options
		json string
		req  proc.StartRequest
	}{
		"json-max-line-max-int": {json: `{"command":"echo hi","max_line_length":9223372036854775807,"watch":[{"name":"a","pattern":"hi"}]}`},
		"json-max-line-1TiB":    {json: `{"command":"echo hi","max_line_length":1099511627776,"watch":[{"name":"a","pattern":"hi"}]}`},
		"json-head-1TiB":        {json: `{"command":"echo hi","head_bytes":1099511627776}`},
		"json-tail-1TiB":        {json: `{"command":"echo hi","tail_bytes":1099511627776}`},
		"json-sum":              {json: `{"command":"echo hi","head_bytes":134217728,"tail_bytes":134217729}`},
		"go-sum-overflows":      {req: withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.HeadBytes, r.TailBytes = math.MaxInt, math.MaxInt })},
		"go-head-max-int":       {req: withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.HeadBytes, r.TailBytes = math.MaxInt, 1 })},
		"go-own-cap-sum":        {opts: proc.Options{MaxBufferBytes: capBytes}, req: withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.HeadBytes, r.TailBytes = capBytes/2, capBytes/2+1 })},
		"go-own-cap-line":       {opts: proc.Options{MaxBufferBytes: capBytes}, req: withReq(mgrExitReq(0), func(r *proc.StartRequest) { r.MaxLineLength = capBytes + 1 })},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, m := testManager(t, tc.opts)
			req := tc.req
			if tc.json != "" {
				if err := json.Unmarshal([]byte(tc.json), &req); err != nil {
					t.Fatalf("decode %s: %v", tc.json, err)
				}
			}
			p, err := m.Start(req)
			if !errors.Is(err, proc.ErrInvalid) || !strings.Contains(err.Error(), "MaxBufferBytes") {
				t.Fatalf("Start(%+v) = %v, %v; want ErrInvalid naming MaxBufferBytes", req, p, err)
			}
			if evs, _, _ := m.Events(0, 0); len(evs) != 0 || len(m.List()) != 0 {
				t.Errorf("after the refused start: events %v, records %v; want none", evs, m.List())
			}
		})
	}
	for name, edit := range map[string]func(*proc.StartRequest){
		"sum-at-cap":  func(r *proc.StartRequest) { r.HeadBytes, r.TailBytes = capBytes/2, capBytes/2 },
		"line-at-cap": func(r *proc.StartRequest) { r.MaxLineLength = capBytes },
	} {
		withManager(t, name, proc.Options{MaxBufferBytes: capBytes}, func(t *testing.T, ctx context.Context, m *proc.Manager) {
			req := withReq(cvReq("out:hi\\n"), edit)
			req.Watch = []proc.Watch{{Name: "a", Pattern: "hi"}}
			waitFinal(ctx, t, mustStart(t, m, req))
			if got := matchedLines(allEvents(t, m)); got != "a=hi" {
				t.Errorf("matched %q; want a=hi", got)
			}
		})
	}
}

// matchedLines is the matched events of evs, as "watch=line" a line each.
func matchedLines(evs []proc.Event) string {
	var got []string
	for _, ev := range evs {
		if ev.Kind == proc.EventMatched {
			got = append(got, ev.Watch+"="+ev.Line)
		}
	}
	return strings.Join(got, "\n")
}

// TestWatchPatternLength: a pattern of MaxWatchPattern bytes starts, one
// byte more is ErrInvalid; so is a pattern Go refuses as too large.
func TestWatchPatternLength(t *testing.T) {
	t.Parallel()
	ctx, m := testManager(t, proc.Options{})
	for name, pattern := range map[string]string{
		"over-max":  strings.Repeat("x", proc.MaxWatchPattern+1),
		"too-large": "((((x{1000}){1000}){1000}){1000})",
	} {
		req := mgrExitReq(0)
		req.Watch = []proc.Watch{{Name: "a", Pattern: pattern}}
		if p, err := m.Start(req); !errors.Is(err, proc.ErrInvalid) {
			t.Errorf("%s: Start(pattern of %d bytes) = %v, %v; want ErrInvalid", name, len(pattern), p, err)
		}
	}
	req := cvReq("out:" + strings.Repeat("x", proc.MaxWatchPattern) + "\\n")
	req.MaxLineLength = 2 * proc.MaxWatchPattern
	req.Watch = []proc.Watch{{Name: "a", Pattern: strings.Repeat("x", proc.MaxWatchPattern)}}
	waitFinal(ctx, t, mustStart(t, m, req))
	if got, want := matchedLines(allEvents(t, m)), "a="+strings.Repeat("x", proc.MaxWatchPattern); got != want {
		t.Errorf("matched %d bytes; want %d", len(got), len(want))
	}
}
