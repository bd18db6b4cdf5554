package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// ReadRaw returns the bytes of containerID's record file as they are (for a
// record Load reports as ErrCorrupt). Errors: ErrNotFound, I/O errors, a
// file above the size limit.
func (s *Store) ReadRaw(containerID string) ([]byte, error) {
	p, err := s.path(containerID)
	if err != nil {
		return nil, fmt.Errorf("read record: %w", err)
	}
	st, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("container %s: %w", containerID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read record %s: %w", containerID, err)
	}
	if st.Size() > maxRecordBytes {
		return nil, fmt.Errorf("record %s is %d bytes, above the %d byte limit", p, st.Size(), maxRecordBytes)
	}
	return os.ReadFile(p)
}

// CorruptSuffix starts the suffix of a corrupt record kept aside:
// <id>.json.corrupt-<UTC time>. List does not return such files.
const CorruptSuffix = ".corrupt-"

// SetAside renames containerID's record file to
// <id>.json.corrupt-<UTC time> so that its bytes are kept (for the
// operator) while a new record may be written, and returns the new path.
// Errors: ErrNotFound when there is no record, rename errors.
func (s *Store) SetAside(containerID string) (string, error) {
	p, err := s.path(containerID)
	if err != nil {
		return "", fmt.Errorf("set record aside: %w", err)
	}
	aside := p + CorruptSuffix + time.Now().UTC().Format("20060102T150405.000000000Z")
	if err := os.Rename(p, aside); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("container %s: %w", containerID, ErrNotFound)
		}
		return "", fmt.Errorf("set record %s aside: %w", containerID, err)
	}
	return aside, nil
}

// Salvage decodes what it can of a corrupt record of containerID: the
// top-level fields and the attachments that decode before the first error
// (a record cut short, or garbage after a valid prefix). whole is true when
// the attachment list was read to its end. A record naming another
// container yields no attachments (they are not this container's). It never
// fails: with nothing readable it returns an empty record.
func Salvage(data []byte, containerID string) (r *Record, whole bool) {
	r = &Record{ContainerID: containerID}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return r, false
	}
	var atts []Attachment
	other := false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		key, _ := t.(string)
		var dst any
		switch key {
		case "containerID":
			var id string
			if dec.Decode(&id) != nil {
				return salvaged(r, atts, whole, other)
			}
			other = id != containerID
			continue
		case "netns":
			dst = &r.Netns
		case "podNamespace":
			dst = &r.PodNamespace
		case "podName":
			dst = &r.PodName
		case "podUID":
			dst = &r.PodUID
		case "cniArgs":
			dst = &r.CNIArgs
		case "attachments":
			if t, err := dec.Token(); err != nil || t != json.Delim('[') {
				return salvaged(r, atts, false, other)
			}
			for dec.More() {
				var a Attachment
				if err := dec.Decode(&a); err != nil {
					return salvaged(r, atts, false, other)
				}
				atts = append(atts, a)
			}
			if _, err := dec.Token(); err != nil { // ']'
				return salvaged(r, atts, false, other)
			}
			whole = true
			continue
		default:
			dst = new(json.RawMessage)
		}
		if dec.Decode(dst) != nil {
			break
		}
	}
	return salvaged(r, atts, whole, other)
}

func salvaged(r *Record, atts []Attachment, whole, other bool) (*Record, bool) {
	if other {
		return r, false
	}
	r.Attachments = atts
	return r, whole
}
