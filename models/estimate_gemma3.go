package models

import "github.com/gotpu/gotpu/models/gemma3"

// gemma3Footprint is EstimateFootprint for Gemma3ForCausalLM: Llama's shapes plus q_norm/k_norm
// ([head_dim] each) and four [hidden] norms per layer; the MLP is gated (GeGLU: 3 matrices).
func gemma3Footprint(c *gemma3.Config) (Footprint, error) {
	if err := checkDims(c.Raw, dim{"vocab_size", c.VocabSize, MaxVocab}, dim{"hidden_size", c.HiddenSize, MaxWidth},
		dim{"intermediate_size", c.IntermediateSize, MaxWidth}, dim{"num_hidden_layers", c.NumHiddenLayers, MaxLayers},
		dim{"num_attention_heads", c.NumAttentionHeads, MaxWidth}, dim{"num_key_value_heads", c.NumKeyValueHeads, MaxWidth},
		dim{"head_dim", c.HeadDim, MaxWidth}, dim{"max_position_embeddings", c.MaxPositionEmbeddings, MaxPositions}); err != nil {
		return Footprint{}, err
	}
	H, I, V, d := int64(c.HiddenSize), int64(c.IntermediateSize), int64(c.VocabSize), int64(c.HeadDim)
	q, kv := int64(c.NumAttentionHeads)*d, int64(c.NumKeyValueHeads)*d
	var s shapeSum
	s.add(false, V, H) // embed_tokens
	s.add(false, H)    // norm
	if !c.TieWordEmbeddings {
		s.add(false, V, H)
	}
	for _, sh := range [][2]int64{{q, H}, {kv, H}, {kv, H}, {H, q}} {
		s.add(true, sh[0], sh[1])
		if c.AttentionBias {
			s.add(true, sh[0])
		}
	}
	s.add(true, d) // q_norm
	s.add(true, d) // k_norm
	s.add(true, I, H)
	s.add(true, I, H)
	s.add(true, H, I)
	for range gemma3.NormNames {
		s.add(true, H)
	}
	return s.footprint(c.Raw, int64(c.NumHiddenLayers), Footprint{Layers: int64(c.NumHiddenLayers), Hidden: H,
		Intermediate: I, Heads: int64(c.NumAttentionHeads), MLPMatrices: 3, Vocab: V,
		MaxPositions: int64(c.MaxPositionEmbeddings)}, "hidden_size")
}
