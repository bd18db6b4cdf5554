package webhook

import (
	"context"
	"errors"
	"net/http"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// nsLabels is the namespaces' labels the trust tests know.
func nsLabels(err error) podnetworks.NamespaceLabelsFunc {
	return func(_ context.Context, name string) (map[string]string, error) {
		if err != nil {
			return nil, err
		}
		if name == "trusted" {
			return map[string]string{podnetworks.NADTrustLabel: podnetworks.NADTrustUnrestricted}, nil
		}
		return nil, nil
	}
}

func trustOptions(err error) Options {
	return Options{Policy: podnetworks.Policy{NADTrust: podnetworks.NADTrust{Policy: podnetworks.DefaultNADTrustPolicy(), Namespaces: nsLabels(err)}}}
}

func configNAD(ns, config string) *nadv1.NetworkAttachmentDefinition {
	n := nad(ns, "n1", "")
	n.Spec.Config = config
	return n
}

// TestValidateNADsTrust: under the shipped NAD trust policy a tenant's NAD
// with a host-reaching key is denied at CREATE and UPDATE, the message
// naming the key, the plugin and the rule; an admin-labelled namespace's is
// admitted; an UPDATE of a NAD that already broke the policy (stored
// before it) is admitted; an unreadable namespace answers 503.
func TestValidateNADsTrust(t *testing.T) {
	w := newHooks(t, trustOptions(nil))
	uplink := `{"cniVersion":"1.0.0","type":"host-device","device":"eth0"}`
	cases := []struct {
		name, config string
		msg          []string
	}{
		{"host-device device", uplink, []string{`spec.config: key "device" ("eth0") of plugin "host-device" names a node object`, `NAD trust rule "tenants" of namespace "team-a"`}},
		{"dataDir", `{"cniVersion":"1.0.0","type":"ptp","ipam":{"type":"host-local","subnet":"10.1.0.0/24","dataDir":"/etc"}}`, []string{`key "ipam.dataDir" ("/etc") of plugin "host-local"`, `rule "tenants"`}},
		{"runtimeConfig", `{"cniVersion":"1.0.0","type":"ptp","runtimeConfig":{"CNIDeviceInfoFile":"/etc/passwd"}}`, []string{`key "runtimeConfig"`, `plugin "ptp"`, `rule "tenants"`}},
		{"socketPath", `{"cniVersion":"1.0.0","type":"ptp","ipam":{"type":"multinet-ipam","socketPath":"/run/multinet/multinet.sock"}}`, []string{`key "ipam.socketPath" ("/run/multinet/multinet.sock") of plugin "multinet-ipam"`, `rule "tenants"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := configNAD("team-a", c.config)
			checkResponse(t, w.ValidateNADs(context.Background(), nadRequest(t, admissionv1.Create, n, nil)), ResultDenied, c.msg...)
			// An UPDATE that adds the key is denied too.
			old := configNAD("team-a", `{"cniVersion":"1.0.0","type":"ptp"}`)
			checkResponse(t, w.ValidateNADs(context.Background(), nadRequest(t, admissionv1.Update, n, old)), ResultDenied, c.msg...)
			checkResponse(t, w.ValidateNADs(context.Background(), nadRequest(t, admissionv1.Create, configNAD("trusted", c.config), nil)), ResultAllowed)
		})
	}
	// Stored before the policy: a labels-only UPDATE is admitted.
	old := configNAD("team-a", uplink)
	n := old.DeepCopy()
	n.Labels = map[string]string{"x": "y"}
	checkResponse(t, w.ValidateNADs(context.Background(), nadRequest(t, admissionv1.Update, n, old)), ResultAllowed)

	// Without a policy (Options.NADTrust unset) the same NAD is admitted.
	checkResponse(t, newHooks(t, Options{}).ValidateNADs(context.Background(), nadRequest(t, admissionv1.Create, configNAD("team-a", uplink), nil)), ResultAllowed)

	resp := newHooks(t, trustOptions(errors.New("api down"))).ValidateNADs(context.Background(), nadRequest(t, admissionv1.Create, configNAD("team-a", uplink), nil))
	if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusServiceUnavailable {
		t.Errorf("unreadable namespace: %+v, want 503", resp.Result)
	}
}
