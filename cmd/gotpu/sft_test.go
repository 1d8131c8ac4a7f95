package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/trainer"
)

// The SFT runs train the Qwen3 fixture (testdata/models/qwen3-tiny: vocabulary 512, 64
// positions) with the Qwen3 training chat template (TRL's qwen3_training.jinja, with
// {% generation %} blocks). The real Qwen3 tokenizer has 151,669 tokens, which the fixture's
// 512-row embedding cannot take, and a model with that vocabulary is too slow to train for
// dozens of steps on the Go backend; so the fixture gets a byte-level BPE tokenizer of its own
// (the 256 byte symbols of GPT-2's byte-level alphabet, no merges, and the template's special
// tokens as added tokens, ids 256-260): every character is covered, as assistant masks need.

var sftSpecials = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"}

// byteLevelTokenizer is a tokenizer.json of one token per byte plus sftSpecials.
func byteLevelTokenizer() []byte {
	// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the others map to 256+n.
	var printable []int
	for b := '!'; b <= '~'; b++ {
		printable = append(printable, int(b))
	}
	for b := 0xA1; b <= 0xAC; b++ {
		printable = append(printable, b)
	}
	for b := 0xAE; b <= 0xFF; b++ {
		printable = append(printable, b)
	}
	sym := map[int]rune{}
	for _, b := range printable {
		sym[b] = rune(b)
	}
	n := 0
	for b := range 256 {
		if _, ok := sym[b]; !ok {
			sym[b] = rune(256 + n)
			n++
		}
	}
	vocab := map[string]int{}
	for b := range 256 {
		vocab[string(sym[b])] = b
	}
	var added []map[string]any
	for i, s := range sftSpecials {
		added = append(added, map[string]any{"id": 256 + i, "content": s, "single_word": false, "lstrip": false,
			"rstrip": false, "normalized": false, "special": true})
	}
	tok := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": added, "normalizer": nil,
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"post_processor": nil,
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false, "vocab": vocab, "merges": []string{}},
	}
	b, _ := json.Marshal(tok)
	return b
}

// sftModelDir is the qwen3-tiny fixture with the byte-level tokenizer beside it.
func sftModelDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join("..", "..", "testdata", "models", "qwen3-tiny")
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), byteLevelTokenizer(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

var sftWords = strings.Split("abcdefghijkl", "")

// sftConversations writes a conversation per word: the user says a letter, the assistant
// repeats it with a full stop: 30 byte tokens with the template's markup, so two fit in a packed
// row of 64.
func sftConversations(t *testing.T, path string, words []string) {
	t.Helper()
	var b strings.Builder
	for _, w := range words {
		m := map[string]any{"messages": []map[string]string{{"role": "user", "content": w}, {"role": "assistant", "content": w + "."}}}
		line, _ := json.Marshal(m)
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

var sftTemplatePath = filepath.Join("..", "..", "testdata", "chat", "families", "qwen3-trl-training", "tokenizer_config.json")

// evalLosses reads the eval_loss entries of a run's trainer_state.json, in order.
func evalLosses(t *testing.T, out string) []float64 {
	t.Helper()
	st, err := trainer.LoadTrainerState(filepath.Join(out, "trainer_state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var losses []float64
	for _, e := range st.LogHistory {
		if l, ok := e.Float("eval_loss"); ok {
			losses = append(losses, l)
		}
	}
	return losses
}

// sftEval runs `gotpu eval` (the SFT path, as train prepares the split) and returns eval_loss.
func sftEval(t *testing.T, model, tokenizer, evalFile, out string, extra ...string) float64 {
	t.Helper()
	args := append([]string{"eval", "--model_name_or_path", model, "--tokenizer_name", tokenizer, "--validation_file", evalFile,
		"--chat_template_path", sftTemplatePath, "--assistant_only_loss", "--per_device_eval_batch_size", "3",
		"--device", "go", "--output_dir", out}, extra...)
	stdout, errOut, code := runGotpu(t, nil, args...)
	if code != 0 {
		t.Fatalf("gotpu eval: exit %d\n%s", code, errOut)
	}
	// The last line is the metrics as JSON (the one before, HF's printed dict).
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var m map[string]float64
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatalf("%v: %q", err, stdout)
	}
	l, ok := m["eval_loss"]
	if !ok || math.IsNaN(l) || math.IsInf(l, 0) {
		t.Fatalf("eval_loss %v in %v", l, m)
	}
	return l
}

// TestTrainSFTAssistantOnly: `gotpu train` on conversations with --assistant_only_loss (and
// once with --packing --max_length 64) runs the SFT path, logs its statistics, and lowers the
// held-out loss on the assistant's tokens by a large margin: `gotpu eval` of the fixture before
// training against the eval_loss of the trained model, after 40 updates, both in the run's own
// evaluation and in `gotpu eval` of the saved model (equal). (The trainer does not implement
// eval_on_start, so the loss before comes from gotpu eval.)
func TestTrainSFTAssistantOnly(t *testing.T) {
	model := sftModelDir(t)
	dir := t.TempDir()
	trainFile, evalFile := filepath.Join(dir, "train.jsonl"), filepath.Join(dir, "eval.jsonl")
	var train []string
	for i := range 48 {
		train = append(train, sftWords[i%9]) // the first 9 letters
	}
	sftConversations(t, trainFile, train)
	sftConversations(t, evalFile, sftWords[9:]) // held out: letters never seen in training
	before := sftEval(t, model, model, evalFile, filepath.Join(dir, "eval-before"))
	for _, c := range []struct {
		name  string
		extra []string
	}{
		{"padded", nil},
		{"packed", []string{"--packing", "--max_length", "64"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, c.name)
			args := append([]string{"train", "--model_name_or_path", model, "--train_file", trainFile, "--validation_file", evalFile,
				"--chat_template_path", sftTemplatePath, "--assistant_only_loss",
				"--per_device_train_batch_size", "4", "--per_device_eval_batch_size", "3", "--max_steps", "40",
				"--learning_rate", "3e-3", "--warmup_steps", "0", "--save_strategy", "no", "--logging_steps", "10",
				"--eval_strategy", "steps", "--eval_steps", "40", "--device", "go", "--output_dir", out}, c.extra...)
			_, errOut, code := runGotpu(t, nil, args...)
			if code != 0 {
				t.Fatalf("gotpu train: exit %d\n%s", code, errOut)
			}
			var statLines []string
			for _, l := range strings.Split(errOut, "\n") {
				if strings.Contains(l, "sft: prepared") && strings.Contains(l, "trained_tokens=") {
					statLines = append(statLines, l)
				}
			}
			if len(statLines) != 2 {
				t.Fatalf("want an SFT statistics line per split:\n%s", errOut)
			}
			if c.extra != nil && (!strings.Contains(statLines[0], "block=64") || !strings.Contains(statLines[0], "rows=24 ")) {
				t.Fatalf("want the 48 examples packed two a row into rows of max_length 64: %s", statLines[0])
			}
			losses := evalLosses(t, out)
			if len(losses) != 1 {
				t.Fatalf("eval losses %v, want one, after training\n%s", losses, errOut)
			}
			after := losses[0]
			if after > before/2 {
				t.Fatalf("held-out assistant-token loss %.4f -> %.4f: want it at least halved", before, after)
			}
			// The saved model, evaluated alone, gives the run's final eval_loss: the eval split
			// is prepared the same way by both commands.
			if again := sftEval(t, out, model, evalFile, filepath.Join(dir, c.name+"-eval"), c.extra...); math.Abs(again-after) > 1e-4 {
				t.Fatalf("gotpu eval of the trained model: %.6f, the run's last eval_loss %.6f", again, after)
			}
			for _, l := range statLines {
				t.Log(l)
			}
			t.Logf("%s: held-out assistant-token eval_loss %.4f -> %.4f after 40 steps", c.name, before, after)
		})
	}
}

// TestTrainSFTBadInput: a template without generation blocks with --assistant_only_loss, a
// message without a role, and a file mixing formats are refused before training, naming the
// template, or the file and line.
func TestTrainSFTBadInput(t *testing.T) {
	model := sftModelDir(t)
	dir := t.TempDir()
	good := `{"messages": [{"role": "user", "content": "Say red"}, {"role": "assistant", "content": "red."}]}`
	plainTemplate := filepath.Join("..", "..", "testdata", "chat", "families", "qwen3", "tokenizer_config.json")
	for _, c := range []struct {
		name, data, template string
		want                 []string
	}{
		{"no generation blocks", good, plainTemplate, []string{"assistant_only_loss: the chat template " + plainTemplate, "no {% generation %} blocks"}},
		{"message without role", good + "\n" + `{"messages": [{"content": "hi"}]}`, sftTemplatePath, []string{"line 2", `field "messages": message 0: no "role"`}},
		{"mixed formats", good + "\n" + `{"prompt": "a", "completion": "b"}`, sftTemplatePath,
			[]string{"line 2: the row is prompt-completion but the first row is conversational language modeling (messages)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".jsonl")
			if err := os.WriteFile(file, []byte(c.data+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			_, errOut, code := runGotpu(t, nil, "train", "--model_name_or_path", model, "--train_file", file,
				"--chat_template_path", c.template, "--assistant_only_loss", "--max_steps", "1", "--device", "go",
				"--output_dir", filepath.Join(dir, "out"))
			if code == 0 {
				t.Fatal("gotpu train succeeded")
			}
			for _, w := range append(c.want, file) {
				if c.name == "no generation blocks" && w == file {
					continue
				}
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
		})
	}
	// An SFT-only argument on run_clm's plain text is refused rather than ignored.
	txt := filepath.Join(dir, "plain.txt")
	os.WriteFile(txt, []byte("hello\n"), 0o644)
	_, errOut, code := runGotpu(t, nil, "train", "--model_name_or_path", model, "--train_file", txt, "--eos_token", "<|im_end|>",
		"--max_steps", "1", "--device", "go", "--output_dir", filepath.Join(dir, "out2"))
	if code != 2 || !strings.Contains(errOut, "--eos_token: SFT data preparation arguments") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}
