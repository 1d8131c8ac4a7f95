package sft

import (
	"fmt"

	"github.com/gotpu/gotpu/data"
)

// trlBatch is datasets.map's default batch_size: TRL's pack_dataset packs each batch of this
// many examples on its own, so rows never mix examples of different batches.
const trlBatch = 1000

// pack packs examples with cfg.PackingStrategy into rows of cfg.MaxLength tokens, batch by
// batch as TRL's pack_dataset does, and adds what it cut to st.
func pack(examples []data.Example, cfg Config, st *Stats) ([]data.Example, error) {
	var rows []data.Example
	for start := 0; start < len(examples); start += trlBatch {
		batch := examples[start:min(start+trlBatch, len(examples))]
		var packed []data.Example
		switch cfg.PackingStrategy {
		case StrategyBFD:
			p, ps, err := data.PackBFDWithStats(batch, cfg.MaxLength)
			if err != nil {
				return nil, fmt.Errorf("packing: %w", err)
			}
			st.Truncated += ps.Truncated
			st.TruncatedTokens += ps.TruncatedTokens
			packed = p
		case StrategyBFDSplit:
			// bfd_split is bfd over the examples cut into max_length pieces first (TRL splits
			// the Arrow offsets the same way), each piece then packed as an example of its own.
			p, _, err := data.PackBFDWithStats(split(batch, cfg.MaxLength), cfg.MaxLength)
			if err != nil {
				return nil, fmt.Errorf("packing: %w", err)
			}
			packed = p
		case StrategyWrapped:
			packed = wrap(batch, cfg.MaxLength)
		default:
			return nil, fmt.Errorf("packing_strategy: %q is not one of %v", cfg.PackingStrategy, Strategies)
		}
		rows = append(rows, packed...)
	}
	return rows, nil
}

// split cuts each example longer than n into pieces of n tokens (the last shorter), in order.
func split(examples []data.Example, n int) []data.Example {
	var out []data.Example
	for _, ex := range examples {
		for i := 0; i < len(ex.InputIDs); i += n {
			j := min(i+n, len(ex.InputIDs))
			out = append(out, data.Example{InputIDs: ex.InputIDs[i:j:j], Labels: ex.Labels[i:j:j]})
		}
	}
	return out
}

// wrap is TRL's _pack_wrapped: the examples' tokens (and labels) concatenated and cut every n
// tokens, the last row shorter; rows carry no position ids (TRL keeps no sequence lengths for
// it, so positions run through the row).
func wrap(examples []data.Example, n int) []data.Example {
	total := 0
	for _, ex := range examples {
		total += len(ex.InputIDs)
	}
	ids := make([]int32, 0, total)
	labels := make([]int32, 0, total)
	for _, ex := range examples {
		ids = append(ids, ex.InputIDs...)
		labels = append(labels, ex.Labels...)
	}
	var out []data.Example
	for i := 0; i < total; i += n {
		j := min(i+n, total)
		out = append(out, data.Example{InputIDs: ids[i:j:j], Labels: labels[i:j:j]})
	}
	return out
}
