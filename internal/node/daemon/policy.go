package daemon

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/node/policysync"
	"github.com/multinet/multinet/internal/process/lifecycle"
	corev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/core/v1"
	policyclient "github.com/multinet/multinet/pkg/client/clientset/versioned/typed/k8s.cni.cncf.io/v1beta2"
)

// policyDetectWait bounds how long networkPolicy: auto waits for a
// definite answer on whether the MultiNetworkPolicy CRD is installed.
const policyDetectWait = 10 * time.Second

// networkPolicyComponent is MultiNetworkPolicy enforcement
// (internal/node/policysync, docs/network-policy.md), when networkPolicy
// turns it on: Start makes the policy and cluster-wide pod informers and
// the controller the engine and hot-plug call; Run runs the informers and
// the controller (every local sandbox re-synced once they have listed).
func (d *daemon) networkPolicyComponent() lifecycle.Component {
	var policyInf, podInf cache.SharedIndexInformer
	return lifecycle.Component{
		Name: "network policy",
		Start: func(ctx context.Context) error {
			client, err := policyclient.NewForConfig(d.restConfig)
			if err != nil {
				return fmt.Errorf("MultiNetworkPolicy API client: %w", err)
			}
			if !policyEnabled(ctx, d.cfg.NetworkPolicy, client) {
				return nil
			}
			if policyInf, err = policysync.NewPolicyInformer(client); err != nil {
				return err
			}
			if podInf, err = policysync.NewPodInformer(d.clients.core); err != nil {
				return err
			}
			d.policy, err = policysync.New(policysync.Options{
				NodeName: d.cfg.NodeName, Store: d.store, Locks: d.locks,
				Policies: policyInf, Namespaces: d.nsInformer, NADs: d.nadInformer, Pods: podInf,
				Live: livePods{d.clients.core}, Events: d.events, Observer: d.m,
			})
			return err
		},
		Run: func(ctx context.Context) error {
			if d.policy == nil {
				return nil
			}
			go policyInf.RunWithContext(ctx)
			go podInf.RunWithContext(ctx)
			return d.policy.Run(ctx)
		},
	}
}

// policyEnabled decides networkPolicy: on and off as said; auto asks the
// API server whether MultiNetworkPolicies can be listed (the CRD is
// installed), within policyDetectWait, and enforces unless the answer is
// that the resource does not exist (a failing API server: enforce, fail
// closed).
func policyEnabled(ctx context.Context, mode string, client policyclient.MultiNetworkPoliciesGetter) bool {
	log := klog.FromContext(ctx)
	switch mode {
	case NetworkPolicyOff:
		log.Info("MultiNetworkPolicy is not enforced (networkPolicy: off)")
		return false
	case NetworkPolicyOn:
		log.Info("MultiNetworkPolicy is enforced (networkPolicy: on)")
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, policyDetectWait)
	defer cancel()
	var err error
	for {
		_, err = client.MultiNetworkPolicies(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil || apierrors.IsNotFound(err) || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	if apierrors.IsNotFound(err) {
		log.Info("MultiNetworkPolicy is not enforced: its CRD is not installed (networkPolicy: auto; restart multinetd after installing it)")
		return false
	}
	log.Info("MultiNetworkPolicy is enforced (networkPolicy: auto)", "listError", err)
	return true
}

// livePods GETs a pod (policysync.PodGetter).
type livePods struct{ core corev1client.PodsGetter }

func (l livePods) Get(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	return l.core.Pods(namespace).Get(ctx, name, metav1.GetOptions{})
}
