package gocorpus

import (
	"context"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/llama"
	"github.com/gotpu/gotpu/xla"
)

// encoderOnly stands for a loaded model that is not a causal LM.
type encoderOnly struct{ models.Model }

func (encoderOnly) Architecture() string { return "BertForSequenceClassification" }

// TestCheckModel: a causal LM fits when it has the rows and the positions the data needs; each
// shortfall is an error that says which, beginning with the name given.
func TestCheckModel(t *testing.T) {
	rt, err := xla.Open(context.Background(), xla.Config{Device: "go"})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	c := llama.DefaultConfig(llama.TypeLlama)
	c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = 16, 16, 32, 1
	c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.MaxPositionEmbeddings = 2, 1, 8, 8
	m, err := models.New(context.Background(), rt, c, models.NewOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckModel("dir", m, 16, 8); err != nil {
		t.Errorf("a model with 16 rows and 8 positions for 16 ids in blocks of 8: %v", err)
	}
	for _, tc := range []struct {
		m            models.Model
		vocab, block int
		want         string
	}{
		{m, 17, 8, "dir: vocab_size 16 is smaller than the 17 ids the data uses (no vocab_map.json there"},
		{m, 16, 9, "-block_size 9 is longer than the model's 8 positions"},
		{encoderOnly{}, 16, 8, "dir: BertForSequenceClassification is not a causal LM"},
	} {
		if err := CheckModel("dir", tc.m, tc.vocab, tc.block); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("vocab %d, block %d: error %v, want %q…", tc.vocab, tc.block, err, tc.want)
		}
	}
}
