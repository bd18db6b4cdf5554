package attach

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/testing/cnitest"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/selection"
)

// A NetworkAttachmentDefinition that changes after the pod was admitted
// can still make its ADD fail: the selection was valid
// when the webhook checked it (podnetworks.Check against the NAD as it was),
// and is not against the NAD as it is at ADD. The ADD fails before any
// delegate runs with CNI error 7 and one NetworkAttachFailed Warning Event,
// both carrying exactly podnetworks' message for the NAD as it now is (the
// message the webhook would deny the pod with now), and nothing is attached.
func TestAddNADChangedAfterAdmission(t *testing.T) {
	const element = `[{"name":"net-x","mac":"02:00:00:00:00:42"}]`
	withTuning := func(e *env) string {
		return strings.Replace(e.bridgeConf("net-x", ""), `}]}`, `},{"type":"tuning","capabilities":{"mac":true}}]}`, 1)
	}
	tests := []struct {
		name string
		// change changes NAD ns1/net-x after admission.
		change func(e *env)
		// want is in the message.
		want string
	}{
		{
			name:   "capability dropped",
			change: func(e *env) { e.nads.put(podNS, "net-x", e.bridgeConf("net-x", ""), nil) },
			want:   `field "mac": needs runtimeConfig "mac", but no plugin of CNI config "net-x" declares "capabilities": {"mac": true}`,
		},
		{
			name: "config made unusable",
			change: func(e *env) {
				e.nads.put(podNS, "net-x", strings.Replace(withTuning(e), `"cniVersion":"1.0.0"`, `"cniVersion":"9.9.9"`, 1), nil)
			},
			want: `field cniVersion: "9.9.9" is not a CNI version`,
		},
		{
			name: "resourceName made malformed",
			change: func(e *env) {
				e.nads.put(podNS, "net-x", withTuning(e), map[string]string{"k8s.v1.cni.cncf.io/resourceName": "sriov"})
			},
			want: `resourceName "sriov": must be vendor-domain/type`,
		},
		{
			name:   "deleted",
			change: func(e *env) { e.nads.clear() },
			want:   `NetworkAttachmentDefinition ns1/net-x not found`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.nads.put(podNS, "net-x", withTuning(e), nil)
			pod := e.podWithNetworks(element)
			check := func() error {
				v, err := podnetworks.Check(context.Background(),
					podnetworks.Pod{Namespace: pod.Namespace, Annotations: pod.Annotations},
					podnetworks.Options{NADs: e.nads})
				if err != nil {
					t.Fatalf("podnetworks.Check: %v", err)
				}
				return v.Err()
			}
			if err := check(); err != nil {
				t.Fatalf("at admission the selection %s is invalid: %v", pod.Annotations[selection.NetworksAnnotation], err)
			}
			tt.change(e)
			verdict := check()
			if verdict == nil || !strings.Contains(verdict.Error(), tt.want) {
				t.Fatalf("podnetworks.Check after the change: %v, want a problem containing %q", verdict, tt.want)
			}
			want := verdict.Error()

			id := "ctr-" + cnitest.UniqueName("")
			_, err := e.eng.Add(context.Background(), e.req(api.CmdAdd, id, pod))
			var te *types.Error
			if !errors.As(err, &te) || te.Code != types.ErrInvalidNetworkConfig || te.Msg != want {
				t.Fatalf("ADD error = %v, want CNI error %d %q", err, types.ErrInvalidNetworkConfig, want)
			}
			if w := e.events.of("Warning", kube.ReasonAttachFailed); len(w) != 1 || w[0].Message != want || w[0].Pod != pod.Namespace+"/"+pod.Name {
				t.Errorf("Warning events = %+v, want one on the pod with %q", w, want)
			}
			if calls := e.exec.of(""); len(calls) != 0 {
				t.Errorf("delegates ran for a selection the changed NAD makes invalid: %+v", calls)
			}
			if rec, err := e.store.Load(id); err != nil || len(rec.Attachments) != 0 {
				t.Errorf("record = %+v, %v; want one with no attachments", rec, err)
			}
			e.wantLinks()
			e.del(id, pod)
		})
	}
}
