package registration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"

	admv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	admv1client "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// Client is what this package needs of a clientset:
// clientset.AdmissionregistrationV1().
type Client = admv1client.AdmissionregistrationV1Interface

// Apply creates the configurations Render(o, caBundle) returns, or updates
// the existing ones to them (their webhooks replaced, labels merged, other
// metadata kept). An object already as desired is not written; a conflict
// is retried. Errors name the object.
func Apply(ctx context.Context, c Client, o Options, caBundle []byte) error {
	mwc, vwc, err := Render(o, caBundle)
	if err != nil {
		return err
	}
	return errors.Join(
		apply(ctx, mutating(c), mwc),
		apply(ctx, validating(c), vwc),
	)
}

// PatchCABundle sets caBundle (PEM) on every webhook of the existing
// configurations mutatingName and validatingName (an empty name is
// skipped), writing only those that differ. Errors: a configuration does
// not exist (apierrors.IsNotFound holds for the wrapped error) or an API
// call failed; both names are tried either way.
func PatchCABundle(ctx context.Context, c Client, mutatingName, validatingName string, caBundle []byte) error {
	var errs []error
	if mutatingName != "" {
		errs = append(errs, patchCABundle(ctx, mutating(c), mutatingName, caBundle))
	}
	if validatingName != "" {
		errs = append(errs, patchCABundle(ctx, validating(c), validatingName, caBundle))
	}
	return errors.Join(errs...)
}

// typedAPI is the part of the typed clients of both configuration kinds
// this package uses.
type typedAPI[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// configObject is *MutatingWebhookConfiguration or
// *ValidatingWebhookConfiguration.
type configObject interface {
	metav1.Object
	runtime.Object
}

// kindClient adapts the typed clients of the two configuration kinds.
type kindClient[T configObject] struct {
	kind string
	api  typedAPI[T]
	// clientConfigs points at the client config of each webhook of obj.
	clientConfigs func(obj T) []*admv1.WebhookClientConfig
	// setWebhooks replaces dst's webhooks with src's.
	setWebhooks func(dst, src T)
}

func mutating(c Client) kindClient[*admv1.MutatingWebhookConfiguration] {
	return kindClient[*admv1.MutatingWebhookConfiguration]{
		kind: "MutatingWebhookConfiguration",
		api:  c.MutatingWebhookConfigurations(),
		clientConfigs: func(obj *admv1.MutatingWebhookConfiguration) []*admv1.WebhookClientConfig {
			out := make([]*admv1.WebhookClientConfig, len(obj.Webhooks))
			for i := range obj.Webhooks {
				out[i] = &obj.Webhooks[i].ClientConfig
			}
			return out
		},
		setWebhooks: func(dst, src *admv1.MutatingWebhookConfiguration) { dst.Webhooks = src.Webhooks },
	}
}

func validating(c Client) kindClient[*admv1.ValidatingWebhookConfiguration] {
	return kindClient[*admv1.ValidatingWebhookConfiguration]{
		kind: "ValidatingWebhookConfiguration",
		api:  c.ValidatingWebhookConfigurations(),
		clientConfigs: func(obj *admv1.ValidatingWebhookConfiguration) []*admv1.WebhookClientConfig {
			out := make([]*admv1.WebhookClientConfig, len(obj.Webhooks))
			for i := range obj.Webhooks {
				out[i] = &obj.Webhooks[i].ClientConfig
			}
			return out
		},
		setWebhooks: func(dst, src *admv1.ValidatingWebhookConfiguration) { dst.Webhooks = src.Webhooks },
	}
}

func deepCopy[T configObject](obj T) T { return obj.DeepCopyObject().(T) }

func apply[T configObject](ctx context.Context, kc kindClient[T], desired T) error {
	name := desired.GetName()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		existing, err := kc.api.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if _, err := kc.api.Create(ctx, desired, metav1.CreateOptions{}); err != nil {
				if apierrors.IsAlreadyExists(err) {
					return apierrors.NewConflict(admv1.Resource(kc.kind), name, err) // retry as an update
				}
				return err
			}
			klog.FromContext(ctx).Info("webhook configuration created", "kind", kc.kind, "name", name)
			return nil
		}
		if err != nil {
			return err
		}
		obj := deepCopy(existing)
		kc.setWebhooks(obj, desired)
		labels := obj.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, desired.GetLabels())
		obj.SetLabels(labels)
		if equality.Semantic.DeepEqual(existing, obj) {
			return nil
		}
		if _, err := kc.api.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
			return err
		}
		klog.FromContext(ctx).Info("webhook configuration updated", "kind", kc.kind, "name", name)
		return nil
	})
	if err != nil {
		return fmt.Errorf("applying %s %q: %w", kc.kind, name, err)
	}
	return nil
}

func patchCABundle[T configObject](ctx context.Context, kc kindClient[T], name string, caBundle []byte) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		existing, err := kc.api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		obj := deepCopy(existing)
		changed := false
		for _, cc := range kc.clientConfigs(obj) {
			if !bytes.Equal(cc.CABundle, caBundle) {
				cc.CABundle = bytes.Clone(caBundle)
				changed = true
			}
		}
		if !changed {
			return nil
		}
		if _, err := kc.api.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
			return err
		}
		klog.FromContext(ctx).Info("webhook configuration caBundle updated", "kind", kc.kind, "name", name)
		return nil
	})
	if err != nil {
		return fmt.Errorf("setting caBundle of %s %q: %w", kc.kind, name, err)
	}
	return nil
}
