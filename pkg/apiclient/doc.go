// Package apiclient is a small typed client for multinet's CRDs on top of
// k8s.io/client-go/rest: NetworkAttachmentDefinition (k8s.cni.cncf.io/v1,
// NPWG multi-net spec v1.3 §3) and IPAMClaim (k8s.cni.cncf.io/v1alpha1,
// spec §8), with informer constructors and typed listers.
//
// It speaks JSON only (no protobuf: CRDs have none). Typical use:
//
//	cs, err := apiclient.NewForConfig(restConfig)
//	nad, err := cs.NetworkAttachmentDefinitions("ns1").Get(ctx, "net-a", metav1.GetOptions{})
//
//	inf := apiclient.NewNetworkAttachmentDefinitionInformer(cs, metav1.NamespaceAll, 0, nil)
//	lister := apiclient.NewNetworkAttachmentDefinitionLister(inf.GetIndexer())
//	go inf.RunWithContext(ctx)
//	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
//	nad, err = lister.Get("ns1", "net-a") // apierrors.IsNotFound(err) when absent
//
// Every call takes a context.Context; give it a deadline.
package apiclient
