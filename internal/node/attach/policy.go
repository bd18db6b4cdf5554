package attach

import (
	"context"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/multinet/multinet/internal/node/state"
)

// PolicyEnforcer puts the MultiNetworkPolicy rules of a pod sandbox in
// place in its network namespace and takes them away
// (policysync.Controller). The engine calls it holding the container's
// lock: Enforce after the delegates of an ADD succeeded and before ADD
// answers, so that a pod selected at creation is never reachable without
// its rules; Release when DEL or GC removes the sandbox's record.
type PolicyEnforcer interface {
	// Enforce installs the rules of rec's attachments (their interfaces and
	// results; pod as the informer has it, nil when the ADD names no pod)
	// in rec.Netns, or removes a table left there when no policy selects
	// the pod. An error fails the ADD (the attachments are torn down).
	Enforce(ctx context.Context, pod *corev1.Pod, rec *state.Record) error
	// Release removes the rules of container containerID from netns (empty
	// or gone: nothing to remove) and forgets the sandbox.
	Release(ctx context.Context, containerID, netns string) error
}

// enforcePolicy runs np's Enforce (Options.NetworkPolicy, nil: none) for
// an ADD's record; the error is a CNI error 11 (try again later) naming the
// pod. A function, not a method: the engine's methods are the CNI verbs'.
func enforcePolicy(ctx context.Context, np PolicyEnforcer, pod *corev1.Pod, rec *state.Record) error {
	if np == nil {
		return nil
	}
	if err := np.Enforce(ctx, pod, rec); err != nil {
		return types.NewError(types.ErrTryAgainLater, fmt.Sprintf("network policy of pod %s/%s: %v", rec.PodNamespace, rec.PodName, err), "")
	}
	return nil
}

// releasePolicy runs np's Release (Options.NetworkPolicy, nil: none) for a
// sandbox whose record DEL or GC removes (netns empty for GC: the sandbox
// is gone).
func releasePolicy(ctx context.Context, np PolicyEnforcer, containerID, netns string) error {
	if np == nil {
		return nil
	}
	if err := np.Release(ctx, containerID, netns); err != nil {
		return fmt.Errorf("remove the network policy rules of container %s: %w", containerID, err)
	}
	return nil
}
