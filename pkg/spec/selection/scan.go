package selection

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// This file walks JSON text that json.Valid has accepted, without
// allocating: Parse runs on every pod ADD and admission, and decoding into
// map[string]json.RawMessage cost three times the allocations. The helpers
// never index out of range, even on invalid input; on invalid input they
// return partial results.

// member is one key of a JSON object.
type member struct {
	key []byte // unescaped
	val []byte // the raw value, without surrounding white space
}

// object is the members of a JSON object, in the order written.
type object []member

// get returns the value of key; keys are case-sensitive.
func (o object) get(key string) ([]byte, bool) {
	for i := range o {
		if string(o[i].key) == key {
			return o[i].val, true
		}
	}
	return nil, false
}

// duplicateKey returns a key that occurs more than once, if any.
func (o object) duplicateKey() (string, bool) {
	if len(o) > 32 { // avoid quadratic time on hostile input
		seen := make(map[string]struct{}, len(o))
		for i := range o {
			if _, ok := seen[string(o[i].key)]; ok {
				return string(o[i].key), true
			}
			seen[string(o[i].key)] = struct{}{}
		}
		return "", false
	}
	for i := 1; i < len(o); i++ {
		for j := 0; j < i; j++ {
			if bytes.Equal(o[i].key, o[j].key) {
				return string(o[i].key), true
			}
		}
	}
	return "", false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index just after the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index just after the value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	default: // number, true, false, null
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return len(b)
	}
}

// members appends the members of the object b to buf.
func members(b []byte, buf object) object {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return buf
	}
	i++
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] == '}' {
			return buf
		}
		if b[i] == ',' {
			i++
			continue
		}
		if b[i] != '"' {
			return buf
		}
		end := skipString(b, i)
		if end-1 <= i {
			return buf
		}
		key := b[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 || !utf8.Valid(key) {
			// As encoding/json: unescape, and replace invalid UTF-8 by U+FFFD.
			var s string
			_ = json.Unmarshal(b[i:end], &s)
			key = []byte(s)
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return buf
		}
		i = skipSpace(b, i+1)
		vend := skipValue(b, i)
		buf = append(buf, member{key: key, val: b[i:vend]})
		i = vend
	}
}

// items appends the elements of the array b to buf.
func items(b []byte, buf [][]byte) [][]byte {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return buf
	}
	i++
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] == ']' {
			return buf
		}
		if b[i] == ',' {
			i++
			continue
		}
		end := skipValue(b, i)
		if end <= i {
			return buf
		}
		buf = append(buf, b[i:end])
		i = end
	}
}
