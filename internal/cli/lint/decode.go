package lint

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// maxListDepth bounds how deeply Lists may nest inside Lists.
const maxListDepth = 32

// Object is one Kubernetes object read from a manifest by Decode.
//
// APIVersion, Kind, Namespace, Name and GenerateName are read leniently from
// the JSON: a field that is missing or not a string is "". Lint checks them.
type Object struct {
	// Source says where the object was read: "FILE:LINE", the first line of
	// its YAML document or JSON value, followed by " items[i]" (repeated for
	// nested lists) for an item of a List.
	Source string
	// APIVersion and Kind are the object's "apiVersion" and "kind".
	APIVersion, Kind string
	// Namespace, Name and GenerateName are from "metadata".
	Namespace, Name, GenerateName string
	// DuplicateKeys are the YAML parser's messages about keys repeated in a
	// mapping of the object's YAML document, e.g. `line 8: key "name" already
	// set in map` (lines of the file); the JSON has the last value. They may
	// be about another item of the same List.
	DuplicateKeys []string
	// JSON is the whole object as compact JSON (a JSON object). For an item
	// of a typed list such as PodList that has no "kind" or "apiVersion",
	// Decode adds them from the list ("Pod", the list's apiVersion).
	JSON []byte
}

// DecodeError is input that is not a stream of Kubernetes objects: YAML or
// JSON syntax, or a document (or List item) that is not a mapping.
type DecodeError struct {
	// Source is "FILE:LINE" of the document, or "FILE" when unknown.
	Source string
	Err    error
}

func (e *DecodeError) Error() string { return e.Source + ": " + e.Err.Error() }

func (e *DecodeError) Unwrap() error { return e.Err }

// Decode reads every Kubernetes object in data, a manifest named name (a file
// name, or "<stdin>"), in input order.
//
// data is a JSON stream (one or more JSON values, detected by a first
// non-blank character '{' or '[') or a YAML stream of documents separated by
// "---" lines, split as kubectl does (k8s.io/apimachinery/pkg/util/yaml).
// Empty documents and null values are skipped. Objects of kind "List", and of
// any kind ending in "List" that has an "items" key, are replaced by their
// items, recursively. Every document, JSON value and item must be a mapping.
//
// The error is a *DecodeError naming the file and line.
func Decode(data []byte, name string) ([]Object, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	var objs []Object
	if first := firstNonSpace(data); first == '{' || first == '[' {
		return decodeJSONStream(data, name, objs)
	}
	return decodeYAMLStream(data, name, objs)
}

func decodeJSONStream(data []byte, name string, objs []Object) ([]Object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		start := int(dec.InputOffset())
		start += len(data[start:]) - len(bytes.TrimLeft(data[start:], " \t\r\n"))
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			at := start
			if se := (*json.SyntaxError)(nil); errors.As(err, &se) {
				at = int(se.Offset)
			}
			return nil, &DecodeError{Source: source(name, lineAt(data, at)), Err: fmt.Errorf("JSON: %w", err)}
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil {
			return nil, &DecodeError{Source: source(name, lineAt(data, start)), Err: fmt.Errorf("JSON: %w", err)}
		}
		objs, err = appendObjects(objs, compact.Bytes(), source(name, lineAt(data, start)), nil, "", "", 0)
		if err != nil {
			return nil, err
		}
	}
}

func decodeYAMLStream(data []byte, name string, objs []Object) ([]Object, error) {
	// kubectl's reader reads lines without their "\r\n" or "\n" and ends each
	// with "\n": with the same normalization up front, every document it
	// returns is a run of whole lines of text, so its line is found by search.
	text := bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	if len(text) > 0 && text[len(text)-1] != '\n' {
		text = append(text, '\n')
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(text)))
	pos := 0
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, &DecodeError{Source: source(name, lineAt(text, pos)), Err: fmt.Errorf("YAML: %w", err)}
		}
		start := indexAtLineStart(text, pos, doc)
		pos = start + len(doc)
		line := lineAt(text, start)
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, &DecodeError{Source: source(name, line), Err: absoluteYAMLLine(err, line)}
		}
		var dups []string
		if _, err := yaml.YAMLToJSONStrict(doc); err != nil {
			dups = duplicateKeys(err, line)
		}
		objs, err = appendObjects(objs, j, source(name, line), dups, "", "", 0)
		if err != nil {
			return nil, err
		}
	}
}

// appendObjects appends the object in raw (compact JSON) to objs, or its
// items when it is a List. dups are its document's DuplicateKeys. listKind and
// listAPIVersion are those of the typed list raw is an item of ("" otherwise).
func appendObjects(objs []Object, raw []byte, src string, dups []string, listKind, listAPIVersion string, depth int) ([]Object, error) {
	if string(raw) == "null" && depth == 0 {
		return objs, nil // an empty document
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, &DecodeError{Source: src, Err: fmt.Errorf("not a Kubernetes object: a %s, not a mapping", jsonKind(raw))}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, &DecodeError{Source: src, Err: fmt.Errorf("JSON: %w", err)}
	}
	kind, hasKind := stringMember(m, "kind")
	apiVersion, hasAPIVersion := stringMember(m, "apiVersion")
	if listKind != "" {
		var add []string
		if !hasAPIVersion && listAPIVersion != "" {
			apiVersion = listAPIVersion
			add = append(add, "apiVersion", listAPIVersion)
		}
		if !hasKind {
			kind = listKind
			add = append(add, "kind", listKind)
		}
		raw = prependMembers(raw, add...)
	}
	if items, ok := m["items"]; kind == "List" || (ok && strings.HasSuffix(kind, "List")) {
		return appendItems(objs, items, src, dups, kind, apiVersion, depth)
	}
	var meta struct {
		Name         json.RawMessage `json:"name"`
		Namespace    json.RawMessage `json:"namespace"`
		GenerateName json.RawMessage `json:"generateName"`
	}
	_ = json.Unmarshal(m["metadata"], &meta) // lenient: Lint reports a bad metadata
	return append(objs, Object{
		Source:        src,
		APIVersion:    apiVersion,
		Kind:          kind,
		Namespace:     stringValue(meta.Namespace),
		Name:          stringValue(meta.Name),
		GenerateName:  stringValue(meta.GenerateName),
		DuplicateKeys: dups,
		JSON:          raw,
	}), nil
}

// appendItems appends the objects of a List's "items" (missing or null: none).
func appendItems(objs []Object, items json.RawMessage, src string, dups []string, kind, apiVersion string, depth int) ([]Object, error) {
	if depth >= maxListDepth {
		return nil, &DecodeError{Source: src, Err: fmt.Errorf("Lists nested more than %d deep", maxListDepth)}
	}
	if len(items) == 0 || string(items) == "null" {
		return objs, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(items, &list); err != nil {
		return nil, &DecodeError{Source: src, Err: fmt.Errorf("%s: field items: a %s, not a list", kind, jsonKind(items))}
	}
	itemKind, itemAPIVersion := "", ""
	if kind != "List" { // a typed list such as PodList
		itemKind, itemAPIVersion = strings.TrimSuffix(kind, "List"), apiVersion
	}
	for i, item := range list {
		var err error
		objs, err = appendObjects(objs, item, src+" items["+strconv.Itoa(i)+"]", dups, itemKind, itemAPIVersion, depth+1)
		if err != nil {
			return nil, err
		}
	}
	return objs, nil
}

// stringMember returns m[key] when it is a JSON string, and whether the key
// is present at all.
func stringMember(m map[string]json.RawMessage, key string) (string, bool) {
	raw, ok := m[key]
	return stringValue(raw), ok
}

func stringValue(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// prependMembers returns the compact JSON object obj with the members kv
// (key, value, key, value, ...; string values) before its own.
func prependMembers(obj []byte, kv ...string) []byte {
	if len(kv) == 0 {
		return obj
	}
	b := []byte{'{'}
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, kv[i])
		b = append(b, ':')
		v, _ := json.Marshal(kv[i+1]) // a string always marshals
		b = append(b, v...)
	}
	if rest := obj[1:]; rest[0] != '}' {
		b = append(b, ',')
	}
	return append(b, obj[1:]...)
}

func jsonKind(raw []byte) string {
	switch firstNonSpace(raw) {
	case '{':
		return "mapping"
	case '[':
		return "list"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	case 0:
		return "nothing"
	default:
		return "number"
	}
}

func firstNonSpace(b []byte) byte {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// indexAtLineStart returns the offset of the first occurrence of doc in text
// at or after pos that starts a line (pos when there is none).
func indexAtLineStart(text []byte, pos int, doc []byte) int {
	for from := pos; from <= len(text); {
		i := bytes.Index(text[from:], doc)
		if i < 0 {
			break
		}
		if at := from + i; at == 0 || text[at-1] == '\n' {
			return at
		}
		from += i + 1
	}
	return pos
}

// lineAt is the 1-based line of offset off in data.
func lineAt(data []byte, off int) int {
	off = min(max(off, 0), len(data))
	return 1 + bytes.Count(data[:off], []byte("\n"))
}

func source(name string, line int) string { return name + ":" + strconv.Itoa(line) }

// absoluteYAMLLine rewrites the "yaml: line N:" of a YAML parser error, which
// counts from the start of the document, to count from the start of the file.
func absoluteYAMLLine(err error, docLine int) error {
	msg := err.Error()
	const marker = "yaml: line "
	i := strings.Index(msg, marker)
	if i < 0 {
		return fmt.Errorf("YAML: %w", err)
	}
	rest := msg[i+len(marker):]
	j := strings.IndexByte(rest, ':')
	n, convErr := strconv.Atoi(rest[:max(j, 0)])
	if j < 0 || convErr != nil {
		return fmt.Errorf("YAML: %w", err)
	}
	return fmt.Errorf("YAML: line %d:%s", n+docLine-1, rest[j+1:])
}

// duplicateKeys returns the lines of a strict YAML parser error about
// repeated keys ("  line N: key ... already set in map"), N counted from the
// file's start; nil for any other error (YAMLToJSON already accepted the
// document, so there is none).
func duplicateKeys(err error, docLine int) []string {
	var out []string
	for _, l := range strings.Split(err.Error(), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(l), "line ")
		if !ok || !strings.Contains(rest, "already set in map") {
			continue
		}
		n, msg, _ := strings.Cut(rest, ":")
		if i, err := strconv.Atoi(n); err == nil {
			out = append(out, fmt.Sprintf("line %d:%s", i+docLine-1, msg))
		}
	}
	return out
}
