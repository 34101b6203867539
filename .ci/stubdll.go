//go:build ignore

// Command stubdll writes bcryptprimitives.dll for Wine 8: a 64-bit DLL
// without code whose one export, ProcessPrng, forwards to
// ADVAPI32.SystemFunction036 (RtlGenRandom). Go 1.22 and later load
// ProcessPrng from bcryptprimitives.dll at start-up, and Wine 8 has no such
// DLL. The two functions take the same arguments in the same registers (a
// buffer and its length) and return non-zero on success.
//
// Usage: go run .ci/stubdll.go PATH
//
// The file is a PE32+ image with one section that holds only the export
// directory; the export's address points inside the directory, which makes
// it a forwarder string for the loader. It is built by hand here so that
// CI needs no C cross-compiler. Layout (PE/COFF specification):
//
//	0x000  MS-DOS header, e_lfanew = 0x40
//	0x040  "PE\0\0", COFF file header, PE32+ optional header
//	0x148  section table (one section, .edata)
//	0x200  .edata, loaded at RVA 0x1000
package main

import (
	"bytes"
	"debug/pe"
	"encoding/binary"
	"fmt"
	"os"
)

const (
	fileAlign    = 0x200
	sectionAlign = 0x1000
	sectionRVA   = 0x1000
	imageBase    = 0x180000000

	dllName     = "bcryptprimitives.dll"
	exportName  = "ProcessPrng"
	forwardedTo = "ADVAPI32.SystemFunction036"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run stubdll.go PATH")
		os.Exit(2)
	}
	image := build()
	if err := check(image); err != nil {
		fmt.Fprintln(os.Stderr, "stubdll: the image does not read back:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(os.Args[1], image, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "stubdll:", err)
		os.Exit(1)
	}
}

// edata lays out the export directory at RVA base and returns its bytes.
func edata(base uint32) []byte {
	// Offsets inside the section, in the order they are written.
	const dirSize = 40
	eat := uint32(dirSize) // export address table: 1 entry
	ent := eat + 4         // export name pointer table: 1 entry
	ords := ent + 4        // ordinal table: 1 entry (2 bytes)
	strs := ords + 2       // the strings
	nameOff := strs        // the DLL's own name
	exportOff := nameOff + uint32(len(dllName)) + 1
	forwardOff := exportOff + uint32(len(exportName)) + 1

	var b bytes.Buffer
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	// IMAGE_EXPORT_DIRECTORY
	le(uint32(0))         // Characteristics
	le(uint32(0))         // TimeDateStamp
	le(uint16(0))         // MajorVersion
	le(uint16(0))         // MinorVersion
	le(base + nameOff)    // Name
	le(uint32(1))         // Base (first ordinal)
	le(uint32(1))         // NumberOfFunctions
	le(uint32(1))         // NumberOfNames
	le(base + eat)        // AddressOfFunctions
	le(base + ent)        // AddressOfNames
	le(base + ords)       // AddressOfNameOrdinals
	le(base + forwardOff) // the one function: a forwarder string
	le(base + exportOff)  // the one name
	le(uint16(0))         // its index into the address table
	b.WriteString(dllName + "\x00")
	b.WriteString(exportName + "\x00")
	b.WriteString(forwardedTo + "\x00")
	return b.Bytes()
}

func build() []byte {
	exports := edata(sectionRVA)
	rawSize := alignUp(uint32(len(exports)), fileAlign)

	var b bytes.Buffer
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }

	// MS-DOS header: only the magic and the offset of the PE header count.
	dos := make([]byte, 0x40)
	copy(dos, "MZ")
	binary.LittleEndian.PutUint32(dos[0x3c:], 0x40)
	b.Write(dos)

	b.WriteString("PE\x00\x00")
	le(pe.FileHeader{
		Machine:              pe.IMAGE_FILE_MACHINE_AMD64,
		NumberOfSections:     1,
		SizeOfOptionalHeader: uint16(binary.Size(pe.OptionalHeader64{})),
		Characteristics: pe.IMAGE_FILE_EXECUTABLE_IMAGE |
			pe.IMAGE_FILE_LARGE_ADDRESS_AWARE | pe.IMAGE_FILE_DLL,
	})
	opt := pe.OptionalHeader64{
		Magic:                       0x20b, // PE32+
		SizeOfInitializedData:       rawSize,
		BaseOfCode:                  sectionRVA,
		ImageBase:                   imageBase,
		SectionAlignment:            sectionAlign,
		FileAlignment:               fileAlign,
		MajorOperatingSystemVersion: 6,
		MajorSubsystemVersion:       6,
		SizeOfImage:                 sectionRVA + alignUp(uint32(len(exports)), sectionAlign),
		SizeOfHeaders:               fileAlign,
		Subsystem:                   pe.IMAGE_SUBSYSTEM_WINDOWS_CUI,
		DllCharacteristics:          pe.IMAGE_DLLCHARACTERISTICS_NX_COMPAT,
		SizeOfStackReserve:          0x100000,
		SizeOfStackCommit:           0x1000,
		SizeOfHeapReserve:           0x100000,
		SizeOfHeapCommit:            0x1000,
		NumberOfRvaAndSizes:         16,
	}
	// The forwarder string lies inside [VirtualAddress, +Size): that is
	// what tells the loader the address is a forwarder.
	opt.DataDirectory[pe.IMAGE_DIRECTORY_ENTRY_EXPORT] = pe.DataDirectory{
		VirtualAddress: sectionRVA,
		Size:           uint32(len(exports)),
	}
	le(opt)
	var name [8]uint8
	copy(name[:], ".edata")
	le(pe.SectionHeader32{
		Name:             name,
		VirtualSize:      uint32(len(exports)),
		VirtualAddress:   sectionRVA,
		SizeOfRawData:    rawSize,
		PointerToRawData: fileAlign,
		Characteristics:  pe.IMAGE_SCN_CNT_INITIALIZED_DATA | pe.IMAGE_SCN_MEM_READ,
	})
	pad(&b, fileAlign)
	b.Write(exports)
	pad(&b, fileAlign)
	return b.Bytes()
}

// check reads the image back and finds the forwarder where the loader will
// look for it.
func check(image []byte) error {
	f, err := pe.NewFile(bytes.NewReader(image))
	if err != nil {
		return err
	}
	defer f.Close()
	opt, ok := f.OptionalHeader.(*pe.OptionalHeader64)
	if !ok {
		return fmt.Errorf("not PE32+")
	}
	dir := opt.DataDirectory[pe.IMAGE_DIRECTORY_ENTRY_EXPORT]
	sec := f.Section(".edata")
	if sec == nil {
		return fmt.Errorf("no .edata section")
	}
	data, err := sec.Data()
	if err != nil {
		return err
	}
	at := func(rva uint32) []byte { return data[rva-sec.VirtualAddress:] }
	cstr := func(rva uint32) string {
		s := at(rva)
		return string(s[:bytes.IndexByte(s, 0)])
	}
	d := at(dir.VirtualAddress)
	names := binary.LittleEndian.Uint32(d[32:])
	funcs := binary.LittleEndian.Uint32(d[28:])
	ordinals := binary.LittleEndian.Uint32(d[36:])
	ord := binary.LittleEndian.Uint16(at(ordinals))
	fn := binary.LittleEndian.Uint32(at(funcs + 4*uint32(ord)))
	switch {
	case cstr(binary.LittleEndian.Uint32(d[12:])) != dllName:
		return fmt.Errorf("wrong DLL name")
	case cstr(binary.LittleEndian.Uint32(at(names))) != exportName:
		return fmt.Errorf("wrong export name")
	case fn < dir.VirtualAddress || fn >= dir.VirtualAddress+dir.Size:
		return fmt.Errorf("export is not a forwarder")
	case cstr(fn) != forwardedTo:
		return fmt.Errorf("wrong forwarder %q", cstr(fn))
	}
	return nil
}

func alignUp(n, a uint32) uint32 { return (n + a - 1) &^ (a - 1) }

// pad fills b with zeros up to a multiple of a.
func pad(b *bytes.Buffer, a int) {
	if r := b.Len() % a; r != 0 {
		b.Write(make([]byte, a-r))
	}
}
