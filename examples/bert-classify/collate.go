package main

import "github.com/gotpu/gotpu/data"

// budgeted wraps a collator with a data.ShapeBudget declared before training: every batch shape
// the run may use (the padding buckets at the training batch size, the evaluation batch size and
// the last, partial evaluation batch) is listed up front, and any other shape is an error instead
// of a silent new compilation. Its Seen count shows how many buckets the data actually used.
type budgeted struct {
	data.Collator
	budget *data.ShapeBudget
}

func budgetCollator(c data.Collator, trainBatch, evalBatch, evalLen int) *budgeted {
	shapes := append(c.Shapes(trainBatch), c.Shapes(min(evalBatch, evalLen))...)
	if r := evalLen % evalBatch; r != 0 && evalLen > evalBatch {
		shapes = append(shapes, c.Shapes(r)...)
	}
	return &budgeted{Collator: c, budget: data.NewShapeBudget(shapes...)}
}

// Collate implements data.Collator.
func (b *budgeted) Collate(examples []data.Example) (*data.Batch, error) {
	batch, err := b.Collator.Collate(examples)
	if err != nil {
		return nil, err
	}
	if err := b.budget.Check(batch.Size, batch.SeqLen); err != nil {
		return nil, err
	}
	return batch, nil
}
