package status

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Encode returns the annotation value for list (spec §5): a JSON list of status
// maps, indented by two spaces, keys in §5.3 order, no HTML escaping. The same
// list always gives the same bytes. A nil or empty list gives "[]".
//
// Errors: an entry that fails Validate ("network-status[i]: ..."), or more than
// one entry with "default": true (§5.3.6).
func Encode(list []NetworkStatus) (string, error) {
	if err := validateList(list); err != nil {
		return "", err
	}
	if len(list) == 0 {
		return "[]", nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(list); err != nil {
		return "", fmt.Errorf("encoding %s: %w", Annotation, err)
	}
	return string(bytes.TrimRight(buf.Bytes(), "\n")), nil
}

// Decode parses an annotation value (spec §5): a JSON list of status maps.
// Each map is read as NetworkStatus.UnmarshalJSON does (unknown keys kept in
// Extra, a missing "default" read as false). An empty list gives an empty,
// non-nil slice.
//
// Errors name the list index and key, e.g. `network-status[1]: "ips"[0]: ...`:
// the value is not a JSON list (null, a map, empty text), it is malformed, an
// entry is not a map or fails Validate, or more than one entry has
// "default": true (§5.3.6).
func Decode(value string) ([]NetworkStatus, error) {
	data := bytes.TrimSpace([]byte(value))
	if len(data) == 0 || data[0] != '[' {
		return nil, fmt.Errorf("%s: want a JSON list of maps, got %s", Annotation, describe(data))
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		return nil, fmt.Errorf("%s: malformed JSON: %w", Annotation, err)
	}
	list := make([]NetworkStatus, len(raws))
	for i, raw := range raws {
		if err := list[i].UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("network-status[%d]: %w", i, err)
		}
	}
	if err := checkDefaults(list); err != nil {
		return nil, err
	}
	return list, nil
}

func validateList(list []NetworkStatus) error {
	for i := range list {
		if err := list[i].Validate(); err != nil {
			return fmt.Errorf("network-status[%d]: %w", i, err)
		}
	}
	return checkDefaults(list)
}

// checkDefaults enforces §5.3.6: at most one entry has "default": true.
func checkDefaults(list []NetworkStatus) error {
	first := -1
	for i := range list {
		if !list[i].Default {
			continue
		}
		if first >= 0 {
			return fmt.Errorf("network-status[%d]: \"default\" is true for both %q (index %d) and %q; only one entry may be the default network (spec §5.3.6)",
				i, list[first].Name, first, list[i].Name)
		}
		first = i
	}
	return nil
}
