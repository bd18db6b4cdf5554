package apiclient

import (
	"errors"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1alpha1"
)

// Interface is what Clientset offers; accept it where a fake may stand in.
type Interface interface {
	// NetworkAttachmentDefinitions returns the client of the
	// NetworkAttachmentDefinitions in namespace (metav1.NamespaceAll, "",
	// for List and Watch across all namespaces).
	NetworkAttachmentDefinitions(namespace string) NetworkAttachmentDefinitionInterface
	// IPAMClaims returns the client of the IPAMClaims in namespace
	// (metav1.NamespaceAll, "", for List and Watch across all namespaces).
	IPAMClaims(namespace string) IPAMClaimInterface
}

// Clientset is the typed client of the k8s.cni.cncf.io group: v1
// (NetworkAttachmentDefinition) and v1alpha1 (IPAMClaim). It is safe for
// concurrent use.
type Clientset struct {
	v1       rest.Interface
	v1alpha1 rest.Interface
	params   runtime.ParameterCodec
}

var _ Interface = (*Clientset)(nil)

// NewScheme returns a new runtime.Scheme holding the types of
// k8s.cni.cncf.io/v1 and k8s.cni.cncf.io/v1alpha1 and the meta/v1 types
// (Status, options, WatchEvent) a REST client needs.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := nadv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("add %s to scheme: %w", nadv1.SchemeGroupVersion, err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("add %s to scheme: %w", v1alpha1.SchemeGroupVersion, err)
	}
	return s, nil
}

// NewForConfig returns a Clientset for the API server described by c (host,
// TLS, credentials, QPS/Burst, Timeout). c is not modified; its
// GroupVersion, APIPath, content types and serializer are set on a copy.
// Errors: nil config, or a config from which no HTTP client can be built.
func NewForConfig(c *rest.Config) (*Clientset, error) {
	if c == nil {
		return nil, errors.New("apiclient: rest config is nil")
	}
	httpClient, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("apiclient: build HTTP client: %w", err)
	}
	return NewForConfigAndClient(c, httpClient)
}

// NewForConfigAndClient is NewForConfig with a caller-supplied HTTP client,
// shared by both group versions (and by other clients built on it).
func NewForConfigAndClient(c *rest.Config, httpClient *http.Client) (*Clientset, error) {
	if c == nil {
		return nil, errors.New("apiclient: rest config is nil")
	}
	if httpClient == nil {
		return nil, errors.New("apiclient: http client is nil")
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, fmt.Errorf("apiclient: %w", err)
	}
	codecs := serializer.NewCodecFactory(scheme)
	v1c, err := restClientFor(c, nadv1.SchemeGroupVersion, codecs, httpClient)
	if err != nil {
		return nil, err
	}
	v1a1c, err := restClientFor(c, v1alpha1.SchemeGroupVersion, codecs, httpClient)
	if err != nil {
		return nil, err
	}
	return &Clientset{v1: v1c, v1alpha1: v1a1c, params: runtime.NewParameterCodec(scheme)}, nil
}

// restClientFor builds a JSON-only REST client for gv under /apis.
func restClientFor(c *rest.Config, gv schema.GroupVersion, codecs serializer.CodecFactory, httpClient *http.Client) (*rest.RESTClient, error) {
	cfg := rest.CopyConfig(c)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = codecs.WithoutConversion()
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("apiclient: REST client for %s: %w", gv, err)
	}
	return rc, nil
}

// NetworkAttachmentDefinitions implements Interface.
func (cs *Clientset) NetworkAttachmentDefinitions(namespace string) NetworkAttachmentDefinitionInterface {
	return &nadClient{objectClient[*nadv1.NetworkAttachmentDefinition, *nadv1.NetworkAttachmentDefinitionList]{
		client:    cs.v1,
		params:    cs.params,
		namespace: namespace,
		resource:  nadv1.NetworkAttachmentDefinitionResource,
		newObj:    func() *nadv1.NetworkAttachmentDefinition { return &nadv1.NetworkAttachmentDefinition{} },
		newList:   func() *nadv1.NetworkAttachmentDefinitionList { return &nadv1.NetworkAttachmentDefinitionList{} },
	}}
}

// IPAMClaims implements Interface.
func (cs *Clientset) IPAMClaims(namespace string) IPAMClaimInterface {
	return &ipamClaimClient{objectClient[*v1alpha1.IPAMClaim, *v1alpha1.IPAMClaimList]{
		client:    cs.v1alpha1,
		params:    cs.params,
		namespace: namespace,
		resource:  v1alpha1.IPAMClaimResource,
		newObj:    func() *v1alpha1.IPAMClaim { return &v1alpha1.IPAMClaim{} },
		newList:   func() *v1alpha1.IPAMClaimList { return &v1alpha1.IPAMClaimList{} },
	}}
}

// RESTClientV1 returns the REST client of k8s.cni.cncf.io/v1, for requests
// this package has no method for.
func (cs *Clientset) RESTClientV1() rest.Interface { return cs.v1 }

// RESTClientV1alpha1 returns the REST client of k8s.cni.cncf.io/v1alpha1.
func (cs *Clientset) RESTClientV1alpha1() rest.Interface { return cs.v1alpha1 }
