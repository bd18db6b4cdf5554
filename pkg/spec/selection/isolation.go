package selection

import (
	"errors"
	"slices"
	"strconv"
	"strings"
)

// IsolationPolicy restricts which namespaces' NetworkAttachmentDefinitions a
// pod may select (spec §7.4 lets implementations restrict selection; it
// requires the pod network operation to fail when a selection is not
// allowed). The zero value allows everything.
//
// When Enabled, a pod may select a NetworkAttachmentDefinition in its own
// namespace or in one of GlobalNamespaces, and nothing else. No namespace is
// global unless listed: Multus treats "default" as global, and callers that
// want that list it.
type IsolationPolicy struct {
	Enabled          bool
	GlobalNamespaces []string
}

// IsolationError says that a pod may not select a NetworkAttachmentDefinition
// because of its namespace (spec §7.4).
type IsolationError struct {
	// Index is the element's position in the annotation; -1 from Check.
	Index int
	// Network is the element's "namespace/name".
	Network string
	// PodNamespace and Namespace (of the NetworkAttachmentDefinition) differ.
	PodNamespace, Namespace string
	// GlobalNamespaces of the policy, for the message.
	GlobalNamespaces []string
}

// Error implements error.
func (e *IsolationError) Error() string {
	var b strings.Builder
	if e.Index >= 0 {
		b.WriteString("networks[")
		b.WriteString(strconv.Itoa(e.Index))
		b.WriteString("]: ")
	}
	b.WriteString("network ")
	b.WriteString(strconv.Quote(e.Network))
	b.WriteString(" is in namespace ")
	b.WriteString(strconv.Quote(e.Namespace))
	b.WriteString(", which a pod in namespace ")
	b.WriteString(strconv.Quote(e.PodNamespace))
	b.WriteString(" may not use: namespace isolation allows only the pod's own namespace")
	if len(e.GlobalNamespaces) > 0 {
		b.WriteString(" and the global namespaces ")
		for i, ns := range e.GlobalNamespaces {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(strconv.Quote(ns))
		}
	}
	b.WriteString(" (spec §7.4)")
	return b.String()
}

// Check returns an *IsolationError when p forbids a pod in podNamespace to
// select e, else nil. An empty e.Namespace means the pod's namespace
// (§4.1.2.1.2).
func (p IsolationPolicy) Check(podNamespace string, e Element) error {
	return p.check(-1, podNamespace, e)
}

// CheckAll checks every element and returns the *IsolationError of each
// forbidden one, joined (errors.Join), or nil.
func (p IsolationPolicy) CheckAll(podNamespace string, elements []Element) error {
	if !p.Enabled {
		return nil
	}
	var errs []error
	for i, e := range elements {
		if err := p.check(i, podNamespace, e); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (p IsolationPolicy) check(idx int, podNamespace string, e Element) error {
	if !p.Enabled {
		return nil
	}
	ns := e.Namespace
	if ns == "" {
		ns = podNamespace
	}
	if ns == podNamespace || slices.Contains(p.GlobalNamespaces, ns) {
		return nil
	}
	return &IsolationError{
		Index:            idx,
		Network:          ns + "/" + e.Name,
		PodNamespace:     podNamespace,
		Namespace:        ns,
		GlobalNamespaces: p.GlobalNamespaces,
	}
}
