// Package nadlookup reads NetworkAttachmentDefinitions (NPWG multi-net spec
// v1.3, §3) for a request that must not act on an informer cache lagging
// behind the API server: it waits (bounded) for the informer's first full
// list, reads the cache (the generated lister of pkg/client), and reads the
// API server once (the generated clientset) when the cache does not have the
// NAD. multinetd's ADD and the webhook's handlers use it; the callers count
// the live reads and the waits in their own metrics (Lookup.OnLive,
// Lookup.OnSyncWait). Typical use:
//
//	f := externalversions.NewSharedInformerFactory(cs, 0)
//	inf := f.K8sCniCncfIo().V1().NetworkAttachmentDefinitions()
//	l := &nadlookup.Lookup{
//		Cache:  inf.Lister(),
//		Live:   nadlookup.LiveGet(cs.K8sCniCncfIoV1()),
//		Synced: inf.Informer().HasSynced,
//	}
//	f.StartWithContext(ctx)
//	nad, err := l.Get(ctx, "ns1", "net-a") // apierrors.IsNotFound(err) when absent
package nadlookup
