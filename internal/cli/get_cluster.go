package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	nadclient "github.com/multinet/multinet/pkg/client/clientset/versioned/typed/k8s.cni.cncf.io/v1"
	policyclient "github.com/multinet/multinet/pkg/client/clientset/versioned/typed/k8s.cni.cncf.io/v1beta2"
)

// ExitFailed is the exit status of get and explain when they cannot do their
// work: the cluster is unreachable, a pod is not found, an API call fails.
const ExitFailed = 1

// defaultCallTimeout bounds every API call of get and explain when
// --request-timeout is not set (or is 0, which kubectl reads as "no
// timeout": these commands always set a deadline).
const defaultCallTimeout = 30 * time.Second

// clusterClients are the API clients of one get or explain invocation.
type clusterClients struct {
	// Core is the core/v1 client only: the full clientset would add every
	// API group's client to the binary.
	Core corev1client.CoreV1Interface
	// NADs is the generated k8s.cni.cncf.io/v1 client, for the same reason
	// not the whole generated clientset.
	NADs nadclient.NetworkAttachmentDefinitionsGetter
	// Policies is the generated k8s.cni.cncf.io/v1beta2 client
	// (MultiNetworkPolicies); nil: explain shows no network policy.
	Policies policyclient.MultiNetworkPoliciesGetter
	// Namespace is -n, else the kubeconfig context's namespace, else "default".
	Namespace string
	// Timeout bounds each API call.
	Timeout time.Duration
}

// clientsFunc builds the clients; tests replace it with fakes.
type clientsFunc func() (*clusterClients, error)

// addClusterFlags adds kubectl's connection flags (--kubeconfig, --context,
// -n/--namespace, --request-timeout, --server, --token, --as, ...) to cmd
// and returns the function that builds the clients from them. The flags are
// the kubectl plugin conventions, from k8s.io/cli-runtime; KUBECONFIG is
// honoured as kubectl honours it.
func addClusterFlags(cmd *cobra.Command) clientsFunc {
	cf := genericclioptions.NewConfigFlags(true)
	cf.AddFlags(cmd.Flags())
	return clientsFrom(cf)
}

// clientsFrom returns the function that builds the clients from cf's flags.
func clientsFrom(cf *genericclioptions.ConfigFlags) clientsFunc {
	return func() (*clusterClients, error) {
		timeout, err := callTimeout(cf.Timeout)
		if err != nil {
			return nil, &ExitError{Code: ExitUsage, Err: err}
		}
		ns, _, err := cf.ToRawKubeConfigLoader().Namespace()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
		config, err := cf.ToRESTConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig: %w", err)
		}
		config.UserAgent = "kubectl-multinet"
		core, err := corev1client.NewForConfig(config)
		if err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
		nads, err := nadclient.NewForConfig(config)
		if err != nil {
			return nil, fmt.Errorf("NetworkAttachmentDefinition client: %w", err)
		}
		policies, err := policyclient.NewForConfig(config)
		if err != nil {
			return nil, fmt.Errorf("MultiNetworkPolicy client: %w", err)
		}
		return &clusterClients{Core: core, NADs: nads, Policies: policies, Namespace: ns, Timeout: timeout}, nil
	}
}

// callTimeout reads --request-timeout as kubectl does: a bare integer is
// seconds, else a Go duration ("1m", "500ms"); empty or 0 gives
// defaultCallTimeout.
func callTimeout(v *string) (time.Duration, error) {
	if v == nil || *v == "" || *v == "0" {
		return defaultCallTimeout, nil
	}
	if n, err := strconv.ParseInt(*v, 10, 64); err == nil && n > 0 {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(*v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("--request-timeout %q: want a positive integer of seconds or a duration such as 30s or 1m", *v)
	}
	if d == 0 {
		return defaultCallTimeout, nil
	}
	return d, nil
}

// call runs f with a context that ends after c.Timeout.
func call[T any](ctx context.Context, c *clusterClients, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	return f(ctx)
}

// failed marks err, an API or connection failure, with ExitFailed unless it
// already carries an exit status.
func failed(err error) error {
	var ee *ExitError
	if err == nil || errors.As(err, &ee) {
		return err
	}
	return &ExitError{Code: ExitFailed, Err: err}
}
