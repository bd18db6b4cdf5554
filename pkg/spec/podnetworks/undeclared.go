package podnetworks

import (
	"fmt"
	"strings"

	"github.com/multinet/multinet/pkg/spec/netconf"
	"github.com/multinet/multinet/pkg/spec/selection"
)

// UndeclaredCapabilities is the setting that decides what happens to a
// network selection element key ("ips", "mac", "portMappings", "bandwidth",
// "infiniband-guid") whose runtimeConfig capability no plugin of the
// NetworkAttachmentDefinition declares. One name everywhere: multinetd's
// undeclaredCapabilities, the webhook's and kubectl multinet's
// --undeclared-capabilities (docs/decisions/undeclared-capabilities.md).
type UndeclaredCapabilities string

const (
	// RefuseUndeclared (the default, also ""): the spec's rule. The
	// attachment request fails (§4.1.2.1.3.2 "ips", §4.1.2.1.4.2 "mac",
	// §4.1.2.1.7.2, §4.1.2.1.8.2, §4.1.2.1.10.2): the webhook denies the
	// pod, multinetd fails the ADD or the hot-plug, lint reports an error.
	RefuseUndeclared UndeclaredCapabilities = "refuse"
	// MultusUndeclared: the key is handed over as Multus hands it ("mac"
	// as CNI_ARGS MAC=, "ips" as CNI_ARGS IP=, every key in runtimeConfig,
	// which libcni gives only to declaring plugins); multinetd posts a
	// Warning Event naming the NAD and the capability, the webhook admits
	// the pod with a warning, lint warns. A migration aid, not a mode to
	// keep (docs/migrating-from-multus.md).
	MultusUndeclared UndeclaredCapabilities = "multus"
)

// ParseUndeclaredCapabilities checks a value of the setting; "" is
// RefuseUndeclared. The error names the allowed values.
func ParseUndeclaredCapabilities(s string) (UndeclaredCapabilities, error) {
	switch v := UndeclaredCapabilities(s); v {
	case "", RefuseUndeclared:
		return RefuseUndeclared, nil
	case MultusUndeclared:
		return v, nil
	}
	return "", fmt.Errorf("undeclaredCapabilities %q: want %q (the spec's rule, the default) or %q", s, RefuseUndeclared, MultusUndeclared)
}

// handOver reports whether keys without a declaring plugin are handed over.
func (u UndeclaredCapabilities) handOver() bool { return u == MultusUndeclared }

// UndeclaredUse is an attachment whose element asks for keys no plugin of
// its NAD declares: handed over under MultusUndeclared, refused otherwise.
type UndeclaredUse struct {
	// Field is the element's field path, e.g.
	// `metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks[1] "net-b"`.
	Field string
	// NAD is the NetworkAttachmentDefinition "namespace/name".
	NAD string
	// Keys are the keys no plugin of the NAD declares.
	Keys []netconf.UndeclaredKey
}

// Capabilities lists the missing capabilities, e.g. `"mac", "ips"`.
func (u UndeclaredUse) Capabilities() string {
	q := make([]string, len(u.Keys))
	for i, k := range u.Keys {
		q[i] = fmt.Sprintf("%q", k.Capability)
	}
	return strings.Join(q, ", ")
}

// Message says what was handed over and why, for the Warning Event and the
// webhook's warning, e.g. `networks[0] "net-b": NetworkAttachmentDefinition
// team/net-b declares no capability "mac" (spec §4.1.2.1.4.2); handed over as
// Multus does (undeclaredCapabilities: multus): "mac" as CNI_ARGS MAC= and
// runtimeConfig "mac"`.
func (u UndeclaredUse) Message() string {
	how := make([]string, len(u.Keys))
	secs := make([]string, len(u.Keys))
	for i, k := range u.Keys {
		how[i] = fmt.Sprintf("%q as %s", k.Key, k.HandedOver())
		secs[i] = "§" + k.Section
	}
	return fmt.Sprintf("%s: NetworkAttachmentDefinition %s declares no capability %s (spec %s); handed over as Multus does (undeclaredCapabilities: %s): %s",
		u.Field, u.NAD, u.Capabilities(), strings.Join(secs, ", "), MultusUndeclared, strings.Join(how, "; "))
}

// Undeclared returns the attachments of v (the default-network override,
// then the networks annotation in order) whose element asks for a key no
// plugin of the NAD declares, whether the setting handed it over or the
// key was refused; nil when there are none.
func (v *Verdict) Undeclared() []UndeclaredUse {
	var out []UndeclaredUse
	if v.DefaultNetwork != nil {
		if u, ok := UndeclaredOf(selection.DefaultNetworkAnnotation, v.DefaultNetwork); ok {
			out = append(out, u)
		}
	}
	for i := range v.Attachments {
		if u, ok := UndeclaredOf(selection.NetworksAnnotation, &v.Attachments[i]); ok {
			out = append(out, u)
		}
	}
	return out
}

// UndeclaredOf returns the UndeclaredUse of attachment a of annotation
// (selection.NetworksAnnotation, or selection.DefaultNetworkAnnotation for
// the override); ok is false when its element asks for no key without a
// declaring plugin.
func UndeclaredOf(annotation string, a *Attachment) (u UndeclaredUse, ok bool) {
	if len(a.Undeclared) == 0 {
		return UndeclaredUse{}, false
	}
	el := elementError(annotation, a.Index, a.Element, "", "", "", "")
	field := AnnotationField(annotation) + ": " + strings.TrimSuffix(el.Error(), ": ")
	return UndeclaredUse{Field: field, NAD: a.NetworkKey, Keys: a.Undeclared}, true
}
