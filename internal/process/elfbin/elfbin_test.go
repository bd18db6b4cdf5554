package elfbin

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestInterpreter(t *testing.T) {
	for _, tc := range []struct {
		name    string
		data    []byte
		want    string
		wantErr error
	}{
		{"static", Synthetic(""), "", nil},
		{"dynamic", Synthetic("/lib64/ld-linux-x86-64.so.2"), "/lib64/ld-linux-x86-64.so.2", nil},
		{"script", []byte("#!/bin/sh\necho hi\n"), "", ErrNotELF},
		{"empty", nil, "", ErrNotELF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Interpreter(bytes.NewReader(tc.data))
			if (tc.wantErr == nil) != (err == nil) || !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("interpreter = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFileInterpreter(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "bridge")
	if err := os.WriteFile(p, Synthetic("/lib/ld-musl-x86_64.so.1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := FileInterpreter(p); err != nil || got != "/lib/ld-musl-x86_64.so.1" {
		t.Errorf("FileInterpreter = %q, %v", got, err)
	}
	if _, err := FileInterpreter(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v, want ErrNotExist", err)
	}
	// The host's own binaries, when present, are real ELF files either way.
	if _, err := os.Stat("/bin/sh"); err == nil {
		if _, err := FileInterpreter("/bin/sh"); err != nil && !errors.Is(err, ErrNotELF) {
			t.Errorf("/bin/sh: %v", err)
		}
	}
}
