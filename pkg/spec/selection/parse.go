package selection

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Parse parses and validates the value of the k8s.v1.cni.cncf.io/networks
// annotation (spec §4.1) of a pod in podNamespace.
//
// The format is the JSON list (§4.1.2) when the first character that is not
// white space is '[', else the comma-delimited list (§4.1.1), whose items
// are "name", "namespace/name", "name@ifname" or "namespace/name@ifname",
// with white space around items ignored. A blank annotation and "[]" give
// zero elements (nil) and no error.
//
// Every element is checked against §4.1.2.1 and the elements against each
// other (unique "interface", one "default-route"). Namespace defaults to
// podNamespace (§4.1.2.1.2); addresses, MACs, GUIDs and protocols come back
// in canonical form. On any problem Parse returns nil and an
// *AnnotationError listing all of them.
func Parse(annotation string, podNamespace string) ([]Element, error) {
	return ParseLimit(annotation, podNamespace, 0)
}

// TooManyElementsError is an annotation that selects more network selection
// elements than a pod may have (ParseLimit's max). Nothing of it was
// decoded.
type TooManyElementsError struct {
	// Count is how many elements the annotation holds (the comma-delimited
	// form: its commas plus one); Max is the limit.
	Count, Max int
}

func (e *TooManyElementsError) Error() string {
	return fmt.Sprintf("networks annotation: selects %d network selection elements; a pod may have at most %d", e.Count, e.Max)
}

// ParseLimit is Parse with a bound: an annotation of more than max
// elements (max > 0; 0 is no bound) fails with a *TooManyElementsError.
// The elements are counted before any is decoded or validated (the JSON
// form is checked for syntax and split at its top level; the
// comma-delimited form's commas are counted), so that a huge selection
// costs no more than a scan.
func ParseLimit(annotation string, podNamespace string, max int) ([]Element, error) {
	c := collector{annotation: networksLabel}
	s := strings.TrimSpace(annotation)
	if s == "" {
		return nil, nil
	}
	opt := options{maxElements: max}
	var elems []Element
	switch s[0] {
	case '[':
		elems = parseJSONList(&c, s, podNamespace, opt)
	case '{':
		c.add(-1, "", "", "", "is a single JSON object; the JSON format is a list of objects: wrap it in [ ]", secJSON)
	default:
		elems = parseCommaList(&c, s, podNamespace, opt)
	}
	if c.tooMany != nil {
		return nil, c.tooMany
	}
	validateSet(&c, elems)
	if err := c.err(); err != nil {
		return nil, err
	}
	if len(elems) == 0 {
		return nil, nil
	}
	return elems, nil
}

// ParseDefaultNetwork parses and validates the value of the
// v1.multus-cni.io/default-network annotation, which replaces the
// cluster-wide default network (spec §6) for one pod. It must select
// exactly one network, in either format of §4.1, or as a single JSON object
// (the form OVN-Kubernetes documents). The element follows the rules of
// §4.1.2.1 with two differences: "interface" is refused, because the
// default network always uses the runtime's CNI_IFNAME, and "ips" may be
// combined with "ipam-claim-reference". Namespace defaults to podNamespace.
// Errors are *AnnotationError.
func ParseDefaultNetwork(annotation, podNamespace string) (*Element, error) {
	c := collector{annotation: defaultNetworkLabel}
	opt := options{forbidInterface: true, allowIPsWithClaim: true}
	s := strings.TrimSpace(annotation)
	var elems []Element
	switch {
	case s == "":
		c.add(-1, "", "", "", "is empty; it must select exactly one network", secJSON)
	case s[0] == '[':
		elems = parseJSONList(&c, s, podNamespace, opt)
	case s[0] == '{':
		var e Element
		b := []byte(s)
		bad := ^fieldSet(0)
		if json.Valid(b) {
			bad = decodeElement(&c, 0, b, &e)
		} else {
			c.add(-1, "", "", "", "is not a valid JSON object: "+jsonSyntaxError(b), secJSON)
		}
		if bad != ^fieldSet(0) {
			validateElement(&c, 0, &e, podNamespace, bad, opt)
			elems = []Element{e}
		}
	default:
		elems = parseCommaList(&c, s, podNamespace, opt)
	}
	if len(c.problems) == 0 && len(elems) != 1 {
		c.add(-1, "", "", "", "selects "+itoa(len(elems))+" networks; it must select exactly one", secJSON)
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	return &elems[0], nil
}

// Marshal writes elements as the JSON list form of the annotation (spec
// §4.1.2), keys in the order of §4.1.2.1. It validates the elements as
// Parse does (an empty Namespace stays empty) and writes them in canonical
// form, so that Parse(Marshal(x)) equals x for every x returned by Parse.
// nil or empty gives "[]". Errors are *AnnotationError, or an error naming
// the field that encoding/json could not marshal.
func Marshal(elements []Element) (string, error) {
	c := collector{annotation: networksLabel}
	canon := make([]Element, len(elements))
	for i := range elements {
		canon[i] = cloneForValidation(elements[i])
		validateElement(&c, i, &canon[i], "", 0, options{keepEmptyNamespace: true})
	}
	validateSet(&c, canon)
	if err := c.err(); err != nil {
		return "", err
	}
	var b bytes.Buffer
	b.WriteByte('[')
	for i := range canon {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := canon[i].writeJSON(&b); err != nil {
			return "", fmt.Errorf("networks[%d] %q: %w", i, canon[i].Name, err)
		}
	}
	b.WriteByte(']')
	return b.String(), nil
}

// cloneForValidation copies the slices that validateElement rewrites in
// place, so that Marshal leaves its argument alone.
func cloneForValidation(e Element) Element {
	if e.IPRequest != nil {
		e.IPRequest = append(make([]string, 0, len(e.IPRequest)), e.IPRequest...)
	}
	if e.GatewayRequest != nil {
		e.GatewayRequest = append(make([]string, 0, len(e.GatewayRequest)), e.GatewayRequest...)
	}
	if e.PortMappingsRequest != nil {
		e.PortMappingsRequest = append(make([]PortMapping, 0, len(e.PortMappingsRequest)), e.PortMappingsRequest...)
	}
	return e
}

// parseJSONList decodes and validates the JSON list form (§4.1.2); s
// starts with '['.
func parseJSONList(c *collector, s string, podNamespace string, opt options) []Element {
	b := []byte(s)
	if !json.Valid(b) {
		c.add(-1, "", "", "", "is not a valid JSON list: "+jsonSyntaxError(b), secJSON)
		return nil
	}
	var buf [8][]byte
	raws := items(b, buf[:0])
	if len(raws) == 0 {
		return nil
	}
	if opt.maxElements > 0 && len(raws) > opt.maxElements {
		c.tooMany = &TooManyElementsError{Count: len(raws), Max: opt.maxElements}
		return nil
	}
	elems := make([]Element, len(raws))
	for i, raw := range raws {
		bad := decodeElement(c, i, raw, &elems[i])
		if bad == ^fieldSet(0) {
			continue
		}
		validateElement(c, i, &elems[i], podNamespace, bad, opt)
	}
	return elems
}

// parseCommaList parses and validates the comma-delimited form (§4.1.1).
func parseCommaList(c *collector, s string, podNamespace string, opt options) []Element {
	n := strings.Count(s, ",") + 1
	if opt.maxElements > 0 && n > opt.maxElements {
		c.tooMany = &TooManyElementsError{Count: n, Max: opt.maxElements}
		return nil
	}
	elems := make([]Element, 0, n)
	for idx := 0; ; idx++ {
		item, rest, more := strings.Cut(s, ",")
		item = strings.TrimSpace(item)
		var e Element
		var bad fieldSet
		if item == "" {
			c.add(idx, "", "", "", "is empty: items of the comma-delimited format are separated by single commas", secComma)
			bad = ^fieldSet(0)
		} else {
			ref, ifname, hasIf := strings.Cut(item, "@")
			ns, name, hasNS := strings.Cut(ref, "/")
			if !hasNS {
				ns, name = "", ref
			}
			e.Name, e.InterfaceRequest = name, ifname
			if hasNS {
				e.Namespace = ns
				if ns == "" {
					c.add(idx, name, "namespace", "", "is empty before '/'", secComma)
					bad |= fNamespace
				}
				if strings.Contains(name, "/") {
					c.add(idx, "", "name", name, "must not contain '/': an item is [namespace/]name[@interface]", secComma)
					bad |= fName
				}
			}
			if hasIf && ifname == "" {
				c.add(idx, name, "interface", "", "is empty after '@'", secComma)
				bad |= fInterface
			}
			// Quotes are not part of the comma format: net1@"eth0" would
			// otherwise name an interface "eth0" with the quotes (the kernel
			// allows them) and "net-a" fails the DNS-1123 check with a
			// message that does not say why.
			if hasNS && bad&fNamespace == 0 && quoted(c, idx, name, "namespace", ns) {
				bad |= fNamespace
			}
			if bad&fName == 0 && quoted(c, idx, name, "name", name) {
				bad |= fName
			}
			if hasIf && !opt.forbidInterface && bad&fInterface == 0 && quoted(c, idx, name, "interface", ifname) {
				bad |= fInterface
			}
		}
		if bad != ^fieldSet(0) {
			validateElement(c, idx, &e, podNamespace, bad, opt)
		}
		elems = append(elems, e)
		if !more {
			return elems
		}
		s = rest
	}
}

// quoteChars are the quote characters refused in the comma-delimited
// format: ASCII quotes, the backquote, and the typographic quotes that
// copying from a document brings in.
const quoteChars = "\"'`‘’“”"

// quoted reports (and adds a problem for) a comma-format field whose value
// contains a quote character.
func quoted(c *collector, idx int, network, field, value string) bool {
	i := strings.IndexAny(value, quoteChars)
	if i < 0 {
		return false
	}
	q, _ := utf8.DecodeRuneInString(value[i:])
	reason := "contains the quote character " + strconv.QuoteRune(q) + ": the comma-delimited format takes bare names"
	if bare := strings.Map(func(r rune) rune {
		if strings.ContainsRune(quoteChars, r) {
			return -1
		}
		return r
	}, value); bare != "" {
		reason += " (write " + bare + ")"
	}
	c.add(idx, network, field, value, reason+", or use the JSON list format", secComma)
	return true
}
