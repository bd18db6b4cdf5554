package podnetworks

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// portMappings in the networks annotation (or the default-network
// override) is refused in a namespace whose Pod Security level forbids
// hostPort (baseline, restricted; an invalid level counts as restricted),
// naming the namespace, the level and the label; it is admitted in a
// privileged namespace and in one without the label (Kubernetes' default).
// The namespace's labels are read only when the pod asks for portMappings;
// a failed read is an error (the verdict is not known), not a verdict.
func TestPortMappingsPodSecurity(t *testing.T) {
	const portsConf = `{"cniVersion":"1.0.0","plugins":[{"type":"bridge"},{"type":"portmap","capabilities":{"portMappings":true}}]}`
	s := source(nad("ns1", "ports", portsConf, nil))
	const pm = `[{"name":"ports","portMappings":[{"hostPort":8080,"containerPort":80}]}]`
	for _, c := range []struct {
		name, level string // level "-": no label
		networks    string
		override    string
		want        string
	}{
		{"baseline", "baseline", pm, "", `networks[0] "ports": field "portMappings": namespace ns1 enforces Pod Security level "baseline" (label pod-security.kubernetes.io/enforce), which forbids hostPort`},
		{"restricted", "restricted", pm, "", `enforces Pod Security level "restricted"`},
		{"invalid level counts as restricted", "strict", pm, "", `enforces Pod Security level "restricted"`},
		{"override in baseline", "baseline", "", `{"name":"ports","portMappings":[{"hostPort":8080,"containerPort":80}]}`, `default-network[0] "ports": field "portMappings": namespace ns1 enforces Pod Security level "baseline"`},
		{"privileged", "privileged", pm, "", ""},
		{"no label", "-", pm, "", ""},
		{"no portMappings in baseline", "baseline", "ports", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			reads := 0
			labels := NamespaceLabelsFunc(func(_ context.Context, name string) (map[string]string, error) {
				reads++
				if name != "ns1" || c.level == "-" {
					return nil, nil
				}
				return map[string]string{PodSecurityEnforceLabel: c.level}, nil
			})
			ann := map[string]string{}
			if c.networks != "" {
				ann = networks(c.networks)
			}
			if c.override != "" {
				ann["v1.multus-cni.io/default-network"] = c.override
			}
			v, err := Check(context.Background(), Pod{Namespace: "ns1", Annotations: ann}, Options{Policy: Policy{NADTrust: NADTrust{Namespaces: labels}}, NADs: s})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case c.want == "" && v.Err() != nil:
				t.Errorf("refused: %v", v.Err())
			case c.want != "" && (v.Err() == nil || !strings.Contains(v.Err().Error(), c.want)):
				t.Errorf("verdict %v, want it to contain %q", v.Err(), c.want)
			}
			if asks := strings.Contains(c.networks+c.override, "portMappings"); (reads > 0) != asks {
				t.Errorf("namespace labels read %d times; the pod asks for portMappings: %v", reads, asks)
			}
		})
	}

	failing := NamespaceLabelsFunc(func(context.Context, string) (map[string]string, error) { return nil, errors.New("API server down") })
	_, err := Check(context.Background(), Pod{Namespace: "ns1", Annotations: networks(pm)}, Options{Policy: Policy{NADTrust: NADTrust{Namespaces: failing}}, NADs: s})
	if err == nil || !strings.Contains(err.Error(), "Pod Security level") {
		t.Errorf("labels unreadable: %v, want an error", err)
	}
}
