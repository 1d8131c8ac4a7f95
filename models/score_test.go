package models

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/models/internal/reftest"
)

// fixtureLines turns a fixture's batch into ScoreJSONLines input, one row per line.
func fixtureLines(ref *reftest.Reference) string {
	var b strings.Builder
	labels := ref.ClassLabels()
	for i, row := range ref.InputIDs {
		e := map[string]any{"input_ids": row}
		if labels != nil {
			e["attention_mask"] = ref.AttentionMask[i]
			e["token_type_ids"] = ref.TokenTypeIDs[i]
			e["labels"] = labels[i]
		}
		j, _ := json.Marshal(e)
		b.Write(j)
		b.WriteString("\n\n") // blank lines are skipped
	}
	return b.String()
}

// Scoring each fixture row alone gives per-example losses whose mean is the batch loss (every row
// has the same number of scored tokens), and the logits file holds the batch's logits.
func TestScoreJSONLinesReproducesFixtures(t *testing.T) {
	rt := openGo(t)
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			ref := reftest.Read(t, f.name)
			m, err := Load(context.Background(), rt, fixtureDir(t, f.name), LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			logitsPath := filepath.Join(t.TempDir(), "logits.safetensors")
			if err := ScoreJSONLines(context.Background(), rt, m, strings.NewReader(fixtureLines(ref)), &out, logitsPath); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != len(ref.InputIDs) {
				t.Fatalf("%d output lines for %d examples", len(lines), len(ref.InputIDs))
			}
			sum := 0.0
			for _, l := range lines {
				var r ScoreResult
				if err := json.Unmarshal([]byte(l), &r); err != nil || r.Loss == nil {
					t.Fatalf("output line %q: %v", l, err)
				}
				sum += *r.Loss
			}
			mean := sum / float64(len(lines))
			t.Logf("%s: mean per-line loss %.9f, reference %.9f (diff %.3g)", f.name, mean, ref.Loss, math.Abs(mean-ref.Loss))
			if math.Abs(mean-ref.Loss) > 1e-5 {
				t.Errorf("mean loss %.9f, want %.9f", mean, ref.Loss)
			}
			lf, err := safetensors.Open(logitsPath)
			if err != nil {
				t.Fatal(err)
			}
			defer lf.Close()
			info, ok := lf.Info("logits")
			if !ok || info.DType != safetensors.F32 || !slices.Equal(info.Shape, ref.Logits.Shape) || len(lf.Names()) != 1 {
				t.Fatalf("logits file: %+v (want F32 %v)", info, ref.Logits.Shape)
			}
			raw, _ := lf.Bytes("logits")
			vals := make([]float32, len(raw)/4)
			if err := safetensors.DecodeFloat32(safetensors.F32, raw, vals); err != nil {
				t.Fatal(err)
			}
			got := make([]float64, len(vals))
			for i, v := range vals {
				got[i] = float64(v)
			}
			d := reftest.MaxAbsDiff(got, ref.FlatLogits(t))
			t.Logf("%s: --logits file max diff %.3g", f.name, d)
			if d > 1e-4 {
				t.Errorf("logits file differs by %.3g", d)
			}
		})
	}
}

func TestScoreJSONLinesRejects(t *testing.T) {
	rt := openGo(t)
	lm, err := Load(context.Background(), rt, fixtureDir(t, "gpt2-tiny"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cls, err := Load(context.Background(), rt, fixtureDir(t, "bert-tiny"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		m     Model
		input string
		want  string
	}{
		{"bad json", lm, "{\"input_ids\": [1, 2]}\n{oops\n", "line 2"},
		{"empty input", lm, "\n\n", "no examples"},
		{"no input_ids", lm, `{"text": "hi"}`, `line 1: field "input_ids" is missing`},
		{"token outside vocabulary", lm, `{"input_ids": [1, 1000]}`, `line 1: field "input_ids"[1]: token 1000 is outside the vocabulary [0, 1000)`},
		{"too long", lm, `{"input_ids": [` + strings.Repeat("1,", 64) + `1]}`, "more than the model's 64 positions"},
		{"mask length", lm, `{"input_ids": [1, 2], "attention_mask": [1]}`, `field "attention_mask" has 1 values for 2 input_ids`},
		{"lm labels length", lm, `{"input_ids": [1, 2], "labels": [1]}`, `field "labels" must be a list of 2 token ids`},
		{"class out of range", cls, `{"input_ids": [101, 102], "labels": 3}`, "class 3 is outside [0, 3)"},
		{"class not integer", cls, `{"input_ids": [101, 102], "labels": "a"}`, "want an integer class"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			err := ScoreJSONLines(context.Background(), rt, c.m, strings.NewReader(c.input), &out, "")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
			if out.Len() != 0 {
				t.Errorf("wrote output before validating: %q", out.String())
			}
		})
	}
	// Without labels a classifier still scores (loss null); an LM defaults labels to input_ids.
	var out bytes.Buffer
	if err := ScoreJSONLines(context.Background(), rt, cls, strings.NewReader(`{"input_ids": [101, 5, 102]}`), &out, ""); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out.String()) != `{"loss":null}` {
		t.Errorf("unlabelled classifier example: %q", out.String())
	}
}
