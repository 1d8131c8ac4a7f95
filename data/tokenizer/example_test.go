package tokenizer_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/gotpu/gotpu/data/tokenizer"
)

// Loading a tokenizer and encoding text (compiled, not run: it needs a
// tokenizer.json).
func ExampleFromFile() {
	tok, err := tokenizer.FromFile("path/to/model-dir") // or .../tokenizer.json
	if err != nil {
		log.Fatal(err) // e.g. "tokenizer.json: model.merges[12]: ..."
	}
	enc, err := tok.Encode("Hello, world!", true)
	if err != nil {
		log.Fatal(err)
	}
	for i, id := range enc.IDs {
		fmt.Println(id, enc.Tokens[i], enc.Offsets[i]) // offsets in code points
	}
	text, _ := tok.Decode(enc.IDs, true)
	fmt.Println(text)

	// Truncation and padding return configured copies.
	tok, _ = tok.WithTruncation(&tokenizer.Truncation{MaxLength: 512, Stride: 64})
	tok, _ = tok.WithPadding(&tokenizer.Padding{PadToMultipleOf: 8})
	batch, err := tok.EncodeBatch(context.Background(), []tokenizer.Input{
		tokenizer.Single("first text"),
		tokenizer.PairOf("a question", "its context"),
	}, true)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(batch[0].IDs) == len(batch[1].IDs))
}

// Streaming JSON lines, as the CLI does.
func ExampleEncodeJSONLines() {
	tok, err := tokenizer.FromFile("path/to/tokenizer.json")
	if err != nil {
		log.Fatal(err)
	}
	in := strings.NewReader(`{"text": "Hello world"}` + "\n" + `{"text": "Second line"}` + "\n")
	err = tokenizer.EncodeJSONLines(context.Background(), tok, in, os.Stdout, tokenizer.JSONLinesOptions{AddSpecialTokens: true})
	if err != nil {
		log.Fatal(err) // *tokenizer.LineError names the input line
	}
}
