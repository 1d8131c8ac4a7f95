package tokenizer

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
)

// parallel runs work(i) for i in [0, n) on at most GOMAXPROCS goroutines.
// The goroutines are owned by this call: it returns only after all have
// stopped. The first error, or the cancellation of ctx, stops the remaining
// work and is returned.
func parallel(ctx context.Context, n int, work func(i int) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := work(i); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if ctx.Err() != nil {
					return
				}
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := work(i); err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	// Cancelled from outside (our own cancel only follows an error).
	return ctx.Err()
}

// EncodeBatch implements Tokenizer. Inputs are encoded on all cores; with
// padding to the longest sequence, every encoding is padded to the longest
// of the batch.
func (p *Pipeline) EncodeBatch(ctx context.Context, inputs []Input, addSpecialTokens bool) ([]*Encoding, error) {
	out := make([]*Encoding, len(inputs))
	err := parallel(ctx, len(inputs), func(i int) error {
		e, err := p.encode(inputs[i].Text, inputs[i].Pair, addSpecialTokens)
		if err != nil {
			return &BatchError{Index: i, Err: err}
		}
		out[i] = e
		return nil
	})
	if err != nil {
		return nil, err
	}
	if p.padding != nil {
		padEncodings(out, p.padding)
	}
	return out, nil
}

// DecodeBatch implements Tokenizer.
func (p *Pipeline) DecodeBatch(ctx context.Context, ids [][]uint32, skipSpecialTokens bool) ([]string, error) {
	out := make([]string, len(ids))
	err := parallel(ctx, len(ids), func(i int) error {
		s, err := p.Decode(ids[i], skipSpecialTokens)
		if err != nil {
			return &BatchError{Index: i, Err: err}
		}
		out[i] = s
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// BatchError says which element of a batch failed.
type BatchError struct {
	Index int
	Err   error
}

func (e *BatchError) Error() string {
	return "batch element " + strconv.Itoa(e.Index) + ": " + e.Err.Error()
}
func (e *BatchError) Unwrap() error { return e.Err }
