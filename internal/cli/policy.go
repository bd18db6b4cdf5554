package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/selection"
)

// policyFlags are the flags mirroring the settings of multinetd's
// configuration that decide a pod's networks besides its annotations
// (podnetworks.Policy): lint and explain give the daemon's verdict only
// when they are set as multinetd is configured.
type policyFlags struct {
	namespaceIsolation bool
	globalNamespaces   []string
	defaultNetworks    []string
	systemNamespaces   []string
	undeclared         string
	maxElements        int
}

// addPolicyFlags registers the policy flags on cmd.
func addPolicyFlags(cmd *cobra.Command) *policyFlags {
	p := &policyFlags{}
	f := cmd.Flags()
	f.BoolVar(&p.namespaceIsolation, "namespace-isolation", false, "check namespace isolation as multinetd's namespaceIsolation does: a pod may select only NADs of its own namespace and --global-namespaces (spec §7.4)")
	f.StringSliceVar(&p.globalNamespaces, "global-namespaces", nil, "comma-separated namespaces whose NADs every pod may select under isolation (multinetd's globalNamespaces); implies --namespace-isolation")
	f.StringSliceVar(&p.defaultNetworks, "default-networks", nil, "comma-separated NADs namespace/name attached to every pod on net1, net2, … before its own networks (multinetd's defaultNetworks)")
	f.StringSliceVar(&p.systemNamespaces, "system-namespaces", []string{"kube-system"}, "comma-separated namespaces whose pods do not get --default-networks (multinetd's systemNamespaces)")
	f.StringVar(&p.undeclared, "undeclared-capabilities", string(podnetworks.RefuseUndeclared), "a key (mac, ips, …) whose capability no plugin of the NAD declares: refuse (the spec, §4.1.2.1.x.2) or multus (handed over as Multus does), as multinetd's undeclaredCapabilities")
	f.IntVar(&p.maxElements, "max-selection-elements", podnetworks.DefaultMaxSelectionElements, "most network selection elements a pod may have, as multinetd's maxSelectionElements")
	return p
}

// isolationSet reports whether isolation was asked for.
func (p *policyFlags) isolationSet() bool {
	return p.namespaceIsolation || len(p.globalNamespaces) > 0
}

// policy returns the podnetworks.Policy the flags give; errors (usage)
// name the flag.
func (p *policyFlags) policy() (podnetworks.Policy, error) {
	var out podnetworks.Policy
	if p.isolationSet() {
		out.Isolation = selection.IsolationPolicy{Enabled: true, GlobalNamespaces: trimAll(p.globalNamespaces)}
	}
	nets, err := podnetworks.ParseDefaultNetworks(trimAll(p.defaultNetworks))
	if err != nil {
		return out, &ExitError{Code: ExitUsage, Err: fmt.Errorf("--default-networks: %w", err)}
	}
	if len(nets) > 0 {
		out.DefaultNetworks = nets
	}
	u, err := podnetworks.ParseUndeclaredCapabilities(strings.TrimSpace(p.undeclared))
	if err != nil {
		return out, &ExitError{Code: ExitUsage, Err: fmt.Errorf("--undeclared-capabilities: %w", err)}
	}
	out.UndeclaredCapabilities = u
	if p.maxElements < 1 {
		return out, &ExitError{Code: ExitUsage, Err: fmt.Errorf("--max-selection-elements %d: must be positive", p.maxElements)}
	}
	out.MaxSelectionElements = p.maxElements
	out.SystemNamespaces = trimAll(p.systemNamespaces)
	for _, ns := range out.SystemNamespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			return out, &ExitError{Code: ExitUsage, Err: fmt.Errorf("--system-namespaces: %q: %s", ns, strings.Join(msgs, "; "))}
		}
	}
	return out, nil
}

// trimAll drops blanks around the items of a comma-separated flag and the
// empty items.
func trimAll(items []string) []string {
	var out []string
	for _, it := range items {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}
