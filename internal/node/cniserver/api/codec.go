package api

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// EncodeRequest returns the frame (length prefix + JSON body) of r.
// It fails if r is invalid (see Request.Validate) or the body exceeds
// MaxRequestSize.
func EncodeRequest(r *Request) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("encoding request: %w", err)
	}
	return encodeFrame(r, MaxRequestSize)
}

// DecodeRequest parses and validates one request body (JSON, without the
// length prefix). Unknown fields are ignored so that a newer client can add
// optional fields without bumping Version.
func DecodeRequest(body []byte) (*Request, error) {
	var r Request
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decoding request: %w", err)
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("decoding request: %w", err)
	}
	return &r, nil
}

// WriteRequest writes r as one frame to w.
func WriteRequest(w io.Writer, r *Request) error {
	frame, err := EncodeRequest(r)
	if err != nil {
		return err
	}
	if _, err := w.Write(frame); err != nil {
		return fmt.Errorf("writing request: %w", err)
	}
	return nil
}

// ReadRequest reads one request frame from rd and decodes it. A length prefix
// over MaxRequestSize yields an error wrapping ErrFrameTooLarge before any of
// the body is read.
func ReadRequest(rd io.Reader) (*Request, error) {
	body, err := readFrame(rd, MaxRequestSize)
	if err != nil {
		return nil, fmt.Errorf("reading request: %w", err)
	}
	return DecodeRequest(body)
}

// EncodeResponse returns the frame (length prefix + JSON body) of r. It fails
// if r is invalid or the body exceeds MaxResponseSize.
func EncodeResponse(r *Response) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("encoding response: %w", err)
	}
	return encodeFrame(r, MaxResponseSize)
}

// DecodeResponse parses and validates one response body (JSON, without the
// length prefix).
func DecodeResponse(body []byte) (*Response, error) {
	var r Response
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("decoding response: %w", err)
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("decoding response: %w", err)
	}
	return &r, nil
}

// WriteResponse writes r as one frame to w.
func WriteResponse(w io.Writer, r *Response) error {
	frame, err := EncodeResponse(r)
	if err != nil {
		return err
	}
	if _, err := w.Write(frame); err != nil {
		return fmt.Errorf("writing response: %w", err)
	}
	return nil
}

// ReadResponse reads one response frame from rd and decodes it.
func ReadResponse(rd io.Reader) (*Response, error) {
	body, err := readFrame(rd, MaxResponseSize)
	if err != nil {
		return nil, fmt.Errorf("reading response: %w", err)
	}
	return DecodeResponse(body)
}

// encodeFrame marshals v behind a 4-byte big-endian length prefix.
func encodeFrame(v any, limit int) ([]byte, error) {
	var buf bytes.Buffer
	buf.Write(make([]byte, headerSize))
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encoding frame: %w", err)
	}
	frame := buf.Bytes()
	frame = frame[:len(frame)-1] // Encoder appends '\n'
	n := len(frame) - headerSize
	if n > limit {
		return nil, fmt.Errorf("encoding frame: body of %d bytes: %w (%d bytes)", n, ErrFrameTooLarge, limit)
	}
	binary.BigEndian.PutUint32(frame, uint32(n))
	return frame, nil
}

// smallFrame is the largest body readFrame reads into a buffer of the
// announced size at once; a CNI request or result is a few KiB.
const smallFrame = 64 << 10

// readFrame reads one frame whose body must be 1..limit bytes. A body of up
// to smallFrame bytes is read into one buffer of its size; a larger one into
// a buffer that grows with the bytes actually received, so a peer that
// announces a large frame and stalls does not pin limit bytes of memory.
func readFrame(rd io.Reader, limit int) ([]byte, error) {
	var hdr [headerSize]byte
	if _, err := io.ReadFull(rd, hdr[:]); err != nil {
		return nil, fmt.Errorf("length prefix: %w", err)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 {
		return nil, errors.New("length prefix: empty frame")
	}
	if uint64(n) > uint64(limit) {
		return nil, fmt.Errorf("length prefix %d: %w (%d bytes)", n, ErrFrameTooLarge, limit)
	}
	if n <= smallFrame {
		// io.ReadFull, not bytes.Buffer.ReadFrom: the latter grows a full
		// buffer once more (by bytes.MinRead) before it sees the end.
		body := make([]byte, n)
		got, err := io.ReadFull(rd, body)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("body (%d of %d bytes): %w", got, n, err)
		}
		return body, nil
	}
	var body bytes.Buffer
	got, err := io.CopyN(&body, rd, int64(n))
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("body (%d of %d bytes): %w", got, n, err)
	}
	return body.Bytes(), nil
}
