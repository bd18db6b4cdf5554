package policy

import (
	"cmp"
	"fmt"
	"slices"

	v1beta2 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// portSpec is one readable entry of a rule's ports: a protocol and either a
// numeric range (first 0: every port) or a container port name.
type portSpec struct {
	protocol    corev1.Protocol
	first, last uint16
	name        string
}

func (s portSpec) named() bool { return s.name != "" }

// portSpecs reads a rule's ports. An empty list allows every port (all is
// true). An entry it cannot read is reported and left out (matches nothing).
func (cx *computation) portSpecs(p *v1beta2.MultiNetworkPolicy, path string, ports []v1beta2.MultiNetworkPolicyPort) (specs []portSpec, all bool) {
	if len(ports) == 0 {
		return nil, true
	}
	for i, port := range ports {
		s, err := readPort(port)
		if err != nil {
			cx.problem(p, "", ReasonInvalidPort, "%s.ports[%d]: %v: the port matches nothing", path, i, err)
			continue
		}
		specs = append(specs, s)
	}
	return specs, false
}

// readPort reads one MultiNetworkPolicyPort.
func readPort(port v1beta2.MultiNetworkPolicyPort) (portSpec, error) {
	s := portSpec{protocol: corev1.ProtocolTCP}
	if port.Protocol != nil {
		s.protocol = *port.Protocol
	}
	switch s.protocol {
	case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
	default:
		return s, fmt.Errorf("protocol %q: want TCP, UDP or SCTP", s.protocol)
	}
	switch {
	case port.Port == nil && port.EndPort != nil:
		return s, fmt.Errorf("endPort %d without port", *port.EndPort)
	case port.Port == nil:
		return s, nil
	case port.Port.Type == intstr.String:
		if port.EndPort != nil {
			return s, fmt.Errorf("endPort %d with the named port %q", *port.EndPort, port.Port.StrVal)
		}
		if errs := validation.IsValidPortName(port.Port.StrVal); len(errs) > 0 {
			return s, fmt.Errorf("port name %q: %v", port.Port.StrVal, errs)
		}
		s.name = port.Port.StrVal
		return s, nil
	}
	first, last := port.Port.IntVal, port.Port.IntVal
	if port.EndPort != nil {
		last = *port.EndPort
	}
	if first < 1 || first > 65535 || last < first || last > 65535 {
		return s, fmt.Errorf("port %d, endPort %d: want 1 <= port <= endPort <= 65535", first, last)
	}
	s.first, s.last = uint16(first), uint16(last)
	return s, nil
}

// resolvePorts turns specs into Ports: numeric ones as they are, named ones
// through the container ports (same name and protocol); a name no container
// port has gives nothing. The result is sorted, without duplicates.
func resolvePorts(specs []portSpec, containerPorts []NamedPort) []Port {
	var out []Port
	for _, s := range specs {
		if !s.named() {
			out = append(out, Port{Protocol: s.protocol, Port: s.first, EndPort: s.last})
			continue
		}
		for _, cp := range containerPorts {
			proto := cmp.Or(cp.Protocol, corev1.ProtocolTCP)
			if cp.Name == s.name && proto == s.protocol && cp.Port >= 1 && cp.Port <= 65535 {
				out = append(out, Port{Protocol: s.protocol, Port: uint16(cp.Port), EndPort: uint16(cp.Port)})
			}
		}
	}
	slices.SortFunc(out, func(a, b Port) int {
		return cmp.Or(cmp.Compare(a.Protocol, b.Protocol), cmp.Compare(a.Port, b.Port), cmp.Compare(a.EndPort, b.EndPort))
	})
	return slices.Compact(out)
}
