package tensorboard

import (
	"fmt"
	"math"
	"os"
)

// Event is a decoded tensorflow.Event, limited to what this package writes.
type Event struct {
	WallTime    float64 // seconds since the Unix epoch
	Step        int64
	FileVersion string  // set in the first event of a file only
	Values      []Value // the summary's values, in file order; nil for an event without one
}

// ValueKind says which kind of summary value a Value holds.
type ValueKind int

const (
	// KindOther is a value this package does not decode (an image, a histogram…).
	KindOther ValueKind = iota
	// KindScalar is a simple_value, as add_scalar writes.
	KindScalar
	// KindText is a string tensor of the "text" plugin, as add_text writes.
	KindText
)

// Value is one Summary.Value.
type Value struct {
	Tag    string
	Kind   ValueKind
	Scalar float32 // KindScalar
	Text   string  // KindText: the first string of the tensor
	Plugin string  // metadata.plugin_data.plugin_name, "" if none
}

// ReadEvents reads the event file at path, verifying every record's CRCs. On a damaged or cut
// file it returns the events before the damage with an error wrapping ErrCorrupt or
// ErrTruncated.
func ReadEvents(path string) ([]Event, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tensorboard: reading events: %w", err)
	}
	events, err := parseEvents(data)
	if err != nil {
		return events, fmt.Errorf("tensorboard: %s: %w", path, err)
	}
	return events, nil
}

// ParseEvents decodes the content of an event file, as ReadEvents does.
func ParseEvents(data []byte) ([]Event, error) {
	events, err := parseEvents(data)
	if err != nil {
		return events, fmt.Errorf("tensorboard: %w", err)
	}
	return events, nil
}

func parseEvents(data []byte) ([]Event, error) {
	records, rerr := splitRecords(data)
	events := make([]Event, 0, len(records))
	for i, r := range records {
		e, err := decodeEvent(r)
		if err != nil {
			return events, fmt.Errorf("record %d: %w: %w", i, ErrCorrupt, err)
		}
		events = append(events, e)
	}
	return events, rerr
}

func decodeEvent(b []byte) (Event, error) {
	var e Event
	err := forEachField(b, func(f protoField) error {
		switch f.num {
		case eventWallTime:
			if err := f.want(wireFixed64); err != nil {
				return err
			}
			e.WallTime = math.Float64frombits(f.val)
		case eventStep:
			if err := f.want(wireVarint); err != nil {
				return err
			}
			e.Step = int64(f.val)
		case eventFileVersion:
			if err := f.want(wireBytes); err != nil {
				return err
			}
			e.FileVersion = string(f.data)
		case eventSummary:
			if err := f.want(wireBytes); err != nil {
				return err
			}
			if e.Values == nil {
				e.Values = []Value{}
			}
			return forEachField(f.data, func(f protoField) error {
				if f.num != summaryValue {
					return nil
				}
				if err := f.want(wireBytes); err != nil {
					return err
				}
				v, err := decodeValue(f.data)
				e.Values = append(e.Values, v)
				return err
			})
		}
		return nil
	})
	return e, err
}

func decodeValue(b []byte) (Value, error) {
	var v Value
	var strs [][]byte
	var isString bool
	err := forEachField(b, func(f protoField) error {
		switch f.num {
		case valueTag:
			if err := f.want(wireBytes); err != nil {
				return err
			}
			v.Tag = string(f.data)
		case valueSimpleValue:
			if err := f.want(wireFixed32); err != nil {
				return err
			}
			v.Kind, v.Scalar = KindScalar, math.Float32frombits(uint32(f.val))
		case valueMetadata:
			if err := f.want(wireBytes); err != nil {
				return err
			}
			return forEachField(f.data, func(f protoField) error {
				if f.num != metadataPluginData || f.wire != wireBytes {
					return nil
				}
				return forEachField(f.data, func(f protoField) error {
					if f.num == pluginName && f.wire == wireBytes {
						v.Plugin = string(f.data)
					}
					return nil
				})
			})
		case valueTensor:
			if err := f.want(wireBytes); err != nil {
				return err
			}
			return forEachField(f.data, func(f protoField) error {
				switch {
				case f.num == tensorDtype && f.wire == wireVarint:
					isString = f.val == dtString
				case f.num == tensorStringVal && f.wire == wireBytes:
					strs = append(strs, f.data)
				}
				return nil
			})
		}
		return nil
	})
	if v.Kind == KindOther && isString && v.Plugin == "text" && len(strs) > 0 {
		v.Kind, v.Text = KindText, string(strs[0])
	}
	return v, err
}
