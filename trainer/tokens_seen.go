package trainer

import "github.com/gotpu/gotpu/data"

// HF's include_num_input_tokens_seen: the training loop counts each micro-batch's input tokens,
// gathered over the devices, into state.num_input_tokens_seen, and Trainer.log adds the count to
// every log entry (after epoch) and trainer_state.json keeps it. 5.x's modes: "all" counts
// every input_ids position (numel(), padding included), "non_padding" the attention mask's ones;
// 4.x's true is "all" (the flag parsers map it). With "no" (the default) the count stays 0, as
// in HF's trainer_state.json.

// inputIDCount is numel() of the input ids of shards: every position, padding included.
func inputIDCount(shards []*data.Batch) int {
	n := 0
	for _, b := range shards {
		if b != nil {
			n += len(b.InputIDs)
		}
	}
	return n
}

// tokensSeen is what one update adds to num_input_tokens_seen: all its input positions
// (allTokens) or its non-padding ones (nonPadding), as include_num_input_tokens_seen says;
// 0 when it is "no" (or unset).
func tokensSeen(mode string, allTokens, nonPadding int) int64 {
	switch mode {
	case "all":
		return int64(allTokens)
	case "non_padding":
		return int64(nonPadding)
	}
	return 0
}

// withTokensSeen appends num_input_tokens_seen to a log entry when include_num_input_tokens_seen
// is on, as HF's Trainer.log does.
func (t *Trainer) withTokensSeen(entry LogEntry) LogEntry {
	if tokensSeen(t.args.IncludeNumInputTokensSeen, 1, 1) == 0 {
		return entry
	}
	return entry.With("num_input_tokens_seen", JSONIntValue(t.state.NumInputTokensSeen))
}
