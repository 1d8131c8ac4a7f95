package data

import (
	"fmt"
	"slices"
)

// PackStats describes what PackBFD made of its input.
type PackStats struct {
	// Examples is the number of examples packed; Skipped the empty ones left out (TRL drops them).
	Examples, Skipped int
	// Truncated is the number of examples cut to maxLength, TruncatedTokens the tokens cut off.
	Truncated, TruncatedTokens int
	// Rows is the number of packed rows; Tokens the tokens in them; MaxLength the row length.
	Rows, Tokens, MaxLength int
}

// PaddingFraction is the share of the Rows × MaxLength token slots that padding fills once the
// rows are collated to MaxLength (0 when there are no rows).
func (s PackStats) PaddingFraction() float64 {
	if s.Rows == 0 || s.MaxLength == 0 {
		return 0
	}
	return 1 - float64(s.Tokens)/float64(s.Rows*s.MaxLength)
}

// PackBFD packs whole examples into rows of at most maxLength tokens with TRL's "bfd" strategy
// (pack_dataset(strategy="bfd"), best-fit decreasing): PackBFDWithStats without the statistics.
func PackBFD(examples []Example, maxLength int) ([]Example, error) {
	rows, _, err := PackBFDWithStats(examples, maxLength)
	return rows, err
}

// PackBFDWithStats packs whole examples into rows of at most maxLength tokens, best-fit
// decreasing, exactly as TRL's _pack_bfd (on_seq_length_overflow="truncate") orders and places
// them:
//
//   - empty examples are skipped, and an example longer than maxLength is truncated to its first
//     maxLength tokens, the rest discarded — TRL's "bfd" does both; Stats counts them, so neither
//     is silent. (An SFT layer that wants an error instead checks lengths first.)
//   - examples are taken longest first; equal lengths keep their input order (Arrow's sort is
//     stable);
//   - each goes into the open row with the least remaining space that still fits it; among rows
//     with that same remaining space, the one that reached it first (TRL's FIFO deque per space);
//     a new row only when none fits;
//   - rows are returned in the order they were opened, and inside a row the examples in the order
//     they were placed (so, longest first).
//
// TRL runs _pack_bfd on each datasets.map batch (1000 rows by default), so calling PackBFD on
// consecutive chunks of 1000 examples reproduces its rows exactly; one call packs across the
// whole input (never worse).
//
// A packed row is an Example whose InputIDs are its examples' concatenated; Labels their
// effective labels concatenated (an example's Labels, or its InputIDs when nil; IgnoreIndex
// entries kept); PositionIDs restart at 0 for each example (its own ids when it has them);
// AttentionMask and TokenTypeIDs are concatenated when any example of the row has them (ones or
// zeros for those without), else nil. CausalLMCollator then masks the label where each example
// but the first starts, and the models attend block-diagonally from the position ids, so a packed
// row trains as its examples would one by one. A sequence label (classification) cannot be
// packed and is an error, as is a maxLength below 1 or an array of the wrong length; errors name
// the example's index.
func PackBFDWithStats(examples []Example, maxLength int) ([]Example, PackStats, error) {
	st := PackStats{MaxLength: maxLength}
	if maxLength < 1 {
		return nil, st, fmt.Errorf("data.PackBFD: maxLength %d must be at least 1", maxLength)
	}
	type item struct{ idx, n int }
	items := make([]item, 0, len(examples))
	for i, ex := range examples {
		if err := checkPackable(ex); err != nil {
			return nil, st, fmt.Errorf("data.PackBFD: example %d: %w", i, err)
		}
		n := len(ex.InputIDs)
		if n == 0 {
			st.Skipped++
			continue
		}
		if n > maxLength {
			st.Truncated++
			st.TruncatedTokens += n - maxLength
			n = maxLength
		}
		items = append(items, item{i, n})
	}
	slices.SortStableFunc(items, func(a, b item) int { return b.n - a.n })

	// TRL's _SegmentTree holds the remaining spaces that some open row has (and maxLength, "a new
	// row", always); rows[space] is the FIFO of open rows with that much space left.
	tree := newSpaceTree(maxLength)
	tree.add(maxLength)
	bySpace := map[int][]int{}
	var bins [][]int // example indices per row, in placement order
	var used []int
	for _, it := range items {
		space := tree.search(it.n)
		var bin int
		if space < maxLength {
			bin = bySpace[space][0]
			bySpace[space] = bySpace[space][1:]
			if len(bySpace[space]) == 0 {
				tree.remove(space)
			}
		} else {
			bin = len(bins)
			bins = append(bins, nil)
			used = append(used, 0)
		}
		bins[bin] = append(bins[bin], it.idx)
		used[bin] += it.n
		space -= it.n
		if space > 0 {
			bySpace[space] = append(bySpace[space], bin)
			tree.add(space)
		}
	}

	rows := make([]Example, len(bins))
	for r, idx := range bins {
		rows[r] = packRow(examples, idx, used[r], maxLength)
		st.Examples += len(idx)
		st.Tokens += used[r]
	}
	st.Rows = len(rows)
	return rows, st, nil
}

// checkPackable validates what packing reads: equal array lengths and no sequence label.
func checkPackable(ex Example) error {
	if ex.HasLabel {
		return fmt.Errorf("has a sequence label (classification): packing is for causal language modelling")
	}
	n := len(ex.InputIDs)
	for _, c := range []struct {
		name string
		v    []int32
	}{{"attention_mask", ex.AttentionMask}, {"token_type_ids", ex.TokenTypeIDs}, {"position_ids", ex.PositionIDs}, {"labels", ex.Labels}} {
		if c.v != nil && len(c.v) != n {
			return fmt.Errorf("%s: %d values, input_ids has %d", c.name, len(c.v), n)
		}
	}
	if err := CheckPositionIDs(ex.PositionIDs); err != nil {
		return fmt.Errorf("position_ids: %w", err)
	}
	return nil
}

// packRow concatenates examples[idx...] (each truncated to maxLength) into one row of n tokens.
func packRow(examples []Example, idx []int, n, maxLength int) Example {
	row := Example{InputIDs: make([]int32, 0, n), Labels: make([]int32, 0, n), PositionIDs: make([]int32, 0, n)}
	var hasMask, hasTypes bool
	for _, i := range idx {
		hasMask = hasMask || examples[i].AttentionMask != nil
		hasTypes = hasTypes || examples[i].TokenTypeIDs != nil
	}
	if hasMask {
		row.AttentionMask = make([]int32, 0, n)
	}
	if hasTypes {
		row.TokenTypeIDs = make([]int32, 0, n)
	}
	for _, i := range idx {
		ex := examples[i]
		k := min(len(ex.InputIDs), maxLength)
		row.InputIDs = append(row.InputIDs, ex.InputIDs[:k]...)
		labels := ex.Labels
		if labels == nil {
			labels = ex.InputIDs
		}
		row.Labels = append(row.Labels, labels[:k]...)
		if ex.PositionIDs != nil {
			row.PositionIDs = append(row.PositionIDs, ex.PositionIDs[:k]...)
		} else {
			for j := range k {
				row.PositionIDs = append(row.PositionIDs, int32(j))
			}
		}
		if hasMask {
			row.AttentionMask = appendOr(row.AttentionMask, ex.AttentionMask, k, 1)
		}
		if hasTypes {
			row.TokenTypeIDs = appendOr(row.TokenTypeIDs, ex.TokenTypeIDs, k, 0)
		}
	}
	return row
}

// appendOr appends v[:k], or k copies of fill when v is nil.
func appendOr(dst, v []int32, k int, fill int32) []int32 {
	if v != nil {
		return append(dst, v[:k]...)
	}
	for range k {
		dst = append(dst, fill)
	}
	return dst
}

// spaceTree is TRL's _SegmentTree: leaves 1..maxval hold their own value when some row has that
// much space left (else 0), inner nodes the max of their children, so search finds the smallest
// available space >= a length in O(log maxval).
type spaceTree struct {
	size int // leaves, a power of two >= maxval
	t    []int
}

func newSpaceTree(maxval int) *spaceTree {
	size := 1
	for size < maxval {
		size <<= 1
	}
	return &spaceTree{size: size, t: make([]int, 2*size)}
}

func (s *spaceTree) set(val, to int) {
	i := s.size + val - 1
	s.t[i] = to
	for i > 1 {
		i >>= 1
		s.t[i] = max(s.t[2*i], s.t[2*i+1])
	}
}

func (s *spaceTree) add(val int)    { s.set(val, val) }
func (s *spaceTree) remove(val int) { s.set(val, 0) }

// search returns the smallest available space >= val (the root always holds maxval, so one
// exists for val <= maxval): go left whenever the left subtree holds a space that fits.
func (s *spaceTree) search(val int) int {
	i := 1
	for i < s.size {
		if s.t[2*i] >= val {
			i = 2 * i
		} else {
			i = 2*i + 1
		}
	}
	return s.t[i]
}
