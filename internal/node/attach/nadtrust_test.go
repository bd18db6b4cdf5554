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
)

// An ADD to a NAD that breaks the NAD trust policy (stored before the
// policy, or past a webhook that did not enforce it) fails before any
// delegate runs: the CNI error and the pod's Warning Event name the NAD,
// the key, the plugin and the rule, and nothing is made on the node (no
// bridge, no lease in the NAD's dataDir). Once an admin labels the
// namespace trusted, the same ADD attaches.
func TestAddRefusesUntrustedNAD(t *testing.T) {
	labels := map[string]map[string]string{}
	e := newEnv(t, func(o *envOptions) {
		o.NADTrust = podnetworks.NADTrust{Policy: podnetworks.DefaultNADTrustPolicy(),
			Namespaces: podnetworks.NamespaceLabelsFunc(func(_ context.Context, name string) (map[string]string, error) {
				return labels[name], nil
			})}
	})
	e.isolationNADs()
	pod := e.podWithNetworks("net-a")
	id := "ctr-" + cnitest.UniqueName("")

	_, err := e.eng.Add(context.Background(), e.req(api.CmdAdd, id, pod))
	var te *types.Error
	if !errors.As(err, &te) || te.Code != types.ErrInvalidNetworkConfig {
		t.Fatalf("ADD error = %v, want ErrInvalidNetworkConfig", err)
	}
	want := []string{"NetworkAttachmentDefinition ns1/net-a", `key "plugins[0].bridge"`, `plugin "bridge"`, `key "plugins[0].ipam.dataDir"`, `plugin "host-local"`, `NAD trust rule "tenants" of namespace "ns1"`}
	warnings := e.events.of("Warning", kube.ReasonAttachFailed)
	if len(warnings) != 1 {
		t.Fatalf("Warning events %+v, want one %s", warnings, kube.ReasonAttachFailed)
	}
	for _, s := range want {
		if !strings.Contains(te.Msg, s) {
			t.Errorf("ADD error %q does not contain %q", te.Msg, s)
		}
		if !strings.Contains(warnings[0].Message, s) {
			t.Errorf("Warning event %q does not contain %q", warnings[0].Message, s)
		}
	}
	if got := e.exec.of(""); len(got) != 0 {
		t.Errorf("delegates ran for an untrusted NAD: %+v", got)
	}
	e.wantLinks()
	e.wantLeases("net-a", 0)
	if err := e.eng.Del(context.Background(), e.req(api.CmdDel, id, nil)); err != nil {
		t.Fatalf("DEL after the refused ADD: %v", err)
	}

	// An admin trusts the namespace: the same ADD attaches.
	labels[podNS] = map[string]string{podnetworks.NADTrustLabel: podnetworks.NADTrustUnrestricted}
	e.events.mu.Lock()
	e.events.events = nil
	e.events.mu.Unlock()
	e.exec.reset()
	id = "ctr-" + cnitest.UniqueName("")
	if _, err := e.eng.Add(context.Background(), e.req(api.CmdAdd, id, pod)); err != nil {
		t.Fatalf("ADD in the trusted namespace: %v", err)
	}
	e.wantAttached(id, "mnu-default", "ns1/net-a")
	e.del(id, pod)
}
