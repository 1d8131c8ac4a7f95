package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/trainer"
)

// imEnd is <|im_end|> in sftModelDir's byte-level tokenizer (sftSpecials from id 256).
const imEnd = 258

// tokenizerModelDir is sftModelDir with the Qwen3 training template's tokenizer_config.json
// (the template inside it, transformers' older convention; eos_token <|im_end|>) and a
// generation_config.json stopping at <|im_end|>: a complete model directory to fine-tune.
func tokenizerModelDir(t *testing.T) string {
	t.Helper()
	dir := sftModelDir(t)
	copyTestFile(t, sftTemplatePath, filepath.Join(dir, "tokenizer_config.json"))
	writeFile(t, filepath.Join(dir, "generation_config.json"), `{"eos_token_id": 258, "max_new_tokens": 6}`+"\n")
	return dir
}

// decodeReply is tokenizer.decode(ids, skip_special_tokens=True) of the generated ids less a
// final stop token, computed here with the source tokenizer.
func decodeReply(t *testing.T, tok tokenizer.Tokenizer, ids []int, stops []int) string {
	t.Helper()
	if n := len(ids); n > 0 && slices.Contains(stops, ids[n-1]) {
		ids = ids[:n-1]
	}
	u := make([]uint32, len(ids))
	for i, id := range ids {
		u[i] = uint32(id)
	}
	s, err := tok.Decode(u, true)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTrainSavesTokenizer: `gotpu train` on conversations (the SFT path) saves the tokenizer the
// run used, as HF's Trainer saves processing_class, into output_dir and every checkpoint-N:
// tokenizer.json, tokenizer_config.json (holding the chat template, as the source did) and
// generation_config.json, each byte-equal to the source's. Then `gotpu generate` works on the
// output and on a checkpoint with no --tokenizer: --chat --prompt prints the reply, --prompt
// prints the continuation, each equal to decoding the generated ids with the source tokenizer.
// A checkpoint holding the tokenizer resumes exactly: the losses of steps 21-30 resumed
// from checkpoint-20 equal those of the uninterrupted run.
func TestTrainSavesTokenizer(t *testing.T) {
	model := tokenizerModelDir(t)
	dir := t.TempDir()
	trainFile := filepath.Join(dir, "train.jsonl")
	sftConversations(t, trainFile, sftWords[:8])
	out := filepath.Join(dir, "out")
	base := []string{"train", "--model_name_or_path", model, "--train_file", trainFile,
		"--per_device_train_batch_size", "2", "--learning_rate", "3e-3", "--warmup_steps", "0",
		"--save_strategy", "steps", "--save_steps", "10", "--logging_steps", "1", "--device", "go"}
	if _, errOut, code := runGotpu(t, nil, append(base, "--max_steps", "30", "--output_dir", out)...); code != 0 {
		t.Fatalf("gotpu train: exit %d\n%s", code, errOut)
	}
	for _, d := range []string{out, filepath.Join(out, "checkpoint-10"), filepath.Join(out, "checkpoint-20"), filepath.Join(out, "checkpoint-30")} {
		for _, f := range []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
			want, err := os.ReadFile(filepath.Join(model, f))
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(d, f))
			if err != nil {
				t.Errorf("%s: %v", d, err)
				continue
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s/%s: %d bytes, not the source's %d", d, f, len(got), len(want))
			}
		}
	}
	t.Logf("output_dir and checkpoint-10/20/30 hold tokenizer.json, tokenizer_config.json, generation_config.json byte-equal to the source")

	tok, err := tokenizer.FromFile(model)
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	for _, d := range []string{out, filepath.Join(out, "checkpoint-20")} {
		// --chat: the template comes from the saved tokenizer_config.json.
		stdout, errOut, code := runGotpu(t, nil, "generate", "--device", "go", "--model", d, "--chat", "--prompt", "c", "--max_new_tokens", "8", "--json")
		if code != 0 {
			t.Fatalf("generate --chat on %s: exit %d\n%s", d, code, errOut)
		}
		var cr chatResult
		if err := json.Unmarshal([]byte(stdout), &cr); err != nil {
			t.Fatalf("%v: %q", err, stdout)
		}
		if !strings.HasSuffix(cr.Prompt, "<|im_start|>assistant\n") || !slices.Contains(cr.EOSTokenIDs, imEnd) {
			t.Errorf("%s: rendered prompt %q, stops %v: want Qwen3's generation prompt and <|im_end|> among the stops", d, cr.Prompt, cr.EOSTokenIDs)
		}
		if want := decodeReply(t, tok, cr.GeneratedIDs, cr.EOSTokenIDs); cr.Reply != want {
			t.Errorf("%s: reply %q, decode(generated_ids) %q", d, cr.Reply, want)
		}
		t.Logf("generate --chat --model %s: generated_ids %v reply %q", filepath.Base(d), cr.GeneratedIDs, cr.Reply)

		// --prompt: plain text, the text output equal to the JSON's.
		stdout, errOut, code = runGotpu(t, nil, "generate", "--device", "go", "--model", d, "--prompt", "<|im_start|>user\nc<|im_end|>\n<|im_start|>assistant\n", "--json")
		if code != 0 {
			t.Fatalf("generate --prompt on %s: exit %d\n%s", d, code, errOut)
		}
		var tr textResult
		if err := json.Unmarshal([]byte(stdout), &tr); err != nil {
			t.Fatalf("%v: %q", err, stdout)
		}
		if tr.PromptIDs[0] != 257 || len(tr.GeneratedIDs) == 0 || len(tr.GeneratedIDs) > 6 {
			t.Errorf("%s: prompt_ids %v generated_ids %v: want <|im_start|> (257) first and at most generation_config.json's 6 new tokens", d, tr.PromptIDs, tr.GeneratedIDs)
		}
		if want := decodeReply(t, tok, tr.GeneratedIDs, []int{imEnd}); tr.Text != want {
			t.Errorf("%s: text %q, decode(generated_ids) %q", d, tr.Text, want)
		}
		plain, errOut, code := runGotpu(t, nil, "generate", "--device", "go", "--model", d, "--prompt", "<|im_start|>user\nc<|im_end|>\n<|im_start|>assistant\n")
		if code != 0 || plain != tr.Text+"\n" {
			t.Errorf("%s: text output %q (exit %d, %s), --json's text %q", d, plain, code, errOut, tr.Text)
		}
		t.Logf("generate --prompt --model %s: prompt_ids %v generated_ids %v text %q", filepath.Base(d), tr.PromptIDs, tr.GeneratedIDs, tr.Text)
	}

	// Resume from checkpoint-20 (tokenizer files in it) into a new output_dir: steps 21-30 as
	// the uninterrupted run logged them.
	resumed := filepath.Join(dir, "resumed")
	if _, errOut, code := runGotpu(t, nil, append(base, "--max_steps", "30", "--output_dir", resumed,
		"--resume_from_checkpoint", filepath.Join(out, "checkpoint-20"))...); code != 0 {
		t.Fatalf("resuming from checkpoint-20: exit %d\n%s", code, errOut)
	}
	want, got := stepLosses(t, out), stepLosses(t, resumed)
	for s := 21; s <= 30; s++ {
		if got[s] != want[s] || want[s] == 0 {
			t.Errorf("step %d: resumed loss %v, uninterrupted %v", s, got[s], want[s])
		}
	}
	t.Logf("steps 21, 30: uninterrupted losses %v %v, resumed from checkpoint-20 %v %v", want[21], want[30], got[21], got[30])
}

// stepLosses maps step to logged loss in a run's trainer_state.json.
func stepLosses(t *testing.T, out string) map[int]float64 {
	t.Helper()
	st, err := trainer.LoadTrainerState(filepath.Join(out, "trainer_state.json"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[int]float64{}
	for _, e := range st.LogHistory {
		l, ok := e.Loss()
		s, sok := e.Int("step")
		if ok && sok {
			m[int(s)] = l
		}
	}
	return m
}

// TestTrainLoRASavesTokenizer: an SFT run with --use_peft and --chat_template_path FILE.jinja on
// a model whose tokenizer has no template saves, beside the adapter in output_dir and in each
// checkpoint-N, the tokenizer.json (byte-equal) and the template the run used as
// chat_template.jinja (TRL sets processing_class.chat_template from a .jinja chat_template_path,
// and Trainer saves processing_class with the adapter). `gotpu generate --adapter_name_or_path
// OUT --chat` then takes the tokenizer and template from the adapter directory, no other flag.
func TestTrainLoRASavesTokenizer(t *testing.T) {
	model := sftModelDir(t) // tokenizer.json only
	dir := t.TempDir()
	var cfg struct {
		ChatTemplate string `json:"chat_template"`
	}
	b, err := os.ReadFile(sftTemplatePath)
	if err != nil || json.Unmarshal(b, &cfg) != nil || cfg.ChatTemplate == "" {
		t.Fatalf("%s: %v", sftTemplatePath, err)
	}
	jinja := writeFile(t, filepath.Join(dir, "qwen3_training.jinja"), cfg.ChatTemplate)
	trainFile := filepath.Join(dir, "train.jsonl")
	sftConversations(t, trainFile, sftWords[:4])
	out := filepath.Join(dir, "out")
	_, errOut, code := runGotpu(t, nil, "train", "--model_name_or_path", model, "--train_file", trainFile,
		"--chat_template_path", jinja, "--eos_token", "<|im_end|>", "--use_peft", "--lora_r", "4", "--per_device_train_batch_size", "2",
		"--max_steps", "2", "--save_strategy", "steps", "--save_steps", "1", "--device", "go", "--output_dir", out)
	if code != 0 {
		t.Fatalf("gotpu train --use_peft: exit %d\n%s", code, errOut)
	}
	tj, _ := os.ReadFile(filepath.Join(model, "tokenizer.json"))
	for _, d := range []string{out, filepath.Join(out, "checkpoint-1"), filepath.Join(out, "checkpoint-2")} {
		for f, want := range map[string]string{"tokenizer.json": string(tj), "chat_template.jinja": cfg.ChatTemplate} {
			got, err := os.ReadFile(filepath.Join(d, f))
			if err != nil || string(got) != want {
				t.Errorf("%s/%s: %d bytes (%v), want %d", d, f, len(got), err, len(want))
			}
		}
		if _, err := os.Stat(filepath.Join(d, "adapter_config.json")); err != nil {
			t.Errorf("%s: no adapter: %v", d, err)
		}
	}
	stdout, errOut, code := runGotpu(t, nil, "generate", "--device", "go", "--model", model, "--adapter_name_or_path", out,
		"--chat", "--prompt", "b", "--max_new_tokens", "4", "--json")
	var cr chatResult
	if code != 0 || json.Unmarshal([]byte(stdout), &cr) != nil {
		t.Fatalf("generate --adapter_name_or_path OUT --chat: exit %d, stdout %q\n%s", code, stdout, errOut)
	}
	if !strings.HasSuffix(cr.Prompt, "<|im_start|>assistant\n") || !slices.Contains(cr.EOSTokenIDs, imEnd) {
		t.Errorf("prompt %q stops %v: want the saved template's generation prompt and <|im_end|>", cr.Prompt, cr.EOSTokenIDs)
	}
	t.Logf("adapter dir: %s", strings.TrimSpace(stdout))
}
