package selection

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The keys of a network selection element (spec §4.1.2.1).
const (
	keyName         = "name"
	keyNamespace    = "namespace"
	keyIPs          = "ips"
	keyMAC          = "mac"
	keyInterface    = "interface"
	keyCNIArgs      = "cni-args"
	keyPortMappings = "portMappings"
	keyBandwidth    = "bandwidth"
	keyDefaultRoute = "default-route"
	keyInfiniband   = "infiniband-guid"
	keyIPAMClaim    = "ipam-claim-reference"
)

// knownKeys lists the spec's keys in the order of §4.1.2.1.
var knownKeys = [...]string{keyName, keyNamespace, keyIPs, keyMAC, keyInterface, keyCNIArgs,
	keyPortMappings, keyBandwidth, keyDefaultRoute, keyInfiniband, keyIPAMClaim}

// elementLabel names a lone element in errors from Element.UnmarshalJSON.
const elementLabel = "network selection element"

// MarshalJSON writes the element as one JSON object with the spec's keys in
// the order of §4.1.2.1, then the Extensions sorted by key. Absent values
// (empty strings, nil slices and maps, nil Bandwidth) are left out; non-nil
// empty slices and maps are written, so that an empty "default-route" list
// survives. It fails only for CNIArgs that encoding/json cannot marshal or
// Extensions that are not valid JSON.
func (e Element) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := e.writeJSON(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// writeJSON writes e as MarshalJSON describes to b.
func (e *Element) writeJSON(b *bytes.Buffer) error {
	w := newObjectWriter(b)
	w.set(keyName, e.Name)
	if e.Namespace != "" {
		w.set(keyNamespace, e.Namespace)
	}
	if e.IPRequest != nil {
		w.set(keyIPs, e.IPRequest)
	}
	if e.MacRequest != "" {
		w.set(keyMAC, e.MacRequest)
	}
	if e.InterfaceRequest != "" {
		w.set(keyInterface, e.InterfaceRequest)
	}
	if e.CNIArgs != nil {
		w.set(keyCNIArgs, e.CNIArgs)
	}
	if e.PortMappingsRequest != nil {
		w.set(keyPortMappings, e.PortMappingsRequest)
	}
	if e.BandwidthRequest != nil {
		w.set(keyBandwidth, e.BandwidthRequest)
	}
	if e.GatewayRequest != nil {
		w.set(keyDefaultRoute, e.GatewayRequest)
	}
	if e.InfinibandGUIDRequest != "" {
		w.set(keyInfiniband, e.InfinibandGUIDRequest)
	}
	if e.IPAMClaimReference != "" {
		w.set(keyIPAMClaim, e.IPAMClaimReference)
	}
	keys := make([]string, 0, len(e.Extensions))
	for k := range e.Extensions {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		w.raw(k, e.Extensions[k])
	}
	return w.close()
}

// objectWriter writes one JSON object to a buffer, member by member, and
// keeps the first error (naming its key); what follows an error is not
// written.
type objectWriter struct {
	b     *bytes.Buffer
	enc   *json.Encoder
	first bool
	err   error
}

// newObjectWriter starts an object on b.
func newObjectWriter(b *bytes.Buffer) *objectWriter {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	b.WriteByte('{')
	return &objectWriter{b: b, enc: enc, first: true}
}

// separate writes the comma before every member but the first.
func (w *objectWriter) separate() {
	if !w.first {
		w.b.WriteByte(',')
	}
	w.first = false
}

// set writes the member k (a key of the spec: it needs no escaping) with
// v encoded.
func (w *objectWriter) set(k string, v any) {
	if w.err != nil {
		return
	}
	w.separate()
	w.b.WriteByte('"')
	w.b.WriteString(k)
	w.b.WriteString(`":`)
	if err := w.enc.Encode(v); err != nil {
		w.err = fieldError(k, err)
		return
	}
	w.b.Truncate(w.b.Len() - 1) // Encode ends with a newline
}

// raw writes the member k (escaped) with the JSON v compacted.
func (w *objectWriter) raw(k string, v json.RawMessage) {
	if w.err != nil {
		return
	}
	w.separate()
	_ = w.enc.Encode(k) // a string always encodes
	w.b.Truncate(w.b.Len() - 1)
	w.b.WriteByte(':')
	if err := json.Compact(w.b, v); err != nil {
		w.err = fieldError(k, err)
	}
}

// close ends the object, or returns the first error.
func (w *objectWriter) close() error {
	if w.err != nil {
		return w.err
	}
	w.b.WriteByte('}')
	return nil
}

func fieldError(key string, err error) error {
	return fmt.Errorf("field %q: %w", key, err)
}

// UnmarshalJSON decodes one network selection element: it checks the JSON
// types of the spec's keys (§4.1.2.1), keeps keys with a period in
// Extensions, and rejects other keys and repeated keys. It does not check
// values (addresses, names, ranges) nor fill in the namespace: Parse does.
// Errors are *AnnotationError.
func (e *Element) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		return nil
	}
	c := collector{annotation: elementLabel}
	if !json.Valid(data) {
		c.add(-1, "", "", "", "is not valid JSON: "+jsonSyntaxError(data), secKeys)
		return c.err()
	}
	var out Element
	decodeElement(&c, -1, data, &out)
	if err := c.err(); err != nil {
		return err
	}
	*e = out
	return nil
}

// decodeElement decodes one JSON value (valid JSON) into e and reports type
// problems: wrong JSON types, nulls, empty strings where the spec wants a
// value, zero bandwidth values, unknown and repeated keys. A field with a
// problem is given a harmless placeholder or marked in the returned set so
// that validateElement does not report it again; the element is discarded
// anyway. All bits set means "not an object".
func decodeElement(c *collector, idx int, raw []byte, e *Element) fieldSet {
	if k := kindOf(raw); k != "object" {
		c.add(idx, "", "", "", "must be a JSON object, not "+article(k), secKeys)
		return ^fieldSet(0)
	}
	var buf [16]member
	d := elementDecoder{c: c, idx: idx, m: members(raw, buf[:0])}
	if v, ok := d.m.get(keyName); ok {
		s, r := decodeString(v)
		if r != "" {
			d.problem(fName, keyName, r, secName)
		}
		e.Name = s
		d.nw = s
	} else {
		d.problem(fName, keyName, "is required", secName)
	}
	if k, dup := d.m.duplicateKey(); dup {
		d.problem(0, k, "appears more than once", secKeys)
	}
	e.Namespace = d.str(fNamespace, keyNamespace, secNamespace, true)
	if v, ok := d.m.get(keyIPs); ok {
		e.IPRequest = decodeStringList(c, idx, d.nw, v, keyIPs, secIPs, &d.bad, fIPs)
	}
	e.MacRequest = d.str(fMAC, keyMAC, secMAC, false)
	e.InterfaceRequest = d.str(fInterface, keyInterface, secInterface, false)
	d.cniArgs(e)
	if v, ok := d.m.get(keyPortMappings); ok {
		e.PortMappingsRequest = decodePortMappings(c, idx, d.nw, v, &d.bad)
	}
	if v, ok := d.m.get(keyBandwidth); ok {
		e.BandwidthRequest = decodeBandwidth(c, idx, d.nw, v, &d.bad)
	}
	if v, ok := d.m.get(keyDefaultRoute); ok {
		e.GatewayRequest = decodeStringList(c, idx, d.nw, v, keyDefaultRoute, secDefaultRoute, &d.bad, fDefaultRoute)
	}
	e.InfinibandGUIDRequest = d.str(fInfiniband, keyInfiniband, secInfiniband, false)
	e.IPAMClaimReference = d.str(fIPAMClaim, keyIPAMClaim, secIPAMClaimRef, false)
	d.otherKeys(e)
	return d.bad
}

// elementDecoder is the state of decodeElement: the element's members m,
// its network name nw once read (for errors), the fields with a problem.
type elementDecoder struct {
	c   *collector
	idx int
	m   object
	nw  string
	bad fieldSet
}

// problem reports reason about field and marks f as bad.
func (d *elementDecoder) problem(f fieldSet, field, reason, section string) {
	d.bad |= f
	d.c.add(d.idx, d.nw, field, "", reason, section)
}

// str decodes the string member key ("" when absent); an empty string is
// a problem unless allowEmpty.
func (d *elementDecoder) str(f fieldSet, key, section string, allowEmpty bool) string {
	v, ok := d.m.get(key)
	if !ok {
		return ""
	}
	s, r := decodeString(v)
	if r == "" && s == "" && !allowEmpty {
		r = "must not be empty; leave the key out instead"
	}
	if r != "" {
		d.problem(f, key, r, section)
	}
	return s
}

// cniArgs decodes "cni-args" (a JSON object, numbers kept as json.Number).
func (d *elementDecoder) cniArgs(e *Element) {
	v, ok := d.m.get(keyCNIArgs)
	if !ok {
		return
	}
	if k := kindOf(v); k != "object" {
		d.problem(fCNIArgs, keyCNIArgs, "must be a JSON object, not "+article(k), secCNIArgs)
		return
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	if err := dec.Decode(&e.CNIArgs); err != nil {
		d.problem(fCNIArgs, keyCNIArgs, "is not a valid JSON object: "+err.Error(), secCNIArgs)
	}
}

// otherKeys keeps the keys that are not the spec's and contain a period
// in e.Extensions (compacted), and reports the others (suggesting the
// spec key one likely misspells).
func (d *elementDecoder) otherKeys(e *Element) {
	for i := range d.m {
		if isKnownKey(d.m[i].key) {
			continue
		}
		k := string(d.m[i].key)
		if strings.Contains(k, ".") {
			if e.Extensions == nil {
				e.Extensions = make(map[string]json.RawMessage)
			}
			var cb bytes.Buffer
			cb.Grow(len(d.m[i].val))
			_ = json.Compact(&cb, d.m[i].val) // valid: checked by the caller
			e.Extensions[k] = cb.Bytes()
			continue
		}
		reason := "is not a key of the spec; keys of other parties must use reverse domain notation, e.g. \"org.example." + truncate(k) + "\""
		if k == "" {
			reason = "an empty key is not a key of the spec"
		} else if s := suggestKey(k); s != "" {
			reason = "is not a key of the spec; did you mean " + strconv.Quote(s) + "?"
		}
		d.problem(fExtensions, k, reason, secKeys)
	}
}

func isKnownKey(k []byte) bool {
	switch string(k) {
	case keyName, keyNamespace, keyIPs, keyMAC, keyInterface, keyCNIArgs,
		keyPortMappings, keyBandwidth, keyDefaultRoute, keyInfiniband, keyIPAMClaim:
		return true
	}
	return false
}

// suggestKey returns the spec key that k most likely misspells: the same
// letters ignoring case, '-' and '_', or one edit away (the common "ip"
// for "ips"), or a well-known alias.
func suggestKey(k string) string {
	nk := normalizeKey(k)
	switch nk {
	case "ifname", "iface", "interfacerequest":
		return keyInterface
	case "ip", "iprequest", "ipaddress", "ipaddresses", "address", "addresses":
		return keyIPs
	case "macaddress", "macrequest":
		return keyMAC
	case "gateway", "gateways", "gatewayrequest":
		return keyDefaultRoute
	case "args", "cniargs":
		return keyCNIArgs
	case "ns":
		return keyNamespace
	}
	for _, known := range knownKeys {
		nn := normalizeKey(known)
		if nk == nn || (len(nn) > 2 && oneEdit(nk, nn)) {
			return known
		}
	}
	return ""
}

// oneEdit reports whether a becomes b by inserting, deleting or replacing
// one byte.
func oneEdit(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	if len(b)-len(a) > 1 {
		return false
	}
	i := 0
	for i < len(a) && a[i] == b[i] {
		i++
	}
	if i == len(a) {
		return true
	}
	if len(a) == len(b) {
		return a[i+1:] == b[i+1:]
	}
	return a[i:] == b[i+1:]
}

func normalizeKey(k string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' {
			return -1
		}
		if r >= 'A' && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, k)
}

// decodeStringList decodes a JSON array of strings; an empty array gives a
// non-nil empty slice.
func decodeStringList(c *collector, idx int, nw string, raw []byte, key, section string, bad *fieldSet, f fieldSet) []string {
	if k := kindOf(raw); k != "array" {
		*bad |= f
		c.add(idx, nw, key, "", "must be a JSON array of strings, not "+article(k), section)
		return nil
	}
	var buf [8][]byte
	list := items(raw, buf[:0])
	out := make([]string, len(list))
	for i, it := range list {
		s, r := decodeString(it)
		if r != "" {
			*bad |= f
			c.add(idx, nw, indexed(key, i), "", r, section)
		}
		out[i] = s
	}
	return out
}

func decodePortMappings(c *collector, idx int, nw string, raw []byte, bad *fieldSet) []PortMapping {
	if k := kindOf(raw); k != "array" {
		*bad |= fPortMappings
		c.add(idx, nw, keyPortMappings, "", "must be a JSON array of objects, not "+article(k), secPortMappings)
		return nil
	}
	var buf [8][]byte
	list := items(raw, buf[:0])
	out := make([]PortMapping, len(list))
	for i, it := range list {
		field := indexed(keyPortMappings, i)
		pm := &out[i]
		// Placeholders keep validatePortMappings quiet about fields with a
		// problem reported here.
		pm.HostPort, pm.ContainerPort = 1, 1
		if k := kindOf(it); k != "object" {
			c.add(idx, nw, field, "", "must be a JSON object, not "+article(k), secPortMappings)
			continue
		}
		var mbuf [4]member
		m := members(it, mbuf[:0])
		if k, dup := m.duplicateKey(); dup {
			c.add(idx, nw, field+"."+k, "", "appears more than once", secPortMappings)
		}
		port := func(key string, dst *int32) {
			v, ok := m.get(key)
			if !ok {
				c.add(idx, nw, field+"."+key, "", "is required", secPortMappings)
				return
			}
			n, r := decodeInt(v)
			if r == "" && (n < 1 || n > maxPort) {
				c.add(idx, nw, field+"."+key, string(v), "is not a port number 1-65535", secPortMappings)
				return
			}
			if r != "" {
				c.add(idx, nw, field+"."+key, "", r, secPortMappings)
				return
			}
			*dst = int32(n)
		}
		port("hostPort", &pm.HostPort)
		port("containerPort", &pm.ContainerPort)
		for _, key := range [...]string{"protocol", "hostIP"} {
			v, ok := m.get(key)
			if !ok {
				continue
			}
			s, r := decodeString(v)
			if r == "" && s == "" {
				r = "must not be empty; leave the key out instead"
			}
			if r != "" {
				c.add(idx, nw, field+"."+key, "", r, secPortMappings)
				continue
			}
			if key == "protocol" {
				pm.Protocol = s
			} else {
				pm.HostIP = s
			}
		}
		for j := range m {
			switch string(m[j].key) {
			case "hostPort", "containerPort", "protocol", "hostIP":
			default:
				c.add(idx, nw, field+"."+string(m[j].key), "", `is not a port mapping key (hostPort, containerPort, protocol, hostIP)`, secPortMappings)
			}
		}
	}
	return out
}

func decodeBandwidth(c *collector, idx int, nw string, raw []byte, bad *fieldSet) *Bandwidth {
	if k := kindOf(raw); k != "object" {
		*bad |= fBandwidth
		c.add(idx, nw, keyBandwidth, "", "must be a JSON object, not "+article(k), secBandwidth)
		return nil
	}
	var mbuf [4]member
	m := members(raw, mbuf[:0])
	if k, dup := m.duplicateKey(); dup {
		c.add(idx, nw, keyBandwidth+"."+k, "", "appears more than once", secBandwidth)
	}
	b := &Bandwidth{}
	for j := range m {
		var dst *int64
		switch string(m[j].key) {
		case "ingressRate":
			dst = &b.IngressRate
		case "ingressBurst":
			dst = &b.IngressBurst
		case "egressRate":
			dst = &b.EgressRate
		case "egressBurst":
			dst = &b.EgressBurst
		default:
			*bad |= fBandwidth
			c.add(idx, nw, keyBandwidth+"."+string(m[j].key), "", "is not a bandwidth key (ingressRate, ingressBurst, egressRate, egressBurst)", secBandwidth)
			continue
		}
		n, r := decodeInt(m[j].val)
		if r == "" && n == 0 {
			r = "must be non-zero; leave the key out instead"
		}
		if r != "" {
			c.add(idx, nw, keyBandwidth+"."+string(m[j].key), "", r, secBandwidth)
			n = 1 // placeholder, see decodeElement
		}
		*dst = n
	}
	return b
}

// jsonSyntaxError describes why b is not valid JSON, with the byte offset.
func jsonSyntaxError(b []byte) string {
	var v any
	err := json.Unmarshal(b, &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return se.Error() + " at byte " + strconv.FormatInt(se.Offset, 10)
	}
	if err != nil {
		return err.Error()
	}
	return "invalid JSON"
}

// decodeString decodes a JSON string; the second result is a problem.
func decodeString(raw []byte) (string, string) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", "must be a string, not " + article(kindOf(raw))
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), "" // the common case: nothing to unescape
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", "is not a valid JSON string"
	}
	return s, ""
}

// decodeInt decodes a JSON number that must be an integer.
func decodeInt(raw []byte) (int64, string) {
	if k := kindOf(raw); k != "number" {
		return 0, "must be an integer, not " + article(k)
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		if bytes.ContainsAny(raw, ".eE") {
			return 0, "must be an integer, not " + string(raw)
		}
		return 0, "is out of range: " + truncate(string(raw))
	}
	return n, ""
}

// kindOf names the JSON type of a raw value by its first byte.
func kindOf(raw []byte) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}

func article(kind string) string {
	switch kind {
	case "object", "array":
		return "an " + kind
	case "null", "nothing":
		return kind
	}
	return "a " + kind
}
