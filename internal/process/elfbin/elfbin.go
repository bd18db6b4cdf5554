// Package elfbin tells statically linked executables from dynamically linked
// ones. multinet's images are built from scratch, with no C library and no
// dynamic loader, so every binary they hold, and every CNI plugin multinetd
// runs from inside its container, must be static.
package elfbin

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
)

// ErrNotELF is returned (wrapped) for content that is not an ELF file.
var ErrNotELF = errors.New("not an ELF file")

// Interpreter returns the dynamic loader an ELF executable asks for (its
// PT_INTERP program header, e.g. /lib64/ld-linux-x86-64.so.2), or "" for a
// statically linked one. Errors: ErrNotELF for other content; a malformed
// program header.
func Interpreter(r io.ReaderAt) (string, error) {
	f, err := elf.NewFile(r)
	if err != nil {
		var fe *elf.FormatError
		if errors.As(err, &fe) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return "", fmt.Errorf("%w: %v", ErrNotELF, err)
		}
		return "", err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_INTERP {
			continue
		}
		b, err := io.ReadAll(p.Open())
		if err != nil {
			return "", fmt.Errorf("reading PT_INTERP: %w", err)
		}
		for len(b) > 0 && b[len(b)-1] == 0 {
			b = b[:len(b)-1]
		}
		return string(b), nil
	}
	return "", nil
}

// FileInterpreter is Interpreter for the file at path.
func FileInterpreter(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	interp, err := Interpreter(f)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return interp, nil
}
