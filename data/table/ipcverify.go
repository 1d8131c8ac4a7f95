package table

import (
	"encoding/base64"
	"fmt"
)

// arrow-go reads IPC flatbuffers without verifying them: a vector length is trusted and sized
// into a slice (a schema claiming 2^31 fields allocates that many), and nested fields are
// followed recursively (a cycle never ends). So every message and footer is verified here
// before arrow-go sees it: each vector and string lies within the buffer, nesting is at most
// maxFieldDepth deep, and the fields of a schema number at most one per 4 bytes of it (so no
// table shared by many parents can multiply them).

// maxFieldDepth bounds the nesting of a schema (list<list<...>>, structs).
const maxFieldDepth = 64

// The flatbuffers layout of Arrow's Message.fbs, Schema.fbs and File.fbs, as far as it matters
// here: field slots of each table.
const (
	msgHeaderType     = 1 // Message
	msgHeader         = 2
	msgBodyLength     = 3
	msgCustomMetadata = 4

	headerSchema          = 1 // MessageHeader union
	headerDictionaryBatch = 2
	headerRecordBatch     = 3

	schemaFields         = 1 // Schema
	schemaCustomMetadata = 2
	schemaFeatures       = 3

	fieldName           = 0 // Field
	fieldTypeType       = 2
	fieldType           = 3
	fieldDictionary     = 4
	fieldChildren       = 5
	fieldCustomMetadata = 6

	typeUnion      = 14 // Type union
	unionTypeIDs   = 1
	dictIndexType  = 1 // DictionaryEncoding
	dictBatchData  = 1 // DictionaryBatch
	rbLength       = 0 // RecordBatch
	rbNodes        = 1
	rbBuffers      = 2
	rbCompression  = 3
	rbVariadic     = 4
	footerSchema   = 1 // Footer
	footerDicts    = 2
	footerBatches  = 3
	footerMetadata = 4
	blockBytes     = 24 // Block struct: offset, metaDataLength (+pad), bodyLength
)

func corruptMeta(what string) error {
	return fmt.Errorf("malformed IPC metadata (%s): %w", what, ErrCorrupt)
}

// verifyMessage checks an IPC message's metadata and returns its rows (record batches; 0 for
// other messages) and its body length.
func verifyMessage(b []byte) (rows, body int64, err error) {
	root, ok := fbUOffset(b, 0)
	if !ok {
		return 0, 0, corruptMeta("root")
	}
	msg := fbTable{b: b, pos: root}
	typ, ok1 := msg.u8(msgHeaderType)
	body, ok2 := msg.i64(msgBodyLength)
	if !ok1 || !ok2 {
		return 0, 0, corruptMeta("message")
	}
	if err := verifyKeyValues(msg, msgCustomMetadata); err != nil {
		return 0, 0, err
	}
	hdr, ok := msg.table(msgHeader)
	if !ok {
		return 0, 0, corruptMeta("message without a header")
	}
	switch typ {
	case headerSchema:
		return 0, body, verifySchema(hdr)
	case headerDictionaryBatch:
		data, ok := hdr.table(dictBatchData)
		if !ok {
			return 0, 0, corruptMeta("dictionary batch without data")
		}
		_, err := verifyRecordBatch(data)
		return 0, body, err
	case headerRecordBatch:
		rows, err := verifyRecordBatch(hdr)
		return rows, body, err
	}
	return 0, 0, corruptMeta(fmt.Sprintf("message type %d", typ))
}

func verifyRecordBatch(rb fbTable) (int64, error) {
	rows, ok := rb.i64(rbLength)
	if !ok || rows < 0 {
		return 0, corruptMeta("record batch length")
	}
	for _, v := range []struct{ slot, elem int }{{rbNodes, 16}, {rbBuffers, 16}, {rbVariadic, 8}} {
		if _, _, ok := rb.vector(v.slot, v.elem); !ok {
			return 0, corruptMeta("record batch vectors")
		}
	}
	if p, ok := rb.field(rbCompression); !ok || (p != 0 && !validTable(rb, rbCompression)) {
		return 0, corruptMeta("record batch compression")
	}
	return rows, nil
}

// verifySchema checks a Schema table: its fields (recursively), metadata and features.
func verifySchema(s fbTable) error {
	budget := len(s.b)/4 + 1
	if err := s.eachTable(schemaFields, "schema fields", "schema field", func(f fbTable) error { return verifyField(f, 1, &budget) }); err != nil {
		return err
	}
	if _, _, ok := s.vector(schemaFeatures, 8); !ok {
		return corruptMeta("schema features")
	}
	return verifyKeyValues(s, schemaCustomMetadata)
}

func verifyField(f fbTable, depth int, budget *int) error {
	*budget--
	if depth > maxFieldDepth || *budget < 0 {
		return corruptMeta("fields nested too deep or too many")
	}
	if _, _, ok := f.vector(fieldName, 1); !ok {
		return corruptMeta("field name")
	}
	typ, ok := f.u8(fieldTypeType)
	if !ok {
		return corruptMeta("field type")
	}
	if p, ok := f.field(fieldType); !ok || (p != 0 && !validTable(f, fieldType)) {
		return corruptMeta("field type")
	}
	if typ == typeUnion {
		if u, ok := f.table(fieldType); ok {
			if _, _, ok := u.vector(unionTypeIDs, 4); !ok {
				return corruptMeta("union type ids")
			}
		}
	}
	if p, ok := f.field(fieldDictionary); !ok || p != 0 {
		d, ok := f.table(fieldDictionary)
		if !ok {
			return corruptMeta("field dictionary")
		}
		if p, ok := d.field(dictIndexType); !ok || (p != 0 && !validTable(d, dictIndexType)) {
			return corruptMeta("dictionary index type")
		}
	}
	if err := f.eachTable(fieldChildren, "field children", "field child", func(c fbTable) error { return verifyField(c, depth+1, budget) }); err != nil {
		return err
	}
	return verifyKeyValues(f, fieldCustomMetadata)
}

func verifyKeyValues(t fbTable, slot int) error {
	return t.eachTable(slot, "custom metadata", "custom metadata entry", func(kv fbTable) error {
		_, _, ok1 := kv.vector(0, 1)
		_, _, ok2 := kv.vector(1, 1)
		if !ok1 || !ok2 {
			return corruptMeta("custom metadata strings")
		}
		return nil
	})
}

// eachTable runs check on every table of t's vector of tables in slot; a vector or element that
// is out of bounds is corrupt metadata named vectorWhat or elemWhat.
func (t fbTable) eachTable(slot int, vectorWhat, elemWhat string, check func(fbTable) error) error {
	start, n, ok := t.vector(slot, 4)
	if !ok {
		return corruptMeta(vectorWhat)
	}
	for j := range n {
		e, ok := t.elem(start, j)
		if !ok {
			return corruptMeta(elemWhat)
		}
		if err := check(e); err != nil {
			return err
		}
	}
	return nil
}

// validTable reports whether table field slot of t points at a table whose vtable lies in b.
func validTable(t fbTable, slot int) bool {
	c, ok := t.table(slot)
	if !ok {
		return false
	}
	_, ok = c.field(0)
	return ok
}

// ipcBlock is a Block of an IPC file footer: where a message is and how long.
type ipcBlock struct {
	offset, body int64
	meta         int32
}

// verifyFooter checks an IPC file footer and returns its dictionary and record batch blocks.
func verifyFooter(b []byte) (dicts, batches []ipcBlock, err error) {
	root, ok := fbUOffset(b, 0)
	if !ok {
		return nil, nil, corruptMeta("footer root")
	}
	ft := fbTable{b: b, pos: root}
	sc, ok := ft.table(footerSchema)
	if !ok {
		return nil, nil, corruptMeta("footer schema")
	}
	if err := verifySchema(sc); err != nil {
		return nil, nil, err
	}
	if err := verifyKeyValues(ft, footerMetadata); err != nil {
		return nil, nil, err
	}
	blocks := func(slot int) ([]ipcBlock, error) {
		start, n, ok := ft.vector(slot, blockBytes)
		if !ok {
			return nil, corruptMeta("footer blocks")
		}
		out := make([]ipcBlock, n)
		for j := range out {
			p := start + j*blockBytes
			out[j] = ipcBlock{
				offset: int64(le64(b[p:])),
				meta:   int32(le32(b[p+8:])),
				body:   int64(le64(b[p+16:])),
			}
		}
		return out, nil
	}
	if dicts, err = blocks(footerDicts); err != nil {
		return nil, nil, err
	}
	batches, err = blocks(footerBatches)
	return dicts, batches, err
}

// verifyFirstMessage verifies the first IPC message of b (a serialized schema).
func verifyFirstMessage(b []byte) error {
	if len(b) < 8 {
		return corruptMeta("too short")
	}
	n, fb := int64(le32(b)), b[4:]
	if n == 0xFFFFFFFF {
		n, fb = int64(le32(b[4:])), b[8:]
	}
	if n < 8 || n > int64(len(fb)) {
		return corruptMeta("message length")
	}
	_, _, err := verifyMessage(fb[:n])
	return err
}

// verifyParquetArrowSchema verifies the Arrow schema that Arrow-based Parquet writers store
// base64-encoded under "ARROW:schema": pqarrow hands it to arrow-go's IPC reader as it is.
// The decoding follows pqarrow's (padded base64, else unpadded).
func verifyParquetArrowSchema(serialized *string) error {
	if serialized == nil {
		return nil
	}
	var decoded []byte
	var err error
	if len(*serialized)%4 == 0 {
		decoded, err = base64.StdEncoding.DecodeString(*serialized)
	}
	if len(decoded) == 0 || err != nil {
		if decoded, err = base64.RawStdEncoding.DecodeString(*serialized); err != nil {
			return nil // pqarrow fails on it too, with its own error
		}
	}
	return verifyFirstMessage(decoded)
}
