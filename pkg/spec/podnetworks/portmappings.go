package podnetworks

import (
	"context"
	"fmt"

	"github.com/multinet/multinet/pkg/spec/selection"

	psapi "k8s.io/pod-security-admission/api"
)

// PodSecurityEnforceLabel is the namespace label whose Pod Security level
// decides whether a pod may ask for portMappings in its annotation.
const PodSecurityEnforceLabel = psapi.EnforceLevelLabel

// podSecurityForbidsHostPort returns the Pod Security level namespace ns
// enforces when it forbids hostPort (baseline and restricted do; Pod
// Security Standards, "HostPorts"), "" when it allows it. The level is
// read as the Pod Security admission reads it (psapi.PolicyToEvaluate of
// the namespace's labels, pod-security.kubernetes.io/enforce): an invalid
// value counts as restricted, a missing label as privileged (Kubernetes'
// default without an AdmissionConfiguration that sets another;
// docs/decisions/pod-annotation-limits.md).
// Errors: the namespace's labels could not be read.
func (c *checker) podSecurityForbidsHostPort(ctx context.Context, ns string) (psapi.Level, error) {
	var labels map[string]string
	if r := c.opts.NADTrust.Namespaces; r != nil {
		var err error
		if labels, err = r.NamespaceLabels(ctx, ns); err != nil {
			return "", fmt.Errorf("reading the labels of namespace %s (its Pod Security level): %w", ns, err)
		}
	}
	p, _ := psapi.PolicyToEvaluate(labels, psapi.Policy{Enforce: psapi.LevelVersion{Level: psapi.LevelPrivileged, Version: psapi.LatestVersion()}})
	if p.Enforce.Level == psapi.LevelPrivileged {
		return "", nil
	}
	return p.Enforce.Level, nil
}

// readHostPortLevel sets c.hostPortLevel when the pod asks for
// portMappings in an annotation (the override or an element): the
// namespace's labels are read only then.
func (c *checker) readHostPortLevel(override *selection.Element) error {
	asks := override != nil && len(override.PortMappingsRequest) > 0
	for _, el := range c.v.Elements {
		asks = asks || len(el.PortMappingsRequest) > 0
	}
	if !asks || c.pod.Namespace == "" {
		return nil
	}
	lvl, err := c.podSecurityForbidsHostPort(c.ctx, c.pod.Namespace)
	c.hostPortLevel = lvl
	return err
}

// refusePortMappings returns why element el may not ask for portMappings,
// "" when it may: it asks for none, or the pod's namespace allows hostPort.
func (c *checker) refusePortMappings(el selection.Element) string {
	if len(el.PortMappingsRequest) == 0 || c.hostPortLevel == "" {
		return ""
	}
	return fmt.Sprintf(`namespace %s enforces Pod Security level %q (label %s), which forbids hostPort; portMappings maps a port of the node into the pod as a hostPort does`,
		c.pod.Namespace, c.hostPortLevel, PodSecurityEnforceLabel)
}
