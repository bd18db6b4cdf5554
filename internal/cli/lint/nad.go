package lint

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// lintNAD checks a NetworkAttachmentDefinition with podnetworks.CheckNAD
// (the webhook's rules) and records it for the pods (a nil obj, one that
// could not be decoded, is recorded as undecodable).
func (l *linter) lintNAD(r *Result, obj runtime.Object) {
	l.nadNamespaces[r.Namespace] = true
	key := r.Namespace + "/" + r.Name
	nad, ok := obj.(*nadv1.NetworkAttachmentDefinition)
	if !ok {
		if r.Name != "" {
			l.nads[key] = nil
		}
		return
	}
	nad = nad.DeepCopy()
	nad.Namespace = r.Namespace
	f := podnetworks.CheckNAD(nad, podnetworks.DefaultResourceNameKeys)
	for _, e := range f.Errors {
		r.Errors = append(r.Errors, e.String())
	}
	// Labels come from a map: no lookup can fail.
	trust, _ := podnetworks.CheckNADTrustFindings(context.Background(), nad, l.opts.Policy)
	for _, e := range trust {
		r.Errors = append(r.Errors, e.String())
	}
	for _, w := range f.Warnings {
		r.Warnings = append(r.Warnings, w.String())
	}
	for _, n := range f.Notes {
		r.Notes = append(r.Notes, n.String())
	}
	if r.Name != "" {
		l.nads[key] = nad
	}
}
