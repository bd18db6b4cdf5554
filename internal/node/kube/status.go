package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	corev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/core/v1"
)

// StatusPatcher writes a pod annotation with one JSON merge PATCH of the
// pod's status subresource (multi-net spec §5: the network-status annotation).
// It never GETs or PUTs the whole pod, and patching pods/status keeps
// admission webhooks registered for "pods" off this path.
type StatusPatcher struct {
	client corev1client.PodsGetter
	// Backoff paces the retries of a failed PATCH.
	backoff wait.Backoff
}

// NewStatusPatcher returns a StatusPatcher that retries a failed PATCH with
// exponential backoff: 5 attempts, 50 ms doubling (about 1.5 s in all).
func NewStatusPatcher(client corev1client.PodsGetter) *StatusPatcher {
	return &StatusPatcher{client: client, backoff: wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Steps: 5}}
}

// ErrPodGone is returned (wrapped) by PatchAnnotation when the pod no longer
// exists or was re-created under its name: there is nothing to annotate, and
// retrying cannot help.
var ErrPodGone = errors.New("pod is gone")

// PatchAnnotation sets annotation key to value on pod namespace/name, but
// only while the pod still has UID uid (the merge patch carries metadata.uid,
// which the API server treats as a precondition; empty uid skips it).
//
// Errors: one wrapping ErrPodGone when the pod no longer exists (NotFound) or
// was re-created under the same name (Conflict: the UID precondition failed);
// the last API error when every attempt failed; ctx's error when it ends.
func (p *StatusPatcher) PatchAnnotation(ctx context.Context, namespace, name, uid, key, value string) error {
	meta := map[string]any{"annotations": map[string]string{key: value}}
	if uid != "" {
		meta["uid"] = uid
	}
	body, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return fmt.Errorf("encode patch of pod %s/%s: %w", namespace, name, err)
	}
	var last error
	err = wait.ExponentialBackoffWithContext(ctx, p.backoff, func(ctx context.Context) (bool, error) {
		_, last = p.client.Pods(namespace).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
		switch {
		case last == nil:
			return true, nil
		case apierrors.IsNotFound(last), apierrors.IsConflict(last):
			// Gone, or a different pod (UID precondition failed): not ours to annotate.
			return false, fmt.Errorf("%w: %w", ErrPodGone, last)
		case apierrors.IsInvalid(last), apierrors.IsForbidden(last), apierrors.IsBadRequest(last):
			return false, last // retrying cannot help
		}
		return false, nil
	})
	if err != nil {
		if last != nil && !errors.Is(err, ErrPodGone) {
			return fmt.Errorf("patch %s of pod %s/%s: %w", key, namespace, name, last)
		}
		return fmt.Errorf("patch %s of pod %s/%s: %w", key, namespace, name, err)
	}
	return nil
}
