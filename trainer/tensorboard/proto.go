package tensorboard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// This file is the little of the protocol buffer wire format the event files need
// (https://protobuf.dev/programming-guides/encoding/), so the package needs no protobuf module.

// Wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

// Field numbers of the messages written (tensorflow/core/util/event.proto,
// tensorflow/core/framework/summary.proto, tensor.proto, tensor_shape.proto).
const (
	eventWallTime    = 1 // double
	eventStep        = 2 // int64
	eventFileVersion = 3 // string
	eventSummary     = 5 // Summary

	summaryValue = 1 // repeated Summary.Value

	valueTag         = 1 // string
	valueSimpleValue = 2 // float
	valueTensor      = 8 // TensorProto
	valueMetadata    = 9 // SummaryMetadata

	metadataPluginData = 1 // SummaryMetadata.PluginData
	pluginName         = 1 // string

	tensorDtype     = 1 // DataType enum
	tensorShape     = 2 // TensorShapeProto
	tensorStringVal = 8 // repeated bytes
	shapeDim        = 2 // repeated TensorShapeProto.Dim
	dimSize         = 1 // int64

	dtString = 7 // DataType.DT_STRING
)

func appendTag(b []byte, field, wire int) []byte {
	return binary.AppendUvarint(b, uint64(field)<<3|uint64(wire))
}

func appendVarintField(b []byte, field int, v uint64) []byte {
	return binary.AppendUvarint(appendTag(b, field, wireVarint), v)
}

func appendDoubleField(b []byte, field int, v float64) []byte {
	return binary.LittleEndian.AppendUint64(appendTag(b, field, wireFixed64), math.Float64bits(v))
}

func appendFloatField(b []byte, field int, v float32) []byte {
	return binary.LittleEndian.AppendUint32(appendTag(b, field, wireFixed32), math.Float32bits(v))
}

func appendBytesField(b []byte, field int, v []byte) []byte {
	b = binary.AppendUvarint(appendTag(b, field, wireBytes), uint64(len(v)))
	return append(b, v...)
}

// errProto is wrapped (with ErrCorrupt) by decoding errors.
var errProto = errors.New("malformed protocol buffer")

// protoField is one decoded field: num and wire, then val (varint, fixed32, fixed64) or data
// (length-delimited).
type protoField struct {
	num  int
	wire int
	val  uint64
	data []byte
}

// nextField decodes the field at the start of b and returns it and the rest of b.
func nextField(b []byte) (protoField, []byte, error) {
	key, n := binary.Uvarint(b)
	if n <= 0 {
		return protoField{}, nil, fmt.Errorf("%w: bad field key", errProto)
	}
	b = b[n:]
	f := protoField{num: int(key >> 3), wire: int(key & 7)}
	if key>>3 == 0 || key>>3 > math.MaxInt32 {
		return protoField{}, nil, fmt.Errorf("%w: field number %d", errProto, key>>3)
	}
	switch f.wire {
	case wireVarint:
		f.val, n = binary.Uvarint(b)
		if n <= 0 {
			return protoField{}, nil, fmt.Errorf("%w: bad varint in field %d", errProto, f.num)
		}
		b = b[n:]
	case wireFixed64:
		if len(b) < 8 {
			return protoField{}, nil, fmt.Errorf("%w: short fixed64 in field %d", errProto, f.num)
		}
		f.val, b = binary.LittleEndian.Uint64(b), b[8:]
	case wireFixed32:
		if len(b) < 4 {
			return protoField{}, nil, fmt.Errorf("%w: short fixed32 in field %d", errProto, f.num)
		}
		f.val, b = uint64(binary.LittleEndian.Uint32(b)), b[4:]
	case wireBytes:
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return protoField{}, nil, fmt.Errorf("%w: bad length in field %d", errProto, f.num)
		}
		f.data, b = b[n:n+int(l)], b[n+int(l):]
	default: // groups (3, 4) are not used by these messages; 6 and 7 do not exist
		return protoField{}, nil, fmt.Errorf("%w: wire type %d in field %d", errProto, f.wire, f.num)
	}
	return f, b, nil
}

// forEachField calls fn for every field of the message b.
func forEachField(b []byte, fn func(protoField) error) error {
	for len(b) > 0 {
		f, rest, err := nextField(b)
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			return err
		}
		b = rest
	}
	return nil
}

// want checks that a known field has the wire type its declaration implies.
func (f protoField) want(wire int) error {
	if f.wire != wire {
		return fmt.Errorf("%w: field %d has wire type %d, want %d", errProto, f.num, f.wire, wire)
	}
	return nil
}
