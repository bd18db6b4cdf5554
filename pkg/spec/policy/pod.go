package policy

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"github.com/multinet/multinet/pkg/spec/devinfo"
	"github.com/multinet/multinet/pkg/spec/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodFromObject builds a Pod from a pod object: its labels, the named ports
// of its containers and init containers, and its attachments from the
// network-status annotation. Entries with "default": true, and entries whose
// name is not "namespace/name" (the default network's), are left out. An
// entry without "interface", or whose device-info is of type vhost-user or
// memif, has NoKernelInterface. A pod that has terminated (phase Succeeded
// or Failed) gets no attachments: its addresses may belong to another pod.
//
// Errors: a network-status that does not decode (pkg/spec/status), or an address
// in it that does not parse; the Pod returned then has no attachments.
func PodFromObject(p *corev1.Pod) (Pod, error) {
	out := Pod{Namespace: p.Namespace, Name: p.Name, Labels: p.Labels}
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, cp := range c.Ports {
				if cp.Name != "" {
					out.Ports = append(out.Ports, NamedPort{Name: cp.Name, Protocol: cp.Protocol, Port: cp.ContainerPort})
				}
			}
		}
	}
	value, ok := p.Annotations[status.Annotation]
	if !ok || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return out, nil
	}
	list, err := status.Decode(value)
	if err != nil {
		return out, fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	var atts []Attachment
	for i, st := range list {
		a, ok, err := attachmentOf(st)
		if err != nil {
			return out, fmt.Errorf("pod %s/%s: network-status[%d]: %w", p.Namespace, p.Name, i, err)
		}
		if ok {
			atts = append(atts, a)
		}
	}
	out.Attachments = atts
	return out, nil
}

// attachmentOf reads one network-status entry; ok is false for the default
// network's.
func attachmentOf(st status.NetworkStatus) (Attachment, bool, error) {
	ns, name, qualified := strings.Cut(st.Name, "/")
	if st.Default || !qualified {
		return Attachment{}, false, nil
	}
	a := Attachment{Network: types.NamespacedName{Namespace: ns, Name: name}, Interface: st.Interface}
	for _, s := range st.IPs {
		ip, err := parseIP(s)
		if err != nil {
			return Attachment{}, false, fmt.Errorf("\"ips\": %w", err)
		}
		a.IPs = append(a.IPs, ip)
	}
	a.NoKernelInterface = st.Interface == "" || !kernelDevice(st.DeviceInfo)
	return a, true, nil
}

// parseIP reads an address, bare or with a prefix length ("192.0.2.2/24").
func parseIP(s string) (netip.Addr, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Addr().Unmap(), nil
	}
	ip, err := netip.ParseAddr(s)
	return ip.Unmap(), err
}

// kernelDevice reports whether a device-info map describes a device the
// kernel sees as a network interface in the pod: not vhost-user or memif
// (userspace data paths). No device-info is a kernel interface.
func kernelDevice(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return true
	}
	var d struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return true
	}
	return d.Type != devinfo.TypeVhostUser && d.Type != devinfo.TypeMemif
}
