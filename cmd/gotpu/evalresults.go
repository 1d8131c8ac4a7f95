package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/gotpu/gotpu/internal/atomicfile"
	"github.com/gotpu/gotpu/trainer"
)

// perplexity is run_clm.py's math.exp(eval_loss), with float("inf") when the exponential
// overflows (eval_loss above ~709.78). A NaN loss gives NaN, as math.exp(nan) does in Python.
func perplexity(evalLoss float64) float64 { return math.Exp(evalLoss) }

// addEvalResults adds what run_clm.py adds to trainer.evaluate()'s metrics before it logs and
// saves them: eval_samples (the evaluated examples) and perplexity.
func addEvalResults(metrics map[string]float64, samples int) {
	metrics["eval_samples"] = float64(samples)
	if l, ok := metrics["eval_loss"]; ok {
		metrics["perplexity"] = perplexity(l)
	}
}

// appendMetricsJSON writes metrics as one JSON object with sorted keys (HF's save_metrics
// sorts them), on one line or indented by 4 (save_metrics' layout). Python's json writes
// inf and nan as Infinity and NaN, which are not JSON (encoding/json, jq and JSON.parse refuse
// them), so a non-finite value — run_clm's perplexity of float("inf") when exp(eval_loss)
// overflows, or a NaN loss — is written as null: every JSON reader accepts it, and a reader
// that finds a null perplexity knows it was not a finite number. Whole numbers are written
// as Python writes floats ("512.0"), so a float stays a float when Python reads the file.
func appendMetricsJSON(buf []byte, metrics map[string]float64, indent bool) []byte {
	keys := make([]string, 0, len(metrics))
	for k := range metrics {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	buf = append(buf, '{')
	for i, k := range keys {
		if i > 0 {
			buf = append(buf, ',')
			if !indent {
				buf = append(buf, ' ')
			}
		}
		if indent {
			buf = append(buf, "\n    "...)
		}
		buf = strconv.AppendQuote(buf, k) // metric names are ASCII identifiers
		buf = append(buf, ": "...)
		buf = appendPyFloat(buf, metrics[k])
	}
	if indent && len(keys) > 0 {
		buf = append(buf, '\n')
	}
	return append(buf, '}')
}

// appendPyFloat writes v as Python's repr(float) does (trainer.PyFloatRepr), null when not
// finite (see appendMetricsJSON).
func appendPyFloat(buf []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(buf, "null"...)
	}
	return append(buf, trainer.PyFloatRepr(v)...)
}

// writeEvalResults writes output_dir/eval_results.json (save_metrics' layout) and prints the
// metrics as exactly one JSON line on stdout, the command's only output there.
func writeEvalResults(path string, stdout io.Writer, metrics map[string]float64) error {
	if err := atomicfile.WriteFileBytes(path, append(appendMetricsJSON(nil, metrics, true), '\n')); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	_, err := stdout.Write(append(appendMetricsJSON(nil, metrics, false), '\n'))
	return err
}
