package podnetworks

import (
	"errors"
	"strconv"

	"github.com/multinet/multinet/pkg/spec/selection"
)

// Field paths of the problems that are not about a pod annotation.
const (
	// HostNetworkField is the pod field of a selection that is never
	// honoured because the pod uses the node's network namespace.
	HostNetworkField = "spec.hostNetwork"
	// defaultNetworksField is the prefix of the field of a problem with
	// multinetd's defaultNetworks, e.g. "multinetd defaultNetworks[0]".
	defaultNetworksField = "multinetd defaultNetworks"
)

// AnnotationField is the field path of pod annotation key in problems, e.g.
// `metadata.annotations["k8s.v1.cni.cncf.io/networks"]`.
func AnnotationField(key string) string {
	return "metadata.annotations[" + strconv.Quote(key) + "]"
}

// Problem is one reason why a pod's network selection is invalid: the pod
// network operation fails on it (multinetd), the webhook denies the pod, and
// lint reports it. Error() reads like
//
//	metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks[1] "net-b": field "mac": needs runtimeConfig "mac", but no plugin of CNI config "net-b" declares "capabilities": {"mac": true} (spec §4.1.2.1.4.2)
type Problem struct {
	// Annotation is the pod annotation the problem is in
	// (selection.NetworksAnnotation or selection.DefaultNetworkAnnotation);
	// empty for HostNetworkField and multinetd's defaultNetworks.
	Annotation string
	// Field is the field path that Error starts with: AnnotationField(Annotation),
	// HostNetworkField, or "multinetd defaultNetworks[i]".
	Field string
	// Index is the element's position in the networks annotation; -1 when
	// the problem is not about one element of it (the annotation as a whole,
	// the default-network override, the pod spec, defaultNetworks).
	Index int
	// Err says what is wrong: a *selection.ValidationError (element, field,
	// value, reason and spec section), a *selection.IsolationError (§7.4), or
	// another error naming what it is about.
	Err error
}

// Error implements error: Field, then Err.
func (p Problem) Error() string { return p.Field + ": " + p.Err.Error() }

// Unwrap returns Err.
func (p Problem) Unwrap() error { return p.Err }

// Error is an invalid network selection: every Problem Check found. It is
// the message the webhook denies the pod with and multinetd fails the ADD
// (and posts its Warning Event) with.
type Error struct {
	// Problems, never empty, in Verdict order.
	Problems []Problem
}

// Error implements error: the single problem, or "the pod's network
// selection has N problems: " followed by the first 20 separated by "; "
// (selection.ListProblems).
func (e *Error) Error() string {
	return selection.ListProblems("the pod's network selection", e.Problems)
}

// Unwrap gives errors.Is and errors.As access to each problem.
func (e *Error) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

// LookupError is a NetworkAttachmentDefinition lookup that failed for a
// reason other than NotFound (the API server or the informer not answering
// in time): the verdict is not known. A retry may cure it.
type LookupError struct {
	// NAD is "namespace/name".
	NAD string
	Err error
}

func (e *LookupError) Error() string {
	return "looking up NetworkAttachmentDefinition " + e.NAD + ": " + e.Err.Error()
}

func (e *LookupError) Unwrap() error { return e.Err }

// NotKnownError is what an offline NADs source (lint) returns for a
// NetworkAttachmentDefinition it cannot know about: Check then checks the
// selection without it and says so in a note. Reason says why, e.g.
// "NetworkAttachmentDefinition team/net-a is not in the input".
type NotKnownError struct{ Reason string }

func (e *NotKnownError) Error() string { return e.Reason }

// isNotKnown reports whether err is a *NotKnownError.
func isNotKnown(err error) bool {
	var nk *NotKnownError
	return errors.As(err, &nk)
}
