package data

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Batch is a collated batch in host memory, row-major [Size, SeqLen], ready for transfer.
type Batch struct {
	Size, SeqLen  int
	InputIDs      []int32
	AttentionMask []int32 // always present: 1 for real tokens, 0 for padding
	TokenTypeIDs  []int32 // nil when no example had token types
	// PositionIDs are [Size, SeqLen] positions, nil when no example of the batch had them (the
	// models then use 0..SeqLen-1). When some had them, a row without gets 0..SeqLen-1, and the
	// padding after a row's tokens continues its last example's positions (last+1, last+2, ...):
	// the model's block-diagonal mask then groups the padding with that example, so a padding
	// query always sees its own example's tokens and no attention row is empty (see
	// models/internal/core.PackedCausalMask, which also lets every query see itself). Padding
	// positions never reach the loss (their labels are IgnoreIndex) and stay below SeqLen.
	PositionIDs []int32
	// Labels are per-token targets [Size, SeqLen] for language modelling (IgnoreIndex where the
	// loss must skip), or one per example [Size] for classification.
	Labels []int32
	// Indices are the dataset indices of the rows (for debugging and exact-resume checks).
	Indices []int
}

// Tokens is the number of non-padding tokens in the batch.
func (b *Batch) Tokens() int {
	n := 0
	for _, m := range b.AttentionMask {
		n += int(m)
	}
	return n
}

// Collator turns examples into a Batch.
type Collator interface {
	Collate(examples []Example) (*Batch, error)
	// Shapes lists every [size, seqLen] the collator can produce for a given batch size: the
	// shape budget, i.e. how many graphs a run compiles.
	Shapes(batchSize int) [][2]int
}

// CausalLMCollator collates fixed-length blocks (HF run_clm's group_texts output) for causal
// language modelling: labels are the input ids (the model shifts them), with IgnoreIndex where
// the attention mask is 0, as DataCollatorForLanguageModeling(mlm=False) does.
//
// Packed examples (PackBFD: position ids restarting at 0 inside a row) keep their position ids,
// and the label where each packed example after the first starts is IgnoreIndex, as TRL's
// DataCollatorForLanguageModeling sets labels[position_ids == 0] = -100: the model shifts labels,
// so that label is what the previous example's last token would be trained to predict.
type CausalLMCollator struct {
	BlockSize int
	PadID     int32
}

// Shapes implements Collator: one shape.
func (c CausalLMCollator) Shapes(batchSize int) [][2]int { return [][2]int{{batchSize, c.BlockSize}} }

// Collate implements Collator. Examples longer than BlockSize are an error (not truncated
// silently); shorter ones are right-padded.
func (c CausalLMCollator) Collate(examples []Example) (*Batch, error) {
	b := newBatch(len(examples), c.BlockSize, c.PadID)
	for i, ex := range examples {
		if len(ex.InputIDs) > c.BlockSize {
			return nil, fmt.Errorf("data: example of %d tokens is longer than block_size %d", len(ex.InputIDs), c.BlockSize)
		}
		b.fill(i, ex)
		labels := ex.Labels
		if labels == nil {
			labels = ex.InputIDs
		}
		row := b.Labels[i*c.BlockSize : (i+1)*c.BlockSize]
		for j := range row {
			row[j] = IgnoreIndex
			if j < len(labels) && b.AttentionMask[i*c.BlockSize+j] == 1 {
				row[j] = labels[j]
			}
			if j > 0 && j < len(ex.PositionIDs) && ex.PositionIDs[j] == 0 {
				row[j] = IgnoreIndex
			}
		}
	}
	if err := b.setPositions(examples); err != nil {
		return nil, err
	}
	return b, nil
}

// BucketCollator pads classification examples to the smallest of a few declared lengths (buckets)
// that fits the longest example of the batch, so a run compiles at most len(Buckets) graphs per
// batch size. An example longer than the largest bucket is an error: truncate when tokenizing
// (max_seq_length), never by surprise here.
type BucketCollator struct {
	Buckets []int // sorted ascending; the last is max_seq_length
	PadID   int32
}

// DefaultBuckets returns powers of two from 32 up to maxLen (inclusive, maxLen itself last).
func DefaultBuckets(maxLen int) []int {
	var b []int
	for l := 32; l < maxLen; l *= 2 {
		b = append(b, l)
	}
	return append(b, maxLen)
}

// Shapes implements Collator.
func (c BucketCollator) Shapes(batchSize int) [][2]int {
	out := make([][2]int, len(c.Buckets))
	for i, l := range c.Buckets {
		out[i] = [2]int{batchSize, l}
	}
	return out
}

// Collate implements Collator.
func (c BucketCollator) Collate(examples []Example) (*Batch, error) {
	if len(c.Buckets) == 0 || !slices.IsSorted(c.Buckets) {
		return nil, fmt.Errorf("data.BucketCollator.Buckets: %v must be non-empty and ascending", c.Buckets)
	}
	longest := 0
	for _, ex := range examples {
		longest = max(longest, len(ex.InputIDs))
	}
	i, found := slices.BinarySearch(c.Buckets, longest)
	if !found && i == len(c.Buckets) {
		return nil, fmt.Errorf("data: example of %d tokens is longer than the largest bucket %d (max_seq_length): "+
			"an undeclared shape would compile a new graph", longest, c.Buckets[len(c.Buckets)-1])
	}
	seq := c.Buckets[i]
	b := newBatch(len(examples), seq, c.PadID)
	b.Labels = make([]int32, len(examples))
	for r, ex := range examples {
		if !ex.HasLabel {
			return nil, fmt.Errorf("data: example %d has no sequence label", r)
		}
		b.fill(r, ex)
		b.Labels[r] = ex.Label
	}
	// Position ids are kept (not dropped) so that a classifier refuses them by name rather than
	// silently training on packed rows as one sequence.
	if err := b.setPositions(examples); err != nil {
		return nil, err
	}
	return b, nil
}

func newBatch(size, seq int, pad int32) *Batch {
	b := &Batch{
		Size: size, SeqLen: seq,
		InputIDs:      make([]int32, size*seq),
		AttentionMask: make([]int32, size*seq),
		Labels:        make([]int32, size*seq),
	}
	for i := range b.InputIDs {
		b.InputIDs[i] = pad
	}
	return b
}

func (b *Batch) fill(row int, ex Example) {
	base := row * b.SeqLen
	copy(b.InputIDs[base:], ex.InputIDs)
	for j := range ex.InputIDs {
		b.AttentionMask[base+j] = 1
		if ex.AttentionMask != nil {
			b.AttentionMask[base+j] = ex.AttentionMask[j]
		}
	}
	if ex.TokenTypeIDs != nil {
		if b.TokenTypeIDs == nil {
			b.TokenTypeIDs = make([]int32, len(b.InputIDs))
		}
		copy(b.TokenTypeIDs[base:], ex.TokenTypeIDs)
	}
}

// setPositions fills PositionIDs from the examples of the rows when any has them (see the field
// for rows without and for padding); it leaves nil otherwise.
func (b *Batch) setPositions(examples []Example) error {
	has := false
	for _, ex := range examples {
		has = has || ex.PositionIDs != nil
	}
	if !has {
		return nil
	}
	b.PositionIDs = make([]int32, b.Size*b.SeqLen)
	for r, ex := range examples {
		if ex.PositionIDs != nil && len(ex.PositionIDs) != len(ex.InputIDs) {
			return fmt.Errorf("data: example %d: position_ids: %d values, input_ids has %d", r, len(ex.PositionIDs), len(ex.InputIDs))
		}
		if err := CheckPositionIDs(ex.PositionIDs); err != nil {
			return fmt.Errorf("data: example %d: position_ids: %w", r, err)
		}
		row := b.PositionIDs[r*b.SeqLen : (r+1)*b.SeqLen]
		n := copy(row, ex.PositionIDs)
		for j := n; j < len(row); j++ {
			row[j] = int32(j) // a row without position ids: 0..SeqLen-1
			if n > 0 {
				row[j] = row[j-1] + 1 // padding continues the row's last example
			}
		}
	}
	return nil
}

// ShapeBudget records the shapes a run declared and rejects any other: a new shape is a new
// compiled program (minutes on a TPU), so it must never happen silently.
// It is safe for concurrent use.
type ShapeBudget struct {
	mu       sync.Mutex
	declared map[[2]int]bool
	seen     map[[2]int]bool
}

// NewShapeBudget declares the given shapes.
func NewShapeBudget(shapes ...[2]int) *ShapeBudget {
	b := &ShapeBudget{declared: map[[2]int]bool{}, seen: map[[2]int]bool{}}
	for _, s := range shapes {
		b.declared[s] = true
	}
	return b
}

// Check returns an error for an undeclared shape and records declared ones as seen.
func (b *ShapeBudget) Check(size, seq int) error {
	s := [2]int{size, seq}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.declared[s] {
		return fmt.Errorf("data: batch shape [%d,%d] is not in the declared shape budget %s", size, seq, b)
	}
	b.seen[s] = true
	return nil
}

// Declared is the number of declared shapes; Seen how many of them occurred.
func (b *ShapeBudget) Declared() int { return len(b.declared) }

// Seen is the number of declared shapes that occurred.
func (b *ShapeBudget) Seen() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.seen)
}

func (b *ShapeBudget) String() string {
	var parts []string // declared is never written after construction
	for s := range b.declared {
		parts = append(parts, fmt.Sprintf("[%d,%d]", s[0], s[1]))
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, " ") + "}"
}
