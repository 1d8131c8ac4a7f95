package trainer

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data/sft"
)

// TestSFTFlagsDefaults: with no SFT flag, nothing asks for SFT and the config is TRL's defaults.
func TestSFTFlagsDefaults(t *testing.T) {
	_, md, fs, err := parseFlags(t)
	if err != nil {
		t.Fatal(err)
	}
	if got := md.SFTRequested(); got != nil {
		t.Fatalf("SFTRequested %v", got)
	}
	c, err := md.SFTConfig()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, sft.DefaultConfig()) || c.MaxLength != 1024 || c.DatasetTextField != "text" || c.PackingStrategy != "bfd" {
		t.Fatalf("config %+v", c)
	}
	for name := range sftHelp {
		if fl := fs.Lookup(name); fl == nil || !strings.HasPrefix(fl.Usage, "TRL SFT") {
			t.Errorf("--%s: %v", name, fl)
		}
	}
}

// TestSFTFlags: every SFT flag reaches the config; SFT-only ones are reported as asking for SFT.
func TestSFTFlags(t *testing.T) {
	_, md, _, err := parseFlags(t, "--dataset_text_field", "body", "--max_length", "64", "--packing", "--packing_strategy", "bfd-requeue",
		"--padding_free", "True", "--completion_only_loss", "false", "--assistant_only_loss", "--eos_token", "<|im_end|>",
		"--pad_token", "<|endoftext|>", "--chat_template_path", "t.jinja")
	if err != nil {
		t.Fatal(err)
	}
	if got := md.SFTRequested(); !slices.Equal(got, SFTOnlyFlags) {
		t.Fatalf("SFTRequested %v", got)
	}
	c, err := md.SFTConfig()
	if err != nil {
		t.Fatal(err)
	}
	off := false
	want := sft.Config{DatasetTextField: "body", MaxLength: 64, Packing: true, PackingStrategy: "bfd_split", PaddingFree: true,
		CompletionOnlyLoss: &off, AssistantOnlyLoss: true, EOSToken: "<|im_end|>", PadToken: "<|endoftext|>", ChatTemplatePath: "t.jinja"}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("config\n got %+v\nwant %+v", c, want)
	}
}

// TestSFTFlagsInvalid: validation names the flag.
func TestSFTFlagsInvalid(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--packing_strategy", "ffd"}, `--packing_strategy: "ffd" is not one of bfd, bfd_split, wrapped`},
		{[]string{"--packing", "--max_length", "0"}, "--max_length: packing needs a row length"},
		{[]string{"--max_length", "-3"}, "--max_length: -3 is negative"},
		{[]string{"--padding_free"}, "--padding_free: without packing, max_length (1024) is not enforced"},
		{[]string{"--dataset_text_field", ""}, "--dataset_text_field: empty"},
	} {
		_, md, _, err := parseFlags(t, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := md.SFTConfig(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
}

// TestSFTArgumentsJSON: an argument file with SFTConfig keys decodes them (no longer refused as
// foreign); max_length null is TRL's None, no truncation.
func TestSFTArgumentsJSON(t *testing.T) {
	_, md, err := ParseTrainingArgumentsJSON([]byte(`{"output_dir": "o", "max_length": null, "packing": false,
		"assistant_only_loss": true, "dataset_text_field": "content", "chat_template_path": "x/tokenizer_config.json"}`), "args.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := md.SFTConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxLength != 0 || !c.AssistantOnlyLoss || c.DatasetTextField != "content" || c.ChatTemplatePath != "x/tokenizer_config.json" {
		t.Fatalf("config %+v", c)
	}
	if got := md.SFTRequested(); !slices.Equal(got, []string{"packing", "assistant_only_loss", "dataset_text_field", "max_length"}) {
		t.Fatalf("SFTRequested %v", got)
	}
	_, _, err = ParseTrainingArgumentsJSON([]byte(`{"output_dir": "o", "max_length": "long"}`), "args.json")
	if err == nil || !strings.Contains(err.Error(), "max_length") {
		t.Fatalf("error %v", err)
	}
	// What SFTConfig keys gotpu does not implement stay refused as TRL's.
	_, _, err = ParseTrainingArgumentsJSON([]byte(`{"output_dir": "o", "eval_packing": true}`), "args.json")
	if err == nil || !strings.Contains(err.Error(), "TRL SFTConfig") {
		t.Fatalf("error %v", err)
	}
}
