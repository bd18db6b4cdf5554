package webhook

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/selection"
)

var isolated = selection.IsolationPolicy{Enabled: true, GlobalNamespaces: []string{"default"}}

func TestValidatePodsCreate(t *testing.T) {
	tests := []struct {
		name   string
		opts   Options
		reqNS  string
		annots map[string]string
		result string
		msg    []string // substrings of the message
	}{{
		name:   "no annotation",
		result: ResultAllowed,
	}, {
		name:   "valid comma form",
		annots: networks("net-a, other/net-a@eth3"),
		result: ResultAllowed,
	}, {
		name:   "bad MAC names the element and field",
		annots: networks(`[{"name":"net-a"},{"name":"net-b","mac":"zz"}]`),
		result: ResultDenied,
		msg:    []string{`metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks[1] "net-b": field "mac": "zz"`, "§4.1.2.1.4"},
	}, {
		name:   "bad port mapping field",
		annots: networks(`[{"name":"net-a","portMappings":[{"hostPort":0,"containerPort":80}]}]`),
		result: ResultDenied,
		msg:    []string{`field "portMappings[0].hostPort"`},
	}, {
		name:   "unknown key",
		annots: networks(`[{"name":"net-a","ip":["10.0.0.1"]}]`),
		result: ResultDenied,
		msg:    []string{`"ip"`, `"ips"`},
	}, {
		name:   "JSON syntax",
		annots: networks(`[{"name":`),
		result: ResultDenied,
		msg:    []string{`metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks`},
	}, {
		name:   "bad default-network",
		annots: map[string]string{selection.DefaultNetworkAnnotation: "a,b"},
		result: ResultDenied,
		msg:    []string{`metadata.annotations["v1.multus-cni.io/default-network"]: default-network`},
	}, {
		name:   "both annotations bad: both named",
		annots: map[string]string{selection.DefaultNetworkAnnotation: `{"name":"x","interface":"eth9"}`, selection.NetworksAnnotation: "a,,b"},
		result: ResultDenied,
		msg:    []string{`default-network"]`, `networks"]`},
	}, {
		name:   "isolation off: other namespace allowed",
		annots: networks("other/net-a"),
		result: ResultAllowed,
	}, {
		name:   "isolation: other namespace denied",
		opts:   Options{Policy: podnetworks.Policy{Isolation: isolated}},
		annots: networks("net-a,other/net-a"),
		result: ResultDenied,
		msg:    []string{`metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks[1]: network "other/net-a" is in namespace "other"`, "§7.4"},
	}, {
		name:   "isolation: own and global namespaces allowed",
		opts:   Options{Policy: podnetworks.Policy{Isolation: isolated}},
		annots: networks(`[{"name":"net-a"},{"name":"shared","namespace":"default"},{"name":"plain","namespace":"ns1"}]`),
		result: ResultAllowed,
	}, {
		name:   "isolation: default-network override in another namespace denied",
		opts:   Options{Policy: podnetworks.Policy{Isolation: isolated}},
		annots: map[string]string{selection.DefaultNetworkAnnotation: "kube-system/sriov"},
		result: ResultDenied,
		msg:    []string{`metadata.annotations["v1.multus-cni.io/default-network"]: network "kube-system/sriov"`},
	}, {
		name:   "isolation: pod namespace from the request",
		opts:   Options{Policy: podnetworks.Policy{Isolation: isolated}},
		reqNS:  "other",
		annots: networks("other/net-a"),
		result: ResultAllowed,
	}, {
		name:   "missing NAD: denied with the message multinetd's ADD would give",
		annots: networks("net-a,gone"),
		result: ResultDenied,
		msg:    []string{`metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks[1] "gone": NetworkAttachmentDefinition ns1/gone not found (spec §3.4.1)`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newHooks(t, tt.opts)
			p := pod("ns1", tt.annots)
			ns := "ns1"
			if tt.reqNS != "" {
				p.Namespace, ns = "", tt.reqNS
			}
			resp := w.ValidatePods(context.Background(), podRequest(t, admissionv1.Create, ns, p, nil))
			checkResponse(t, resp, tt.result, tt.msg...)
		})
	}
}

func TestValidatePodsUpdate(t *testing.T) {
	oneA := []corev1.Container{withResources("app", map[string]int64{resA: 1})}
	tests := []struct {
		name     string
		old, new map[string]string
		cs       []corev1.Container
		result   string
		msg      string
	}{{
		name:   "unchanged malformed annotation is allowed",
		old:    networks("a,,b"),
		new:    networks("a,,b"),
		result: ResultAllowed,
	}, {
		name:   "changed to malformed",
		old:    networks("net-a"),
		new:    networks("net-a@eth1,net-a@eth1"),
		result: ResultDenied,
		msg:    `field "interface"`,
	}, {
		name:   "removed",
		old:    networks("net-a"),
		new:    nil,
		result: ResultAllowed,
	}, {
		name:   "added device network, even within the pod's devices: not hot-pluggable",
		old:    networks("plain"),
		new:    networks("plain,net-a"),
		cs:     oneA,
		result: ResultDenied,
		msg:    `networks[1] "net-a": cannot be hot-plugged into a pod that exists: NetworkAttachmentDefinition ns1/net-a needs a device of resource "example.com/net-a"`,
	}, {
		name:   "a device network the pod has stays; a plain one is added",
		old:    networks("net-a"),
		new:    networks("net-a,plain"),
		cs:     oneA,
		result: ResultAllowed,
	}, {
		name:   "added default-route element: not hot-pluggable",
		old:    networks("plain"),
		new:    networks(`[{"name":"plain"},{"name":"plain","interface":"gw0","default-route":[]}]`),
		result: ResultDenied,
		msg:    `networks[1] "plain": field "default-route": cannot be hot-plugged into a pod that exists`,
	}, {
		name:   "removed default-route element: not hot-pluggable",
		old:    networks(`[{"name":"plain","default-route":[]}]`),
		new:    networks("plain"),
		result: ResultDenied,
		msg:    `the element of network ns1/plain with "default-route" cannot be removed from a pod that exists`,
	}, {
		name:   "added network beyond the pod's devices",
		old:    networks("net-a"),
		new:    networks("net-a,net-a2,net-b"),
		cs:     oneA,
		result: ResultDenied,
		msg:    `networks[1] "net-a2": needs device 2 of resource "example.com/net-a", but the pod's containers request 1 of it`,
	}, {
		name:   "added NAD that does not exist: denied, the same rules as on CREATE",
		old:    networks("net-a"),
		new:    networks("net-a,gone"),
		cs:     oneA,
		result: ResultDenied,
		msg:    `networks[1] "gone": NetworkAttachmentDefinition ns1/gone not found`,
	}, {
		name:   "changed to a key no plugin declares",
		old:    networks("net-a"),
		new:    networks(`[{"name":"net-a"},{"name":"nocap","mac":"02:00:00:00:00:01"}]`),
		cs:     oneA,
		result: ResultDenied,
		msg:    `networks[1] "nocap": field "mac": needs runtimeConfig "mac", but no plugin of CNI config "nocap" declares "capabilities": {"mac": true} (spec §4.1.2.1.4.2)`,
	}, {
		name:   "isolation applies on update",
		old:    networks("net-a"),
		new:    networks("net-a,other/net-a"),
		cs:     []corev1.Container{withResources("app", map[string]int64{resA: 2})},
		result: ResultDenied,
		msg:    "§7.4",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newHooks(t, Options{Policy: podnetworks.Policy{Isolation: isolated}})
			oldPod, newPod := pod("ns1", tt.old, tt.cs...), pod("ns1", tt.new, tt.cs...)
			resp := w.ValidatePods(context.Background(), podRequest(t, admissionv1.Update, "ns1", newPod, oldPod))
			checkResponse(t, resp, tt.result, tt.msg)
		})
	}
}

func TestValidateNADs(t *testing.T) {
	withConfig := func(cfg string) *nadv1.NetworkAttachmentDefinition {
		n := nad("ns1", "n1", "")
		n.Spec.Config = cfg
		return n
	}
	withRN := func(key, v string) *nadv1.NetworkAttachmentDefinition {
		n := nad("ns1", "n1", "")
		n.Annotations = map[string]string{key: v}
		return n
	}
	tests := []struct {
		name     string
		old, nad *nadv1.NetworkAttachmentDefinition
		result   string
		msg      []string
	}{{
		name:   "valid single config without name",
		nad:    withConfig(`{"cniVersion":"1.0.0","type":"macvlan","master":"eth0"}`),
		result: ResultAllowed,
	}, {
		name:   "valid list",
		nad:    withConfig(`{"cniVersion":"1.0.0","name":"n1","plugins":[{"type":"bridge"},{"type":"tuning"}]}`),
		result: ResultAllowed,
	}, {
		name:   "empty spec.config refers to an on-disk network",
		nad:    withConfig(""),
		result: ResultAllowed,
	}, {
		name:   "not JSON",
		nad:    withConfig(`{"cniVersion":`),
		result: ResultDenied,
		msg:    []string{"spec.config: not a JSON object"},
	}, {
		name:   "missing type",
		nad:    withConfig(`{"cniVersion":"1.0.0"}`),
		result: ResultDenied,
		msg:    []string{"spec.config: field type: missing"},
	}, {
		// libcni and Multus run a config without cniVersion (as CNI
		// 0.1.0); so does the daemon, so the webhook admits it (lint warns).
		name:   "missing cniVersion",
		nad:    withConfig(`{"type":"bridge"}`),
		result: ResultAllowed,
	}, {
		name:   "list without cniVersion",
		nad:    withConfig(`{"name":"n1","plugins":[{"type":"bridge"}]}`),
		result: ResultAllowed,
	}, {
		name:   "unsupported cniVersion",
		nad:    withConfig(`{"cniVersion":"9.9.9","type":"bridge"}`),
		result: ResultDenied,
		msg:    []string{"spec.config: field cniVersion"},
	}, {
		name:   "plugin without type in a list",
		nad:    withConfig(`{"cniVersion":"1.0.0","plugins":[{"type":"bridge"},{"mtu":1400}]}`),
		result: ResultDenied,
		msg:    []string{"field plugins[1].type"},
	}, {
		name:   "delegating to the shim",
		nad:    withConfig(`{"cniVersion":"1.0.0","type":"multinet-shim"}`),
		result: ResultDenied,
		msg:    []string{"spec.config: field type"},
	}, {
		name:   "valid resourceName",
		nad:    withRN(nadv1.ResourceNameAnnotation, "example.com/net-a"),
		result: ResultAllowed,
	}, {
		name:   "resourceName without domain",
		nad:    withRN(nadv1.ResourceNameAnnotation, "net-a"),
		result: ResultDenied,
		msg:    []string{`metadata.annotations["k8s.v1.cni.cncf.io/resourceName"]: resourceName "net-a": must be vendor-domain/type`},
	}, {
		name:   "legacy resourceName key is checked too",
		nad:    withRN(nadv1.LegacyResourceNameAnnotation, "a/b/c"),
		result: ResultDenied,
		msg:    []string{`metadata.annotations["kubernetes.v1.cni.cncf.io/resourceName"]`},
	}, {
		name:   "empty resourceName",
		nad:    withRN(nadv1.ResourceNameAnnotation, ""),
		result: ResultDenied,
		msg:    []string{`resourceName"]: resourceName: is required`},
	}, {
		name:   "kubernetes.io domain is reserved",
		nad:    withRN(nadv1.ResourceNameAnnotation, "kubernetes.io/nic"),
		result: ResultDenied,
		msg:    []string{"reserved"},
	}, {
		name: "both problems reported",
		nad: func() *nadv1.NetworkAttachmentDefinition {
			n := withConfig(`[]`)
			n.Annotations = map[string]string{nadv1.ResourceNameAnnotation: "x"}
			return n
		}(),
		result: ResultDenied,
		msg:    []string{"spec.config", "resourceName"},
	}, {
		name: "update: unchanged invalid fields are not checked again",
		old:  withConfig(`{"type":"bridge"}`),
		nad: func() *nadv1.NetworkAttachmentDefinition {
			n := withConfig(`{"type":"bridge"}`)
			n.Labels = map[string]string{"a": "b"}
			return n
		}(),
		result: ResultAllowed,
	}, {
		name:   "update: changed config is checked",
		old:    withConfig(`{"cniVersion":"1.0.0","type":"bridge"}`),
		nad:    withConfig(`{"cniVersion":"banana","type":"bridge"}`),
		result: ResultDenied,
		msg:    []string{"field cniVersion"},
	}, {
		name:   "update: changed resourceName is checked",
		old:    withRN(nadv1.ResourceNameAnnotation, "example.com/a"),
		nad:    withRN(nadv1.ResourceNameAnnotation, "bad"),
		result: ResultDenied,
		msg:    []string{"resourceName"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newHooks(t, Options{})
			op := admissionv1.Create
			if tt.old != nil {
				op = admissionv1.Update
			}
			resp := w.ValidateNADs(context.Background(), nadRequest(t, op, tt.nad, tt.old))
			checkResponse(t, resp, tt.result, tt.msg...)
		})
	}
}

func TestValidateNADsGenerateName(t *testing.T) {
	w := newHooks(t, Options{})
	n := nad("ns1", "", "")
	n.GenerateName = "net-"
	req := nadRequest(t, admissionv1.Create, n, nil)
	req.Name = ""
	if resp := w.ValidateNADs(context.Background(), req); !resp.Allowed {
		t.Fatalf("generateName NAD without config name denied: %s", message(resp))
	}
}

func TestValidateIgnoresOtherRequests(t *testing.T) {
	w := newHooks(t, Options{Policy: podnetworks.Policy{Isolation: isolated}})
	bad := pod("ns1", networks("a,,b"))
	r := podRequest(t, admissionv1.Delete, "ns1", bad, nil)
	if resp := w.ValidatePods(context.Background(), r); !resp.Allowed {
		t.Errorf("pod DELETE denied: %s", message(resp))
	}
	r = podRequest(t, admissionv1.Create, "ns1", bad, nil)
	if resp := w.ValidateNADs(context.Background(), r); !resp.Allowed {
		t.Errorf("pod sent to the NAD validator denied: %s", message(resp))
	}
	n := nad("ns1", "x", "bad")
	if resp := w.ValidatePods(context.Background(), nadRequest(t, admissionv1.Create, n, nil)); !resp.Allowed {
		t.Errorf("NAD sent to the pod validator denied: %s", message(resp))
	}
}
