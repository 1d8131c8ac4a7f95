package models

import (
	"context"
	"testing"
)

// TestLayerClassOfEveryFixture: every fixture's model type has its HF layer class.
func TestLayerClassOfEveryFixture(t *testing.T) {
	rt := openGo(t)
	want := map[string]string{"gpt2-tiny": "GPT2Block", "llama-tiny": "LlamaDecoderLayer", "bert-tiny": "BertLayer",
		"qwen3-tiny": "Qwen3DecoderLayer", "gemma3-tiny": "Gemma3DecoderLayer"}
	for name, class := range want {
		m, err := Load(context.Background(), rt, fixtureDir(t, name), LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := LayerClass(m.Config()); got != class {
			t.Errorf("%s (%s): LayerClass %q, want %q", name, m.Config().ModelType(), got, class)
		}
	}
	if LayerClass(nil) != "" {
		t.Error("LayerClass(nil) is not empty")
	}
}
