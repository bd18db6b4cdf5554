package apiclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1alpha1"
)

// NetworkAttachmentDefinitionInterface reads and writes the
// NetworkAttachmentDefinitions (spec §3) of one namespace. Errors from the
// API server are *apierrors.StatusError (test with apierrors.IsNotFound,
// IsConflict, ...); bad arguments (empty name, nil object) give a plain error
// naming the argument.
type NetworkAttachmentDefinitionInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*nadv1.NetworkAttachmentDefinition, error)
	List(ctx context.Context, opts metav1.ListOptions) (*nadv1.NetworkAttachmentDefinitionList, error)
	// Watch returns a watch whose events carry *NetworkAttachmentDefinition
	// (or *metav1.Status for watch.Error). Stop it when done.
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, nad *nadv1.NetworkAttachmentDefinition, opts metav1.CreateOptions) (*nadv1.NetworkAttachmentDefinition, error)
	// Update replaces the object named nad.Name; a stale
	// metadata.resourceVersion gives a Conflict error.
	Update(ctx context.Context, nad *nadv1.NetworkAttachmentDefinition, opts metav1.UpdateOptions) (*nadv1.NetworkAttachmentDefinition, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	// Patch applies data of type pt (types.JSONPatchType or
	// types.MergePatchType; CRDs do not support strategic merge patch) to the
	// object name, or to its subresource ("status" where there is one).
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*nadv1.NetworkAttachmentDefinition, error)
}

// IPAMClaimInterface reads and writes the IPAMClaims (spec §8) of one
// namespace. Update writes metadata and spec (the workload controller's
// part); UpdateStatus writes status through the status subresource (the IPAM
// plugin's part, §8.2). Errors as for NetworkAttachmentDefinitionInterface.
type IPAMClaimInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*v1alpha1.IPAMClaim, error)
	List(ctx context.Context, opts metav1.ListOptions) (*v1alpha1.IPAMClaimList, error)
	// Watch returns a watch whose events carry *IPAMClaim (or *metav1.Status
	// for watch.Error). Stop it when done.
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Create(ctx context.Context, claim *v1alpha1.IPAMClaim, opts metav1.CreateOptions) (*v1alpha1.IPAMClaim, error)
	Update(ctx context.Context, claim *v1alpha1.IPAMClaim, opts metav1.UpdateOptions) (*v1alpha1.IPAMClaim, error)
	// UpdateStatus replaces status of the object named claim.Name (PUT
	// .../ipamclaims/<name>/status); changes to other fields are ignored by
	// the API server. Status.IPs must not be nil (see IPAMClaimStatus).
	UpdateStatus(ctx context.Context, claim *v1alpha1.IPAMClaim, opts metav1.UpdateOptions) (*v1alpha1.IPAMClaim, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1alpha1.IPAMClaim, error)
}

type nadClient struct {
	objectClient[*nadv1.NetworkAttachmentDefinition, *nadv1.NetworkAttachmentDefinitionList]
}

type ipamClaimClient struct {
	objectClient[*v1alpha1.IPAMClaim, *v1alpha1.IPAMClaimList]
}

var (
	_ NetworkAttachmentDefinitionInterface = (*nadClient)(nil)
	_ IPAMClaimInterface                   = (*ipamClaimClient)(nil)
)

// object is a typed API object: runtime.Object with ObjectMeta.
type object interface {
	runtime.Object
	metav1.Object
}

// objectClient is the REST plumbing shared by the typed clients: resource
// in namespace of the group version of client.
type objectClient[T object, L runtime.Object] struct {
	client    rest.Interface
	params    runtime.ParameterCodec
	namespace string
	resource  string
	newObj    func() T
	newList   func() L
}

func (c *objectClient[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	var zero T
	if name == "" {
		return zero, fmt.Errorf("get %s: name is empty", c.resource)
	}
	out := c.newObj()
	err := c.client.Get().
		Namespace(c.namespace).
		Resource(c.resource).
		Name(name).
		VersionedParams(&opts, c.params).
		Do(ctx).
		Into(out)
	if err != nil {
		return zero, err
	}
	return out, nil
}

func (c *objectClient[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	var zero L
	req := c.client.Get().
		Namespace(c.namespace).
		Resource(c.resource).
		VersionedParams(&opts, c.params)
	if opts.TimeoutSeconds != nil {
		req = req.Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second)
	}
	out := c.newList()
	if err := req.Do(ctx).Into(out); err != nil {
		return zero, err
	}
	return out, nil
}

func (c *objectClient[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	req := c.client.Get().
		Namespace(c.namespace).
		Resource(c.resource).
		VersionedParams(&opts, c.params)
	if opts.TimeoutSeconds != nil {
		req = req.Timeout(time.Duration(*opts.TimeoutSeconds) * time.Second)
	}
	return req.Watch(ctx)
}

func (c *objectClient[T, L]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	var zero T
	if isNil(obj) {
		return zero, fmt.Errorf("create %s: object is nil", c.resource)
	}
	out := c.newObj()
	err := c.client.Post().
		Namespace(c.namespace).
		Resource(c.resource).
		VersionedParams(&opts, c.params).
		Body(obj).
		Do(ctx).
		Into(out)
	if err != nil {
		return zero, err
	}
	return out, nil
}

func (c *objectClient[T, L]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	return c.put(ctx, obj, opts, "")
}

// put replaces obj, or its subresource when subresource is not empty.
func (c *objectClient[T, L]) put(ctx context.Context, obj T, opts metav1.UpdateOptions, subresource string) (T, error) {
	var zero T
	verb := "update"
	if subresource != "" {
		verb = "update " + subresource + " of"
	}
	if isNil(obj) {
		return zero, fmt.Errorf("%s %s: object is nil", verb, c.resource)
	}
	if obj.GetName() == "" {
		return zero, fmt.Errorf("%s %s: metadata.name is empty", verb, c.resource)
	}
	req := c.client.Put().
		Namespace(c.namespace).
		Resource(c.resource).
		Name(obj.GetName())
	if subresource != "" {
		req = req.SubResource(subresource)
	}
	out := c.newObj()
	err := req.VersionedParams(&opts, c.params).
		Body(obj).
		Do(ctx).
		Into(out)
	if err != nil {
		return zero, err
	}
	return out, nil
}

func (c *objectClient[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	if name == "" {
		return fmt.Errorf("delete %s: name is empty", c.resource)
	}
	return c.client.Delete().
		Namespace(c.namespace).
		Resource(c.resource).
		Name(name).
		Body(&opts).
		Do(ctx).
		Error()
}

func (c *objectClient[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error) {
	var zero T
	if name == "" {
		return zero, fmt.Errorf("patch %s: name is empty", c.resource)
	}
	if pt == "" {
		return zero, errors.New("patch " + c.resource + ": patch type is empty")
	}
	out := c.newObj()
	err := c.client.Patch(pt).
		Namespace(c.namespace).
		Resource(c.resource).
		Name(name).
		SubResource(subresources...).
		VersionedParams(&opts, c.params).
		Body(data).
		Do(ctx).
		Into(out)
	if err != nil {
		return zero, err
	}
	return out, nil
}

// UpdateStatus implements IPAMClaimInterface.
func (c *ipamClaimClient) UpdateStatus(ctx context.Context, claim *v1alpha1.IPAMClaim, opts metav1.UpdateOptions) (*v1alpha1.IPAMClaim, error) {
	return c.put(ctx, claim, opts, "status")
}

// isNil reports whether a typed pointer held in an interface is nil.
func isNil(o object) bool {
	if o == nil {
		return true
	}
	switch v := o.(type) {
	case *nadv1.NetworkAttachmentDefinition:
		return v == nil
	case *v1alpha1.IPAMClaim:
		return v == nil
	}
	return false
}
