package elfbin

import (
	"bytes"
	"encoding/binary"
)

// Synthetic returns a minimal x86-64 ELF executable header, with one
// PT_INTERP program header naming interp when interp is not empty (a
// "dynamically linked" file) and no program headers otherwise (a "static"
// one). It does not run; tests use it to exercise Interpreter's callers
// without real binaries.
func Synthetic(interp string) []byte {
	const ehsize, phentsize = 64, 56
	var phnum uint16
	var phoff uint64
	if interp != "" {
		phnum, phoff = 1, ehsize
	}
	var b bytes.Buffer
	b.Write([]byte{0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* little endian */, 1 /* version */, 0 /* SysV */})
	b.Write(make([]byte, 8))
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	le(uint16(2))  // e_type ET_EXEC
	le(uint16(62)) // e_machine EM_X86_64
	le(uint32(1))  // e_version
	le(uint64(0))  // e_entry
	le(phoff)      // e_phoff
	le(uint64(0))  // e_shoff
	le(uint32(0))  // e_flags
	le(uint16(ehsize))
	le(uint16(phentsize))
	le(phnum)
	le(uint16(64)) // e_shentsize
	le(uint16(0))  // e_shnum
	le(uint16(0))  // e_shstrndx
	if interp != "" {
		data := append([]byte(interp), 0)
		off := uint64(ehsize + phentsize)
		le(uint32(3)) // p_type PT_INTERP
		le(uint32(4)) // p_flags PF_R
		le(off)       // p_offset
		le(off)       // p_vaddr
		le(off)       // p_paddr
		le(uint64(len(data)))
		le(uint64(len(data)))
		le(uint64(1)) // p_align
		b.Write(data)
	}
	return b.Bytes()
}
