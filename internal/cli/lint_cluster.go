package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/cli/lint"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// NAD trust ConfigMap deploy/ ships: its name carries kustomize's content
// hash after this prefix.
const (
	trustConfigMapNamespace = "multinet-system"
	trustConfigMapPrefix    = "multinet-nad-trust"
	trustConfigMapKey       = "nad-trust.yaml"
)

// addLintClusterFlags adds kubectl's connection flags to lint, without
// -n/--namespace (lint's own flag: the namespace of objects that set none)
// and without --cluster (the kubeconfig cluster: lint's --cluster is the
// mode).
func addLintClusterFlags(cmd *cobra.Command) clientsFunc {
	cf := genericclioptions.NewConfigFlags(true)
	cf.Namespace, cf.ClusterName = nil, nil
	cf.AddFlags(cmd.Flags())
	return clientsFrom(cf)
}

// runCluster lints the cluster's stored NetworkAttachmentDefinitions (every
// namespace) with the namespaces' labels, against --nad-trust-policy, else
// the cluster's ConfigMap multinet-system/multinet-nad-trust*, else the
// shipped policy. Exit: 0 all valid, 1 some NAD invalid or an API call
// failed, 2 bad usage.
func (o *lintOptions) runCluster(ctx context.Context, s Streams) error {
	if len(o.files) > 0 {
		return &ExitError{Code: ExitUsage, Err: errors.New("lint: --cluster reads the cluster's NADs: leave out -f")}
	}
	if !slices.Contains([]string{"", "wide", "json"}, o.output) {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("lint: --output %q: must be empty, wide or json", o.output)}
	}
	policy, err := o.lintPolicy()
	if err != nil {
		return err
	}
	c, err := o.clients()
	if err != nil {
		return failed(err)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if policy.NADTrust.Policy == nil {
		if policy.NADTrust.Policy, err = clusterTrustPolicy(ctx, c, s); err != nil {
			return failed(err)
		}
	}
	nss, err := call(ctx, c, func(ctx context.Context) (*corev1.NamespaceList, error) {
		return c.Core.Namespaces().List(ctx, metav1.ListOptions{})
	})
	if err != nil {
		return failed(fmt.Errorf("list namespaces: %w", err))
	}
	labels := map[string]map[string]string{}
	for _, ns := range nss.Items {
		labels[ns.Name] = ns.Labels
	}
	nads, err := call(ctx, c, func(ctx context.Context) (*nadv1.NetworkAttachmentDefinitionList, error) {
		return c.NADs.NetworkAttachmentDefinitions(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	})
	if err != nil {
		return failed(fmt.Errorf("list NetworkAttachmentDefinitions: %w", err))
	}
	objs := make([]lint.Object, 0, len(nads.Items))
	for i := range nads.Items {
		obj, err := clusterObject(&nads.Items[i])
		if err != nil {
			return err
		}
		objs = append(objs, obj)
	}
	results, err := lint.Lint(objs, lint.Options{Namespace: o.namespace, Policy: policy, NamespaceLabels: labels})
	if err != nil {
		return err
	}
	return o.report(s, results)
}

// clusterTrustPolicy reads the NAD trust policy of the cluster's ConfigMap
// multinet-system/multinet-nad-trust* (the newest when there are several);
// the shipped policy, with a note on stderr, when there is none.
func clusterTrustPolicy(ctx context.Context, c *clusterClients, s Streams) (*podnetworks.NADTrustPolicy, error) {
	cms, err := call(ctx, c, func(ctx context.Context) (*corev1.ConfigMapList, error) {
		return c.Core.ConfigMaps(trustConfigMapNamespace).List(ctx, metav1.ListOptions{})
	})
	if err != nil {
		return nil, fmt.Errorf("list ConfigMaps of %s (the NAD trust policy; or give --nad-trust-policy): %w", trustConfigMapNamespace, err)
	}
	var found *corev1.ConfigMap
	for i := range cms.Items {
		cm := &cms.Items[i]
		if cm.Name != trustConfigMapPrefix && !strings.HasPrefix(cm.Name, trustConfigMapPrefix+"-") {
			continue
		}
		if found == nil || found.CreationTimestamp.Before(&cm.CreationTimestamp) {
			found = cm
		}
	}
	if found == nil {
		fmt.Fprintf(s.ErrOut, "note: no ConfigMap %s/%s*: checking against the shipped NAD trust policy\n", trustConfigMapNamespace, trustConfigMapPrefix)
		return podnetworks.DefaultNADTrustPolicy(), nil
	}
	p, err := podnetworks.ParseNADTrustPolicy([]byte(found.Data[trustConfigMapKey]))
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s, key %s: %w", found.Namespace, found.Name, trustConfigMapKey, err)
	}
	return p, nil
}

// clusterObject is a stored NAD as lint's input, its Source "cluster".
func clusterObject(nad *nadv1.NetworkAttachmentDefinition) (lint.Object, error) {
	n := nad.DeepCopy()
	n.APIVersion, n.Kind = nadv1.SchemeGroupVersion.String(), nadv1.NetworkAttachmentDefinitionKind
	n.ManagedFields = nil
	b, err := json.Marshal(n)
	if err != nil {
		return lint.Object{}, fmt.Errorf("NetworkAttachmentDefinition %s/%s: %w", n.Namespace, n.Name, err)
	}
	return lint.Object{Source: "cluster", APIVersion: n.APIVersion, Kind: n.Kind, Namespace: n.Namespace, Name: n.Name, JSON: b}, nil
}
