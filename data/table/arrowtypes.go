package table

import (
	"fmt"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// typeName spells an Arrow type as Column.Type: HF's view, where string and large_string are
// both "string" and every list kind is "list<elem>".
func typeName(dt arrow.DataType) string {
	switch t := dt.(type) {
	case *arrow.StringType, *arrow.LargeStringType, *arrow.StringViewType:
		return "string"
	case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.BinaryViewType:
		return "binary"
	case *arrow.DictionaryType:
		return typeName(t.ValueType)
	case arrow.ListLikeType:
		if _, isMap := dt.(*arrow.MapType); !isMap {
			return "list<" + typeName(t.Elem()) + ">"
		}
	case *arrow.StructType:
		parts := make([]string, len(t.Fields()))
		for i, f := range t.Fields() {
			parts[i] = f.Name + ": " + typeName(f.Type)
		}
		return "struct<" + strings.Join(parts, ", ") + ">"
	case *arrow.Float16Type:
		return "float16"
	case *arrow.Float32Type:
		return "float"
	case *arrow.Float64Type:
		return "double"
	case *arrow.BooleanType:
		return "bool"
	}
	return dt.Name()
}

func columnsOf(sc *arrow.Schema) []Column {
	cols := make([]Column, sc.NumFields())
	for i, f := range sc.Fields() {
		cols[i] = Column{Name: f.Name, Type: typeName(f.Type)}
	}
	return cols
}

// stringsOf returns a reader of the i-th string of arr (valid=false for null).
func stringsOf(arr arrow.Array) (func(i int) (string, bool), error) {
	switch a := arr.(type) {
	case *array.String:
		return func(i int) (string, bool) { return a.Value(i), a.IsValid(i) }, nil
	case *array.LargeString:
		return func(i int) (string, bool) { return a.Value(i), a.IsValid(i) }, nil
	case *array.StringView:
		return func(i int) (string, bool) { return a.Value(i), a.IsValid(i) }, nil
	case *array.Null:
		return func(int) (string, bool) { return "", false }, nil
	case *array.Dictionary:
		inner, err := stringsOf(a.Dictionary())
		if err != nil {
			return nil, err
		}
		return func(i int) (string, bool) {
			if a.IsNull(i) {
				return "", false
			}
			return inner(a.GetValueIndex(i))
		}, nil
	}
	return nil, fmt.Errorf("column is %s, not string: %w", typeName(arr.DataType()), ErrType)
}

// intListOf reads row i of a list-of-integers array into dst: nil for a null list.
type intListOf func(i int, dst []int32) ([]int32, error)

// intListsOf returns a reader of arr's lists, values converted to int32 with range checks; a
// list of more than maxLen values is refused before it is converted.
func intListsOf(arr arrow.Array, maxLen int) (intListOf, error) {
	if _, ok := arr.(*array.Null); ok {
		return func(int, []int32) ([]int32, error) { return nil, nil }, nil
	}
	ll, ok := arr.(array.ListLike)
	if !ok || arr.DataType().ID() == arrow.MAP {
		return nil, fmt.Errorf("column is %s, not a list of integers: %w", typeName(arr.DataType()), ErrType)
	}
	vals := ll.ListValues()
	at, err := intsOf(vals)
	if err != nil {
		return nil, fmt.Errorf("column is %s, not a list of integers: %w", typeName(arr.DataType()), ErrType)
	}
	n := int64(vals.Len())
	return func(i int, dst []int32) ([]int32, error) {
		if ll.IsNull(i) {
			return nil, nil
		}
		start, end := ll.ValueOffsets(i)
		if start < 0 || end < start || end > n {
			return nil, fmt.Errorf("list offsets [%d, %d) outside the %d values: %w", start, end, n, ErrCorrupt)
		}
		if end-start > int64(maxLen) {
			return nil, fmt.Errorf("a list of %d values, more than MaxCellBytes allows (%d): %w", end-start, maxLen, ErrTooLarge)
		}
		if dst == nil { // an empty list is not a null: never return nil for it
			dst = make([]int32, 0, max(end-start, 16))
		}
		dst = dst[:0]
		for j := start; j < end; j++ {
			if vals.IsNull(int(j)) {
				return nil, fmt.Errorf("element %d is null", j-start)
			}
			v, ok := at(int(j))
			if !ok || v < math.MinInt32 || v > math.MaxInt32 {
				return nil, fmt.Errorf("element %d is %s: %w", j-start, intString(vals, int(j)), ErrRange)
			}
			dst = append(dst, int32(v))
		}
		return dst, nil
	}, nil
}

// intsOf returns a reader of arr's integers as int64; ok=false for a uint64 beyond int64.
func intsOf(arr arrow.Array) (func(i int) (int64, bool), error) {
	switch a := arr.(type) {
	case *array.Int8:
		return func(i int) (int64, bool) { return int64(a.Value(i)), true }, nil
	case *array.Int16:
		return func(i int) (int64, bool) { return int64(a.Value(i)), true }, nil
	case *array.Int32:
		return func(i int) (int64, bool) { return int64(a.Value(i)), true }, nil
	case *array.Int64:
		return func(i int) (int64, bool) { return a.Value(i), true }, nil
	case *array.Uint8:
		return func(i int) (int64, bool) { return int64(a.Value(i)), true }, nil
	case *array.Uint16:
		return func(i int) (int64, bool) { return int64(a.Value(i)), true }, nil
	case *array.Uint32:
		return func(i int) (int64, bool) { return int64(a.Value(i)), true }, nil
	case *array.Uint64:
		return func(i int) (int64, bool) { v := a.Value(i); return int64(v), v <= math.MaxInt64 }, nil
	}
	return nil, fmt.Errorf("%s is not an integer type: %w", arr.DataType(), ErrType)
}

func intString(arr arrow.Array, i int) string {
	if a, ok := arr.(*array.Uint64); ok {
		return fmt.Sprint(a.Value(i))
	}
	return arr.ValueStr(i)
}
