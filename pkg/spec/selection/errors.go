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

// MaxListedProblems bounds how many problems ListProblems prints (and so
// AnnotationError.Error); the errors always hold all of them.
const MaxListedProblems = 20

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

// Error implements error: ListProblems of "<annotation> annotation".
func (e *AnnotationError) Error() string {
	label := e.Annotation
	if label == "" {
		label = networksLabel
	}
	return ListProblems(label+" annotation", e.Problems)
}

// ListProblems is the message of a non-empty list of problems: the single
// problem's message, or "<subject> has N problems: " followed by the first
// MaxListedProblems messages separated by "; " and, when there are more,
// "; and K more".
func ListProblems[E error](subject string, problems []E) string {
	if len(problems) == 1 {
		return problems[0].Error()
	}
	var b strings.Builder
	b.WriteString(subject)
	b.WriteString(" has ")
	b.WriteString(strconv.Itoa(len(problems)))
	b.WriteString(" problems: ")
	for i, p := range problems {
		if i == MaxListedProblems {
			b.WriteString("; and ")
			b.WriteString(strconv.Itoa(len(problems) - i))
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
	// tooMany is set when the list has more elements than allowed
	// (ParseLimit): nothing else is decoded, and it is the error.
	tooMany *TooManyElementsError
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
