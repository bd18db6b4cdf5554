package attach

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/multinet/multinet/internal/node/cnirequest"
	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/internal/testing/cnitest"
)

// An ADD that fails before any delegate ran (a NAD naming a plugin binary
// that does not exist, a NAD not found) attempted no attachment, so its DEL
// runs no delegate and succeeds, whatever became of the NAD or the API
// server since (§7.2: only attachments "that were attempted" are torn down).
// Before, DEL rebuilt the pod's current selection and ran
// the DEL of the missing plugin, which failed forever: the pod stayed
// Terminating.
func TestDelAfterAddThatRanNoDelegate(t *testing.T) {
	missing := func(e *env) string {
		return strings.Replace(e.bridgeConf("net-x", ""), `"type":"bridge"`, `"type":"mnu-no-such-plugin"`, 1)
	}
	tests := []struct {
		name string
		// before sets NAD ns1/net-x up before the ADD (nothing: no NAD).
		before func(e *env)
		// wantReason is in the ADD's error and Event.
		wantReason string
		// after changes the NAD or the API server between ADD and DEL.
		after func(e *env)
	}{
		{
			name:       "plugin missing, NAD unchanged",
			before:     func(e *env) { e.nads.put(podNS, "net-x", missing(e), nil) },
			wantReason: "mnu-no-such-plugin",
			after:      func(*env) {},
		},
		{
			name:       "plugin missing, NAD fixed",
			before:     func(e *env) { e.nads.put(podNS, "net-x", missing(e), nil) },
			wantReason: "mnu-no-such-plugin",
			after:      func(e *env) { e.bridgeNAD("net-x") },
		},
		{
			name:       "plugin missing, NAD deleted",
			before:     func(e *env) { e.nads.put(podNS, "net-x", missing(e), nil) },
			wantReason: "mnu-no-such-plugin",
			after:      func(e *env) { e.nads.clear() },
		},
		{
			name:       "plugin missing, API server down",
			before:     func(e *env) { e.nads.put(podNS, "net-x", missing(e), nil) },
			wantReason: "mnu-no-such-plugin",
			after:      func(e *env) { e.pods.setErr(errors.New("API server down")) },
		},
		{
			name:       "NAD not found, then created with a missing plugin",
			before:     func(*env) {},
			wantReason: "not found",
			after:      func(e *env) { e.nads.put(podNS, "net-x", missing(e), nil) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			tt.before(e)
			pod := e.podWithNetworks("net-x")
			id := "ctr-" + cnitest.UniqueName("")

			_, err := e.eng.Add(context.Background(), e.req(api.CmdAdd, id, pod))
			var te *types.Error
			if !errors.As(err, &te) || !strings.Contains(te.Msg, "ns1/net-x") || !strings.Contains(te.Msg, tt.wantReason) {
				t.Fatalf("ADD error = %v, want a CNI error naming ns1/net-x and %q", err, tt.wantReason)
			}
			if w := e.events.of("Warning", kube.ReasonAttachFailed); len(w) != 1 || !strings.Contains(w[0].Message, tt.wantReason) {
				t.Errorf("Warning events = %+v, want one naming %q", w, tt.wantReason)
			}
			if got := e.exec.of(""); len(got) != 0 {
				t.Fatalf("delegates ran during the failed ADD: %+v", got)
			}
			switch rec, err := e.store.Load(id); {
			case err != nil:
				t.Errorf("record after an ADD that attempted nothing: %v, want one with no attachments", err)
			case len(rec.Attachments) != 0 || rec.Complete || rec.PodName != pod.Name:
				t.Errorf("record = %+v, want pod %s, no attachments, not complete", rec, pod.Name)
			}

			tt.after(e)
			if err := e.eng.Del(context.Background(), e.req(api.CmdDel, id, pod)); err != nil {
				t.Fatalf("DEL after an ADD that attempted nothing: %v", err)
			}
			if got := e.exec.of(""); len(got) != 0 {
				t.Errorf("DEL ran delegates for attachments never attempted: %+v", got)
			}
			if _, err := e.store.Load(id); !errors.Is(err, state.ErrNotFound) {
				t.Errorf("record after DEL: %v, want ErrNotFound", err)
			}
			e.wantLeases(e.defaultNet, 0)
		})
	}
}

// A record with no attachments needs nothing of the request: DEL succeeds
// even when CNI_ARGS cannot be parsed (it would otherwise fail on every
// retry of the runtime).
func TestDelEmptyRecordWithBadArgs(t *testing.T) {
	e := newEnv(t, nil)
	id := "ctr-" + cnitest.UniqueName("")
	w := e.wire(api.CmdAdd, id, nil)
	w.Args = "K8S_POD_NAME" // no '=': parseArgs fails
	if _, err := e.eng.Add(context.Background(), cnirequest.Decode(w)); err == nil {
		t.Fatal("ADD with unparsable CNI_ARGS succeeded")
	}
	rec, err := e.store.Load(id)
	if err != nil || len(rec.Attachments) != 0 {
		t.Fatalf("record after the failed ADD = %+v, %v; want one with no attachments", rec, err)
	}
	w.Command = api.CmdDel
	if err := e.eng.Del(context.Background(), cnirequest.Decode(w)); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if got := e.exec.of(""); len(got) != 0 {
		t.Errorf("delegates ran: %+v", got)
	}
}
