package peft_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
)

func fixtureConfig(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(modelsDir(t), "lora", name, peft.ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func keysOf(t testing.TB, b []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestConfigRoundTrip: PEFT's adapter_config.json (written by PEFT's save_pretrained rule: sorted
// keys, two-space indent, no trailing newline, Python float reprs) reads and writes back byte for
// byte, and a new config writes exactly the keys PEFT writes.
func TestConfigRoundTrip(t *testing.T) {
	for _, f := range loraFixtures {
		raw := fixtureConfig(t, f.name)
		cfg, err := peft.ParseConfig(raw, f.name)
		if err != nil {
			t.Fatal(err)
		}
		out, err := cfg.JSON()
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != string(raw) {
			t.Errorf("%s: written back differently:\n%s\nwant\n%s", f.name, out, raw)
		}
		fresh, err := peft.DefaultLoraConfig().JSON()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := keysOf(t, fresh), keysOf(t, raw); !slices.Equal(got, want) {
			t.Errorf("a new config writes keys %v, PEFT writes %v", got, want)
		}
	}
	cfg, _ := peft.ParseConfig(fixtureConfig(t, "gpt2-lora-tiny"), "x")
	if cfg.R != 4 || cfg.LoraAlpha != 8 || cfg.Scaling() != 2 || !cfg.FanInFanOut || !slices.Equal(cfg.TargetModules, []string{"c_attn"}) {
		t.Errorf("parsed %+v", cfg)
	}
	cfg.UseRSLoRA = true
	if s := cfg.Scaling(); s != 4 { // 8 / sqrt(4)
		t.Errorf("rsLoRA scaling %v, want 4", s)
	}
}

// TestConfigOlderAndNewerPEFT: missing keys take PEFT's defaults (older versions write fewer),
// unknown keys are kept and written back; a config from PEFT 0.6 with only the basics loads.
func TestConfigOlderAndNewerPEFT(t *testing.T) {
	old := `{"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 8, "lora_alpha": 32, "lora_dropout": 0.05,
		"target_modules": ["q_proj", "v_proj"], "bias": "none", "fan_in_fan_out": false, "inference_mode": true,
		"future_field": {"x": 1}}`
	cfg, err := peft.ParseConfig([]byte(old), "old.json")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.R != 8 || cfg.LoraAlpha != 32 || cfg.LoraDropout != 0.05 || cfg.InitLoraWeights != true {
		t.Errorf("parsed %+v", cfg)
	}
	out, _ := cfg.JSON()
	if !strings.Contains(string(out), `"future_field": {`) || !strings.Contains(string(out), `"lora_dropout": 0.05,`) {
		t.Errorf("written:\n%s", out)
	}
}

// TestConfigErrors: bad adapter configs fail naming the key.
func TestConfigErrors(t *testing.T) {
	base := map[string]any{}
	if err := json.Unmarshal(fixtureConfig(t, "llama-lora-tiny"), &base); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key  string
		val  any
		want string
	}{
		{"peft_type", "PREFIX_TUNING", `peft_type: "PREFIX_TUNING" is not supported`},
		{"peft_type", nil, "peft_type: missing"},
		{"r", 0, "r: 0 must be positive"},
		{"r", -3, "r: -3 must be positive"},
		{"r", 1 << 20, "r: 1048576 is above"},
		{"r", "eight", "r: cannot unmarshal string"},
		{"lora_dropout", 1.0, "lora_dropout: 1 is not in [0, 1)"},
		{"bias", "all", `bias: "all" is not supported`},
		{"use_dora", true, "use_dora: DoRA is not supported"},
		{"modules_to_save", []string{"score"}, "modules_to_save"},
		{"layers_to_transform", []int{0}, "layers_to_transform"},
		{"rank_pattern", map[string]int{"q_proj": 2}, "rank_pattern"},
		{"init_lora_weights", "pissa", `init_lora_weights: "pissa" is not supported`},
		{"target_modules", 3, "target_modules: 3 is neither"},
		{"target_modules", "([", "target_modules: regular expression"},
		{"target_parameters", []string{"experts.weight"}, "target_parameters"},
		{"trainable_token_indices", []int{1}, "trainable_token_indices"},
	} {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		if c.val == nil {
			delete(m, c.key)
		} else {
			m[c.key] = c.val
		}
		b, _ := json.Marshal(m)
		_, err := peft.ParseConfig(b, "adapter/adapter_config.json")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "adapter/adapter_config.json") {
			t.Errorf("%s=%v: error %v, want one naming the file and containing %q", c.key, c.val, err, c.want)
		}
	}
	for _, bad := range []string{"", "[]", "null", `{"peft_type": "LORA", "r": 8`, strings.Repeat(" ", peft.MaxConfigBytes+1)} {
		if _, err := peft.ParseConfig([]byte(bad), "x.json"); err == nil {
			t.Errorf("%q: accepted", bad[:min(len(bad), 40)])
		}
	}
}

// fuzzSeeds are FuzzParseConfig's seeds: one small config per kind of value the parser takes
// (a list or an expression for target_modules and exclude_modules, each init_lora_weights form,
// kept and refused unknown keys, nulls). They are small on purpose: the fuzzer minimizes every
// input that finds new coverage, trying candidates in number growing with the square of its
// length for up to a minute, and mutations of the fixtures' 1 KB configs kept it minimizing for
// 36-42 s of a 60 s run (0 execs/s shown, 15-42 new inputs found; with -fuzzminimizetime 100x,
// 210 in 30 s). TestConfigRoundTrip reads the fixtures themselves.
var fuzzSeeds = []string{
	`{"peft_type":"LORA","r":4,"lora_alpha":8,"target_modules":["c_attn"],"fan_in_fan_out":true}`,
	`{"peft_type":"LORA","r":1,"target_modules":"transformer\\.h\\.0\\..*"}`,
	`{"peft_type":"LORA","r":2,"lora_alpha":1.5,"init_lora_weights":"gaussian","target_modules":"all-linear","exclude_modules":["h.1.attn.c_attn"]}`,
	`{"peft_type":"LORA","r":8,"use_rslora":true,"lora_dropout":0.05,"bias":"none","task_type":"CAUSAL_LM"}`,
	`{"peft_type":"LORA","r":8,"exclude_modules":".*\\.0\\..*","revision":"main","base_model_name_or_path":"gpt2"}`,
	`{"peft_type":"LORA","r":8,"future":{"x":[1,null]},"layers_pattern":null,"use_qalora":false}`,
	`{"peft_type":"LORA","r":3,"init_lora_weights":false,"peft_version":"0.6.0","inference_mode":true,"rank_pattern":{}}`,
}

// FuzzParseConfig: no input panics ParseConfig, nor Targets on a real model (gpt2-tiny, loaded
// once per fuzzing process) for an accepted config; an accepted config writes JSON that parses
// back to the same config and writes identically again.
func FuzzParseConfig(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	base, err := models.Load(context.Background(), openGo(f), filepath.Join(modelsDir(f), "gpt2-tiny"), models.LoadOptions{})
	if err != nil {
		f.Fatal(err)
	}
	adaptable := base.(models.Adaptable)
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := peft.ParseConfig(b, "f.json")
		if err != nil {
			return
		}
		if ls, err := peft.Targets(adaptable, cfg); err == nil && len(ls) == 0 {
			t.Fatalf("Targets selected no layer and reported no error")
		}
		out, err := cfg.JSON()
		if err != nil {
			t.Fatalf("accepted config does not write: %v", err)
		}
		again, err := peft.ParseConfig(out, "again.json")
		if err != nil {
			t.Fatalf("written config does not parse: %v\n%s", err, out)
		}
		out2, _ := again.JSON()
		if string(out) != string(out2) {
			t.Fatalf("not stable:\n%s\n%s", out, out2)
		}
	})
}
