package peft_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
)

// gpt2TinyLinear are gpt2-tiny's linear layers (two blocks of Conv1D), in state-dict order: what
// "all-linear" selects on it (the tied head is no module of its own).
var gpt2TinyLinear = []string{
	"transformer.h.0.attn.c_attn", "transformer.h.0.attn.c_proj", "transformer.h.0.mlp.c_fc", "transformer.h.0.mlp.c_proj",
	"transformer.h.1.attn.c_attn", "transformer.h.1.attn.c_proj", "transformer.h.1.mlp.c_fc", "transformer.h.1.mlp.c_proj",
}

func loadGPT2Tiny(t *testing.T) models.Model {
	t.Helper()
	m, err := models.Load(context.Background(), openGo(t), filepath.Join(modelsDir(t), "gpt2-tiny"), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAllLinearStringForm: adapter_config.json's target_modules "all-linear" — a JSON string,
// in any case, as PEFT's _maybe_include_all_linear_layers compares it (str.lower()) — selects
// every linear layer, where gotpu used to read the string as a regular expression that matched
// no module name; a new adapter on it saves the expanded names as PEFT does (a sorted list, no
// "all-linear" left), which read back as that list. A list ["all-linear"], which PEFT reads as a
// module's name and fails on, is refused naming the file and the field instead of silently
// meaning all-linear.
func TestAllLinearStringForm(t *testing.T) {
	base := loadGPT2Tiny(t)
	for _, spelling := range []string{"all-linear", "ALL-LINEAR", "All-Linear"} {
		raw := `{"peft_type": "LORA", "r": 2, "lora_alpha": 4, "target_modules": "` + spelling + `"}`
		cfg, err := peft.ParseConfig([]byte(raw), "adapter_config.json")
		if err != nil {
			t.Fatalf("%s: %v", spelling, err)
		}
		if !cfg.TargetsAllLinear() {
			t.Errorf("%s: not read as all-linear (list %q, string %q)", spelling, cfg.TargetModules, cfg.TargetModulesRegex)
		}
		got, err := targetNames(t, base, cfg)
		if err != nil || !slices.Equal(got, gpt2TinyLinear) {
			t.Errorf("%s: targets %v (%v), want every linear layer %v", spelling, got, err, gpt2TinyLinear)
		}
		// The string form is kept as written until it is expanded.
		out, err := cfg.JSON()
		if err != nil {
			t.Fatal(err)
		}
		var written struct {
			TargetModules any `json:"target_modules"`
		}
		if err := json.Unmarshal(out, &written); err != nil || written.TargetModules != spelling {
			t.Errorf("%s: an unexpanded config writes target_modules %v (%v)", spelling, written.TargetModules, err)
		}
	}

	// A new adapter saves the expanded names, as PEFT does, and they read back as a list.
	cfg := peft.DefaultLoraConfig()
	cfg.TargetModulesRegex = peft.AllLinear
	m, err := peft.New(context.Background(), nil, loadGPT2Tiny(t), cfg, peft.Options{Seed: 1}) // the model's runtime
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ad, _ := peft.Of(m)
	if err := ad.Save(dir, models.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, peft.ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	var saved struct {
		TargetModules []string `json:"target_modules"`
	}
	if err := json.Unmarshal(raw, &saved); err != nil {
		t.Fatalf("saved target_modules is not a list of names: %v\n%s", err, raw)
	}
	want := slices.Sorted(slices.Values(gpt2TinyLinear))
	if !slices.Equal(saved.TargetModules, want) {
		t.Errorf("saved target_modules %v, want the expanded names %v", saved.TargetModules, want)
	}
	back, err := peft.ReadConfig(filepath.Join(dir, peft.ConfigFile))
	if err != nil || back.TargetsAllLinear() || !slices.Equal(back.TargetModules, want) {
		t.Errorf("the saved config reads back as list %v, string %q (%v)", back.TargetModules, back.TargetModulesRegex, err)
	}
	if _, err := peft.Load(context.Background(), nil, loadGPT2Tiny(t), dir, peft.Options{}); err != nil {
		t.Errorf("loading the saved all-linear adapter: %v", err)
	}

	// A list holding "all-linear" is a module name to PEFT: refused, naming file and field.
	for _, list := range []string{`["all-linear"]`, `["ALL-LINEAR"]`, `["c_attn", "all-linear"]`} {
		raw := `{"peft_type": "LORA", "r": 2, "target_modules": ` + list + `}`
		_, err := peft.ParseConfig([]byte(raw), "dir/adapter_config.json")
		if err == nil {
			t.Errorf("target_modules %s accepted", list)
			continue
		}
		for _, part := range []string{"dir/adapter_config.json", "target_modules", "as a list entry names a module", `"target_modules": "all-linear"`} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("target_modules %s: the error does not say %q: %v", list, part, err)
			}
		}
	}
}

// TestCommandLineTargets: a --lora_target_modules naming only "all-linear" (any case) is the
// string form PEFT expands, as TRL's ModelConfig hands a one-element list to PEFT; other names
// stay a list, and "all-linear" among other names is refused by Validate.
func TestCommandLineTargets(t *testing.T) {
	for _, c := range []struct {
		names    []string
		list     []string
		str      string
		validate string // "" valid, else part of Validate's error
	}{
		{[]string{"all-linear"}, nil, "all-linear", ""},
		{[]string{"All-Linear"}, nil, "All-Linear", ""},
		{[]string{"c_attn"}, []string{"c_attn"}, "", ""},
		{[]string{"q_proj", "v_proj"}, []string{"q_proj", "v_proj"}, "", ""},
		{[]string{"q_proj", "all-linear"}, []string{"q_proj", "all-linear"}, "", "as a list entry names a module"},
		{nil, nil, "", ""},
	} {
		list, str := peft.CommandLineTargets(c.names)
		if !slices.Equal(list, c.list) || str != c.str {
			t.Errorf("%q: list %q, string %q; want %q, %q", c.names, list, str, c.list, c.str)
		}
		cfg := peft.DefaultLoraConfig()
		cfg.TargetModules, cfg.TargetModulesRegex = list, str
		err := cfg.Validate()
		if c.validate == "" && err != nil || c.validate != "" && (err == nil || !strings.Contains(err.Error(), c.validate)) {
			t.Errorf("%q: Validate: %v, want %q", c.names, err, c.validate)
		}
	}
}
