package selection

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Names of the annotations as they appear in error messages.
const (
	networksLabel       = "networks"
	defaultNetworkLabel = "default-network"
)

// maxValueLen bounds ValidationError.Value so that a huge annotation cannot
// make a huge error message.
const maxValueLen = 64

// maxListedProblems bounds how many problems AnnotationError.Error prints;
// Problems always holds all of them.
const maxListedProblems = 20

// ValidationError is one problem with one network selection element.
//
// Error() reads like
//
//	networks[1] "net-b": field "mac": "zz" is not a 6-byte MAC address (spec §4.1.2.1.4)
type ValidationError struct {
	// Annotation is "networks" (k8s.v1.cni.cncf.io/networks) or
	// "default-network" (v1.multus-cni.io/default-network).
	Annotation string
	// Index is the element's position in the annotation, from 0; -1 when the
	// problem is with the annotation as a whole (e.g. JSON syntax).
	Index int
	// Network is the element's "name" as written, when known.
	Network string
	// Field is the JSON key with a path inside it, e.g. "mac", "ips[1]",
	// "portMappings[0].hostPort", "bandwidth.ingressBurst"; empty for the
	// element or the annotation as a whole.
	Field string
	// Value is the offending value as written (truncated to 64 bytes); empty
	// when the problem is a missing key or a wrong JSON type.
	Value string
	// Reason says what is wrong, phrased to follow the value.
	Reason string
	// Section is the spec section of the rule, e.g. "4.1.2.1.4".
	Section string
}

// Error implements error.
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.Grow(64 + len(e.Field) + len(e.Value) + len(e.Reason) + len(e.Network))
	label := e.Annotation
	if label == "" {
		label = networksLabel
	}
	b.WriteString(label)
	if e.Index >= 0 {
		b.WriteByte('[')
		b.WriteString(strconv.Itoa(e.Index))
		b.WriteByte(']')
	}
	if e.Network != "" {
		b.WriteByte(' ')
		b.WriteString(strconv.Quote(e.Network))
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString("field ")
		b.WriteString(strconv.Quote(e.Field))
		b.WriteString(": ")
	}
	if e.Value != "" {
		b.WriteString(strconv.Quote(e.Value))
		b.WriteByte(' ')
	}
	b.WriteString(e.Reason)
	if e.Section != "" {
		b.WriteString(" (spec §")
		b.WriteString(e.Section)
		b.WriteByte(')')
	}
	return b.String()
}

// AnnotationError lists every problem found in one annotation. Parse,
// ParseDefaultNetwork and Marshal return it as their error; errors.As finds
// both *AnnotationError and each *ValidationError in it.
type AnnotationError struct {
	// Annotation is "networks" or "default-network".
	Annotation string
	// Problems, in the order of the elements and, within one element, of the
	// keys in the spec. Never empty.
	Problems []*ValidationError
}

// Error implements error: the single problem, or a count followed by the
// first 20 problems separated by "; ".
func (e *AnnotationError) Error() string {
	if len(e.Problems) == 1 {
		return e.Problems[0].Error()
	}
	var b strings.Builder
	label := e.Annotation
	if label == "" {
		label = networksLabel
	}
	b.WriteString(label)
	b.WriteString(" annotation has ")
	b.WriteString(strconv.Itoa(len(e.Problems)))
	b.WriteString(" problems: ")
	for i, p := range e.Problems {
		if i == maxListedProblems {
			b.WriteString("; and ")
			b.WriteString(strconv.Itoa(len(e.Problems) - i))
			b.WriteString(" more")
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.Error())
	}
	return b.String()
}

// Unwrap gives errors.Is and errors.As access to each problem.
func (e *AnnotationError) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

// collector gathers the problems of one annotation.
type collector struct {
	annotation string
	problems   []*ValidationError
}

func (c *collector) add(index int, network, field, value, reason, section string) {
	c.problems = append(c.problems, &ValidationError{
		Annotation: c.annotation,
		Index:      index,
		Network:    truncate(network),
		Field:      truncate(field),
		Value:      truncate(value),
		Reason:     reason,
		Section:    section,
	})
}

// err returns the collected problems as an *AnnotationError, or nil. The
// problems are sorted by element, then by the spec's order of keys.
func (c *collector) err() error {
	if len(c.problems) == 0 {
		return nil
	}
	slices.SortStableFunc(c.problems, func(a, b *ValidationError) int {
		if a.Index != b.Index {
			return cmp.Compare(a.Index, b.Index)
		}
		return cmp.Compare(keyRank(a.Field), keyRank(b.Field))
	})
	return &AnnotationError{Annotation: c.annotation, Problems: c.problems}
}

// keyRank orders fields as §4.1.2.1 lists the keys: the element itself
// first, other keys last.
func keyRank(field string) int {
	if field == "" {
		return -1
	}
	if i := strings.IndexAny(field, "[."); i > 0 {
		field = field[:i]
	}
	for i, k := range knownKeys {
		if k == field {
			return i
		}
	}
	return len(knownKeys)
}

// truncate cuts s to at most maxValueLen bytes on a rune boundary.
func truncate(s string) string {
	if len(s) <= maxValueLen {
		return s
	}
	cut := maxValueLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
