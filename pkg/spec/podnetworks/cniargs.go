package podnetworks

import (
	"fmt"
	"strings"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
)

// AcceptCNIArgsAnnotation on a NetworkAttachmentDefinition, set to "true",
// lets pods hand its plugins "cni-args" (spec §4.1.2.1.6). Without it a
// network selection element with "cni-args" for the NAD is refused, unless
// Policy.UndeclaredCapabilities is MultusUndeclared (Multus hands cni-args
// to every NAD). The NAD's owner opts in because the plugins read args.cni
// as they read their own configuration: host-local and static take "ips",
// tuning "mac" and "sysctl", so a pod's author would otherwise set what
// the NAD's author (and the capability check, §4.1.2.1.x.2) decides.
const AcceptCNIArgsAnnotation = "multinet.io/accept-cni-args"

// AcceptsCNIArgs reports whether nad opts in to cni-args
// (AcceptCNIArgsAnnotation is "true").
func AcceptsCNIArgs(nad *nadv1.NetworkAttachmentDefinition) bool {
	return nad != nil && strings.TrimSpace(nad.Annotations[AcceptCNIArgsAnnotation]) == "true"
}

// refuseCNIArgs returns why attachment a may not carry its element's
// cni-args, "" when it may: none given, the Multus-compatible setting, a
// NAD that opts in, or a NAD not known here (lint without it; multinetd
// checks at ADD).
func (c *checker) refuseCNIArgs(a *Attachment) string {
	if len(a.Element.CNIArgs) == 0 || c.opts.UndeclaredCapabilities.handOver() || a.NAD == nil || AcceptsCNIArgs(a.NAD) {
		return ""
	}
	return fmt.Sprintf(`NetworkAttachmentDefinition %s/%s does not accept cni-args: its plugins would read them as their own configuration (host-local and static "ips", tuning "mac" and "sysctl"); its owner opts in with the annotation %s: "true"`,
		a.NAD.Namespace, a.NAD.Name, AcceptCNIArgsAnnotation)
}
