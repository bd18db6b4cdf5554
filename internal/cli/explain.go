package cli

import (
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/cli/explain"
)

type explainOptions struct {
	output  string
	policy  *policyFlags
	clients clientsFunc
}

func newExplainCommand(s Streams) *cobra.Command {
	cmd, _ := explainCommand(s)
	return cmd
}

// explainCommand returns the explain command and its options, whose clients
// tests replace.
func explainCommand(s Streams) (*cobra.Command, *explainOptions) {
	o := &explainOptions{}
	cmd := &cobra.Command{
		Use:   "explain POD [-n NAMESPACE] [-o json|yaml]",
		Short: "Show what multinetd would run for a pod, and why an attachment would fail",
		Long: `Work out from the API alone what multinetd runs for a pod (NPWG multi-net
spec v1.3): the network selection elements of its k8s.v1.cni.cncf.io/networks
annotation, each NetworkAttachmentDefinition, the CNI config list it resolves
to, the interface name, the runtimeConfig (capability args) and args.cni each
attachment gets, the device resource, and why an attachment would fail
(missing NetworkAttachmentDefinition, unusable spec.config, a capability no
plugin declares, namespace isolation, an invalid annotation, missing device
requests). The pod's current network-status is shown too, and its network
policy: per interface, the MultiNetworkPolicies that select it and the
effective rules, computed as multinetd computes what it writes into the pod's
network namespace, and what cannot be enforced. The verdict is the
one multinetd and the admission webhook reach, given the flags that mirror
multinetd's configuration (--namespace-isolation, --global-namespaces,
--default-networks, --system-namespaces).

What lives only on the node is not visible and is said so: the cluster-wide
default network, the CNI config of a NetworkAttachmentDefinition without
spec.config, the devices kubelet allocates.

Exit status: 0 the pod was explained (also when an attachment would fail:
see "Result" or "ok"), 1 the pod or a NetworkAttachmentDefinition could not be
read, 2 bad usage.`,
		Example: `  kubectl multinet explain web-0 -n prod
  kubectl multinet explain web-0 -o json | jq '.attachments[] | {network, interface, error}'
  kubectl multinet explain web-0 --namespace-isolation --global-namespaces=default`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), s, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", "", "output format: empty for text, json or yaml")
	o.policy = addPolicyFlags(cmd)
	o.clients = addClusterFlags(cmd)
	return cmd, o
}

func (o *explainOptions) run(ctx context.Context, s Streams, name string) error {
	if !slices.Contains([]string{"", "json", "yaml"}, o.output) {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("explain: --output %q: must be empty, json or yaml", o.output)}
	}
	policy, err := o.policy.policy()
	if err != nil {
		return err
	}
	c, err := o.clients()
	if err != nil {
		return failed(err)
	}
	pod, err := call(ctx, c, func(ctx context.Context) (*corev1.Pod, error) {
		return c.Core.Pods(c.Namespace).Get(ctx, name, metav1.GetOptions{})
	})
	if apierrors.IsNotFound(err) {
		return failed(fmt.Errorf("pod %s/%s not found", c.Namespace, name))
	}
	if err != nil {
		return failed(fmt.Errorf("get pod %s/%s: %w", c.Namespace, name, err))
	}
	opts := explain.Options{DefaultNetworks: policy.DefaultNetworks, SystemNamespaces: policy.SystemNamespaces, UndeclaredCapabilities: policy.UndeclaredCapabilities,
		MaxSelectionElements: policy.MaxSelectionElements, Policies: policySource(c)}
	if o.policy.isolationSet() {
		opts.Isolation = &policy.Isolation
	}
	getNAD := func(ctx context.Context, namespace, name string) (*nadv1.NetworkAttachmentDefinition, error) {
		return call(ctx, c, func(ctx context.Context) (*nadv1.NetworkAttachmentDefinition, error) {
			return c.NADs.NetworkAttachmentDefinitions(namespace).Get(ctx, name, metav1.GetOptions{})
		})
	}
	x, err := explain.Explain(ctx, pod, getNAD, opts)
	if err != nil {
		return failed(err)
	}
	if o.output != "" {
		return writeStructured(s.Out, x, o.output)
	}
	return explain.WriteText(s.Out, x)
}
