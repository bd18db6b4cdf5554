package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multinet/multinet/pkg/spec/status"
)

// listChunk is the page size of pod lists, as kubectl's --chunk-size.
const listChunk = 500

type getOptions struct {
	allNamespaces bool
	selector      string
	output        string
	attachedOnly  bool
	clients       clientsFunc
}

func newGetCommand(s Streams) *cobra.Command {
	cmd, _ := getCommand(s)
	return cmd
}

// getCommand returns the get command and its options, whose clients tests
// replace.
func getCommand(s Streams) (*cobra.Command, *getOptions) {
	o := &getOptions{}
	cmd := &cobra.Command{
		Use:   "get pods [NAME ...] [-n NAMESPACE | -A] [-l SELECTOR] [-o wide|json|yaml]",
		Short: "Show the network attachments of pods, from their network-status annotation",
		Long: `Show each pod's network attachments as multinet reported them in the pod's
k8s.v1.cni.cncf.io/network-status annotation (NPWG multi-net spec v1.3, §5):
one row per attachment, the cluster-wide default network included.

A pod without the annotation (not started yet, hostNetwork, or not handled by
multinet) gets one row with NETWORK <none>; --attached-only leaves it out. A pod
whose annotation does not decode gets NETWORK <invalid> and a warning on
standard error.

Exit status: 0 success, 1 an API call failed or a named pod does not exist,
2 bad usage.`,
		Example: `  kubectl multinet get pods
  kubectl multinet get pods -A -l app=web -o wide
  kubectl multinet get pod web-0 -n prod -o json`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), s, args)
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list the pods of every namespace")
	f.StringVarP(&o.selector, "selector", "l", "", "label selector of the pods (e.g. app=web,tier!=db)")
	f.StringVarP(&o.output, "output", "o", "", "output format: empty for a table, wide to add MTU, DEFAULT-ROUTE and DNS, json or yaml for a list of {namespace, name, networks}")
	f.BoolVar(&o.attachedOnly, "attached-only", false, "leave out pods without a network-status annotation")
	o.clients = addClusterFlags(cmd)
	return cmd, o
}

// podNetworks is one pod in the json and yaml output of get.
type podNetworks struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Networks are the entries of the network-status annotation, as
	// written (spec §5.3 keys); empty when the pod has none.
	Networks []status.NetworkStatus `json:"networks"`
	// Error says why the annotation does not decode.
	Error string `json:"error,omitempty"`
}

func (o *getOptions) run(ctx context.Context, s Streams, args []string) error {
	names, err := o.validate(args)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	c, err := o.clients()
	if err != nil {
		return failed(err)
	}
	var pods []corev1.Pod
	var missing []error
	if len(names) > 0 {
		pods, missing, err = getPods(ctx, c, names)
	} else {
		pods, err = o.listPods(ctx, c)
	}
	if err != nil {
		return failed(err)
	}
	out := make([]podNetworks, 0, len(pods))
	for i := range pods {
		p := podNetworksOf(&pods[i])
		if p.Error != "" {
			fmt.Fprintf(s.ErrOut, "warning: pod %s/%s: %s\n", p.Namespace, p.Name, p.Error)
		}
		if o.attachedOnly && len(p.Networks) == 0 && p.Error == "" {
			continue
		}
		out = append(out, p)
	}
	if len(out) == 0 && (o.output == "" || o.output == "wide") {
		// As kubectl: no table header, and a message when nothing failed.
		if len(missing) == 0 {
			where := "in " + c.Namespace + " namespace"
			if o.allNamespaces {
				where = "in any namespace"
			}
			fmt.Fprintf(s.ErrOut, "No pods found %s.\n", where)
		}
		return failed(errors.Join(missing...))
	}
	if err := writePodNetworks(s.Out, out, o.output, o.allNamespaces); err != nil {
		return err
	}
	return failed(errors.Join(missing...))
}

// validate checks the arguments and flags as kubectl get does and returns
// the pod names.
func (o *getOptions) validate(args []string) ([]string, error) {
	if r := strings.ToLower(args[0]); r != "pods" && r != "pod" && r != "po" {
		return nil, fmt.Errorf("get: resource type %q: only pods are supported", args[0])
	}
	if !slices.Contains([]string{"", "wide", "json", "yaml"}, o.output) {
		return nil, fmt.Errorf("get: --output %q: must be empty, wide, json or yaml", o.output)
	}
	names := args[1:]
	if len(names) > 0 && o.selector != "" {
		return nil, errors.New("get: pod names cannot be given with --selector")
	}
	if len(names) > 0 && o.allNamespaces {
		return nil, errors.New("get: pods cannot be retrieved by name across all namespaces; give -n NAMESPACE")
	}
	return names, nil
}

// getPods gets the named pods of c.Namespace, in order; a pod that does not
// exist is returned in missing.
func getPods(ctx context.Context, c *clusterClients, names []string) (pods []corev1.Pod, missing []error, err error) {
	for _, name := range names {
		p, err := call(ctx, c, func(ctx context.Context) (*corev1.Pod, error) {
			return c.Core.Pods(c.Namespace).Get(ctx, name, metav1.GetOptions{})
		})
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, fmt.Errorf("pod %s/%s not found", c.Namespace, name))
		case err != nil:
			return nil, nil, fmt.Errorf("get pod %s/%s: %w", c.Namespace, name, err)
		default:
			pods = append(pods, *p)
		}
	}
	return pods, missing, nil
}

// listPods lists the selected pods, listChunk at a time, sorted by
// namespace and name.
func (o *getOptions) listPods(ctx context.Context, c *clusterClients) ([]corev1.Pod, error) {
	ns := c.Namespace
	where := "namespace " + ns
	if o.allNamespaces {
		ns, where = metav1.NamespaceAll, "all namespaces"
	}
	var pods []corev1.Pod
	opts := metav1.ListOptions{LabelSelector: o.selector, Limit: listChunk}
	for {
		list, err := call(ctx, c, func(ctx context.Context) (*corev1.PodList, error) {
			return c.Core.Pods(ns).List(ctx, opts)
		})
		if err != nil {
			return nil, fmt.Errorf("list pods in %s: %w", where, err)
		}
		pods = append(pods, list.Items...)
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	slices.SortFunc(pods, func(a, b corev1.Pod) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return pods, nil
}

// podNetworksOf decodes the pod's network-status annotation.
func podNetworksOf(p *corev1.Pod) podNetworks {
	out := podNetworks{Namespace: p.Namespace, Name: p.Name, Networks: []status.NetworkStatus{}}
	v, ok := p.Annotations[status.Annotation]
	if !ok {
		return out
	}
	list, err := status.Decode(v)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	out.Networks = list
	return out
}
