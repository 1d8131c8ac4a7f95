package tensorboard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

var (
	// ErrCorrupt is wrapped by errors about a record whose CRC does not match or whose Event
	// cannot be decoded.
	ErrCorrupt = errors.New("corrupt event record")
	// ErrTruncated is wrapped by errors about a file that ends inside a record.
	ErrTruncated = errors.New("event file truncated")
)

// castagnoli is the CRC-32C table TFRecord checksums use. It is never modified.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcMaskDelta is TFRecord's (and LevelDB's) mask constant.
const crcMaskDelta = 0xa282ead8

// MaskedCRC returns TFRecord's masked CRC-32C of data. The mask exists because computing the
// CRC of a string that itself contains CRCs is problematic (LevelDB's rationale).
func MaskedCRC(data []byte) uint32 {
	return maskCRC(crc32.Checksum(data, castagnoli))
}

func maskCRC(crc uint32) uint32 {
	return ((crc >> 15) | (crc << 17)) + crcMaskDelta
}

// recordOverhead is the framing around each record's data: length, its CRC, the data's CRC.
const recordOverhead = 8 + 4 + 4

// appendRecord appends data framed as one TFRecord.
func appendRecord(dst, data []byte) []byte {
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], uint64(len(data)))
	dst = append(dst, hdr[:]...)
	dst = binary.LittleEndian.AppendUint32(dst, MaskedCRC(hdr[:]))
	dst = append(dst, data...)
	return binary.LittleEndian.AppendUint32(dst, MaskedCRC(data))
}

// splitRecords returns the data of each record in buf, checking both CRCs. On error it returns
// the records before the bad one.
func splitRecords(buf []byte) ([][]byte, error) {
	var out [][]byte
	for off := 0; off < len(buf); {
		rest := buf[off:]
		if len(rest) < 12 {
			return out, fmt.Errorf("record at offset %d: %d bytes left, want a 12-byte header: %w", off, len(rest), ErrTruncated)
		}
		if got, want := binary.LittleEndian.Uint32(rest[8:12]), MaskedCRC(rest[:8]); got != want {
			return out, fmt.Errorf("record at offset %d: length CRC %#08x, want %#08x: %w", off, got, want, ErrCorrupt)
		}
		n := binary.LittleEndian.Uint64(rest[:8])
		if len(rest) < recordOverhead || n > uint64(len(rest)-recordOverhead) {
			return out, fmt.Errorf("record at offset %d: length %d, but %d bytes left after the header: %w", off, n, len(rest)-12, ErrTruncated)
		}
		data := rest[12 : 12+n]
		if got, want := binary.LittleEndian.Uint32(rest[12+n:]), MaskedCRC(data); got != want {
			return out, fmt.Errorf("record at offset %d: data CRC %#08x, want %#08x: %w", off, got, want, ErrCorrupt)
		}
		out = append(out, data)
		off += recordOverhead + int(n)
	}
	return out, nil
}
