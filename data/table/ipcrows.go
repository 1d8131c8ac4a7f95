package table

import (
	"encoding/binary"
	"fmt"
	"os"
)

// maxIPCMetadata bounds one IPC message's flatbuffer metadata (schemas of thousands of columns
// fit in a few MiB).
const maxIPCMetadata = 64 << 20

// ipcFileFooterStart returns where an IPC file's footer begins: the file ends with the footer,
// its int32 length and "ARROW1".
func ipcFileFooterStart(f *os.File, size int64) (int64, error) {
	if size < 8+10 {
		return 0, fmt.Errorf("%d bytes is too short for an IPC file: %w", size, ErrCorrupt)
	}
	var tail [10]byte
	if _, err := f.ReadAt(tail[:], size-10); err != nil {
		return 0, fmt.Errorf("reading the footer length: %w", err)
	}
	n := int64(int32(binary.LittleEndian.Uint32(tail[:4])))
	if string(tail[4:]) != string(ipcFileMagic) || n <= 0 || n > size-18 {
		return 0, fmt.Errorf("footer length %d in a %d-byte file: %w", n, size, ErrCorrupt)
	}
	return size - 10 - n, nil
}

// countStreamRows walks the IPC messages of a stream file, verifying each one's metadata and
// seeking past its body, and sums the lengths of the record batches: NumRows without reading the
// data, and no flatbuffer reaches arrow-go unverified.
func countStreamRows(f *os.File, size int64) (int64, error) {
	var pos, rows int64
	var hdr [8]byte
	var meta []byte
	for pos < size {
		if size-pos < 4 {
			return 0, fmt.Errorf("%d stray bytes at offset %d: %w", size-pos, pos, ErrCorrupt)
		}
		if _, err := f.ReadAt(hdr[:4], pos); err != nil {
			return 0, fmt.Errorf("message at offset %d: %w (%w)", pos, err, ErrCorrupt)
		}
		start := pos
		msgLen := int64(le32(hdr[:4]))
		pos += 4
		if msgLen == 0xFFFFFFFF { // continuation marker, then the length
			if size-pos < 4 {
				return 0, fmt.Errorf("message at offset %d: truncated length: %w", start, ErrCorrupt)
			}
			if _, err := f.ReadAt(hdr[:4], pos); err != nil {
				return 0, fmt.Errorf("message at offset %d: %w (%w)", start, err, ErrCorrupt)
			}
			msgLen = int64(le32(hdr[:4]))
			pos += 4
		}
		if msgLen == 0 { // end of stream
			return rows, nil
		}
		if msgLen > maxIPCMetadata || msgLen > size-pos || msgLen < 8 {
			return 0, fmt.Errorf("message at offset %d claims %d bytes of metadata, %d left: %w", start, msgLen, size-pos, ErrCorrupt)
		}
		if int64(cap(meta)) < msgLen {
			meta = make([]byte, msgLen)
		}
		meta = meta[:msgLen]
		if _, err := f.ReadAt(meta, pos); err != nil {
			return 0, fmt.Errorf("message at offset %d: %w (%w)", start, err, ErrCorrupt)
		}
		pos += msgLen
		n, body, err := verifyMessage(meta)
		if err != nil {
			return 0, fmt.Errorf("message at offset %d: %w", start, err)
		}
		if body < 0 || body > size-pos {
			return 0, fmt.Errorf("message at offset %d claims a %d-byte body, %d left: %w", start, body, size-pos, ErrCorrupt)
		}
		if err := addRows(&rows, n, body, start); err != nil {
			return 0, err
		}
		pos += body
	}
	return rows, nil
}

// addRows adds a record batch's rows to a count. A batch of n rows needs at least n bits of body
// for any column but the null type; more rows than that (and a margin for null columns) is a
// claim no data backs, refused so that a scan cannot loop over phantom rows.
func addRows(rows *int64, n, body, at int64) error {
	if n < 0 || n > 8*body+1<<16 || *rows+n < *rows {
		return fmt.Errorf("record batch at offset %d claims %d rows in a %d-byte body: %w", at, n, body, ErrCorrupt)
	}
	*rows += n
	return nil
}

// countFileRows verifies an IPC file's footer and the metadata of every message its blocks point
// at (what arrow-go's FileReader reads), and sums the record batches' rows.
func countFileRows(f *os.File, size int64) (int64, error) {
	footerStart, err := ipcFileFooterStart(f, size)
	if err != nil {
		return 0, err
	}
	footerLen := size - 10 - footerStart
	if footerLen > maxIPCMetadata {
		return 0, fmt.Errorf("a %d-byte footer: %w", footerLen, ErrTooLarge)
	}
	footer := make([]byte, footerLen)
	if _, err := f.ReadAt(footer, footerStart); err != nil {
		return 0, fmt.Errorf("footer: %w (%w)", err, ErrCorrupt)
	}
	dicts, batches, err := verifyFooter(footer)
	if err != nil {
		return 0, fmt.Errorf("footer: %w", err)
	}
	var rows int64
	for i, blk := range append(dicts, batches...) {
		isBatch := i >= len(dicts)
		if blk.offset < 8 || blk.meta < 8 || blk.body < 0 || blk.offset > footerStart ||
			int64(blk.meta) > footerStart-blk.offset || blk.body > footerStart-blk.offset-int64(blk.meta) {
			return 0, fmt.Errorf("block %d (offset %d, metadata %d, body %d) outside the file's %d data bytes: %w", i, blk.offset, blk.meta, blk.body, footerStart, ErrCorrupt)
		}
		if blk.meta > maxIPCMetadata {
			return 0, fmt.Errorf("block %d claims %d bytes of metadata: %w", i, blk.meta, ErrTooLarge)
		}
		meta := make([]byte, blk.meta)
		if _, err := f.ReadAt(meta, blk.offset); err != nil {
			return 0, fmt.Errorf("block %d: %w (%w)", i, err, ErrCorrupt)
		}
		fb := meta[4:]
		if le32(meta) == 0xFFFFFFFF {
			fb = meta[8:]
		}
		n, body, err := verifyMessage(fb)
		if err != nil {
			return 0, fmt.Errorf("block %d at offset %d: %w", i, blk.offset, err)
		}
		if body > blk.body {
			return 0, fmt.Errorf("block %d at offset %d: message body %d beyond the block's %d: %w", i, blk.offset, body, blk.body, ErrCorrupt)
		}
		if isBatch {
			if err := addRows(&rows, n, body, blk.offset); err != nil {
				return 0, err
			}
		}
	}
	return rows, nil
}

func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }
func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// fbTable is a flatbuffers table at pos in b; every access is bounds-checked (ok=false when out).
type fbTable struct {
	b   []byte
	pos int
}

func fbUOffset(b []byte, at int) (int, bool) {
	if at < 0 || at+4 > len(b) {
		return 0, false
	}
	p := at + int(binary.LittleEndian.Uint32(b[at:]))
	return p, p >= 0 && p < len(b)
}

// field returns the absolute position of field i (0 when absent).
func (t fbTable) field(i int) (int, bool) {
	if t.pos < 0 || t.pos+4 > len(t.b) {
		return 0, false
	}
	vt := t.pos - int(int32(binary.LittleEndian.Uint32(t.b[t.pos:])))
	if vt < 0 || vt+4 > len(t.b) {
		return 0, false
	}
	vtLen := int(binary.LittleEndian.Uint16(t.b[vt:]))
	slot := 4 + 2*i
	if slot+2 > vtLen {
		return 0, true
	}
	if vt+slot+2 > len(t.b) {
		return 0, false
	}
	off := int(binary.LittleEndian.Uint16(t.b[vt+slot:]))
	if off == 0 {
		return 0, true
	}
	return t.pos + off, true
}

func (t fbTable) u8(i int) (byte, bool) {
	p, ok := t.field(i)
	if !ok || p == 0 {
		return 0, ok
	}
	if p >= len(t.b) {
		return 0, false
	}
	return t.b[p], true
}

func (t fbTable) i64(i int) (int64, bool) {
	p, ok := t.field(i)
	if !ok || p == 0 {
		return 0, ok
	}
	if p+8 > len(t.b) {
		return 0, false
	}
	return int64(binary.LittleEndian.Uint64(t.b[p:])), true
}

func (t fbTable) table(i int) (fbTable, bool) {
	p, ok := t.field(i)
	if !ok || p == 0 {
		return fbTable{}, false
	}
	q, ok := fbUOffset(t.b, p)
	return fbTable{b: t.b, pos: q}, ok
}

// vector returns where the elements of vector field i start and how many there are, checking
// that they lie within b (elem bytes each); absent: n = 0.
func (t fbTable) vector(i, elem int) (start, n int, ok bool) {
	p, ok := t.field(i)
	if !ok || p == 0 {
		return 0, 0, ok
	}
	v, ok := fbUOffset(t.b, p)
	if !ok || v+4 > len(t.b) {
		return 0, 0, false
	}
	n = int(binary.LittleEndian.Uint32(t.b[v:]))
	start = v + 4
	if n > (len(t.b)-start)/elem {
		return 0, 0, false
	}
	return start, n, true
}

// elem returns the table the j-th offset of a vector of tables (from start) points to.
func (t fbTable) elem(start, j int) (fbTable, bool) {
	q, ok := fbUOffset(t.b, start+4*j)
	return fbTable{b: t.b, pos: q}, ok
}
