package peft_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
)

// deepNesting is the depth of groups that RE2 (Go's regexp/syntax, maximum nesting depth 1000)
// accepts bare but refuses once target_modules is anchored as re.fullmatch, "^(?:" + expr + ")$",
// which adds a level: the expression that passed validation and then panicked in Targets.
const deepNesting = 999

func deepRegex() string {
	return strings.Repeat("(", deepNesting) + "a" + strings.Repeat(")", deepNesting)
}

// maxErrorBytes bounds the error text of a refused expression: it quotes the expression
// shortened, never all of it.
const maxErrorBytes = 600

// hostileConfig is the gpt2-lora-tiny fixture's adapter_config.json with key set to v.
func hostileConfig(t *testing.T, key string, v any) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(fixtureConfig(t, "gpt2-lora-tiny"), &m); err != nil {
		t.Fatal(err)
	}
	m[key] = v
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRegexDepthLimit: a target_modules or exclude_modules expression nested just under RE2's
// depth limit compiles bare but not anchored; it is refused by ParseConfig and Validate (naming
// the file and the field), and Targets returns the same error instead of panicking.
func TestRegexDepthLimit(t *testing.T) {
	deep := deepRegex()
	// The premise, so that this test keeps testing the edge if RE2's limit ever moves.
	if _, err := regexp.Compile(deep); err != nil {
		t.Fatalf("the bare expression (depth %d) does not compile: %v", deepNesting, err)
	}
	if _, err := regexp.Compile(`^(?:` + deep + `)$`); err == nil {
		t.Fatalf("the anchored expression (depth %d) compiles: the edge moved", deepNesting+1)
	}
	for _, key := range []string{"target_modules", "exclude_modules"} {
		_, err := peft.ParseConfig(hostileConfig(t, key, deep), "adapter/adapter_config.json")
		if err == nil {
			t.Errorf("%s nested %d deep: accepted", key, deepNesting)
			continue
		}
		msg := err.Error()
		for _, want := range []string{"adapter/adapter_config.json: ", "LoraConfig." + key + ": ", "nests too deeply"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: error %q lacks %q", key, msg, want)
			}
		}
		if len(msg) > maxErrorBytes {
			t.Errorf("%s: the error is %d bytes long: %.200s…", key, len(msg), msg)
		}
	}

	rt := openGo(t)
	m := tinyLlama(t, rt, 1)
	for _, c := range []struct {
		field string
		set   func(*peft.LoraConfig)
	}{
		{"target_modules", func(c *peft.LoraConfig) { c.TargetModulesRegex = deep }},
		{"exclude_modules", func(c *peft.LoraConfig) { c.ExcludeModulesRegex = deep }},
	} {
		cfg := peft.DefaultLoraConfig()
		c.set(&cfg)
		if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "LoraConfig."+c.field+": ") {
			t.Errorf("Validate with %s nested %d deep: %v", c.field, deepNesting, err)
		}
		// Targets is exported: a config that never went through Validate must not panic it.
		err := func() (err error) {
			defer func() {
				if v := recover(); v != nil {
					t.Errorf("Targets with %s nested %d deep panicked: %.200v", c.field, deepNesting, v)
				}
			}()
			_, err = peft.Targets(m.(models.Adaptable), cfg)
			return err
		}()
		if err == nil || !strings.Contains(err.Error(), "LoraConfig."+c.field+": ") || !strings.Contains(err.Error(), "nests too deeply") {
			t.Errorf("Targets with %s nested %d deep: error %v", c.field, deepNesting, err)
		}
	}
}

// TestLoadRefusesDeepRegex: peft.Load of an adapter directory whose adapter_config.json holds the
// expression fails naming the file and field, where it used to panic after the config was read.
func TestLoadRefusesDeepRegex(t *testing.T) {
	rt := openGo(t)
	base, err := models.Load(context.Background(), rt, filepath.Join(modelsDir(t), "gpt2-tiny"), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	weights, err := os.ReadFile(filepath.Join(modelsDir(t), "lora", "gpt2-lora-tiny", peft.WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, peft.WeightsFile), weights, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, peft.ConfigFile), hostileConfig(t, "target_modules", deepRegex()), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = func() (m models.Model, err error) {
		defer func() {
			if v := recover(); v != nil {
				t.Fatalf("peft.Load panicked: %.200v", v)
			}
		}()
		return peft.Load(context.Background(), rt, base, dir, peft.Options{})
	}()
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, peft.ConfigFile)+": LoraConfig.target_modules: ") {
		t.Fatalf("peft.Load: %v; want an error naming %s and target_modules", err, peft.ConfigFile)
	}
	t.Logf("peft.Load: %v", err)
}

// TestRegexRules: the anchoring keeps PEFT's meaning (an expression Python's re refuses, such as
// an unbalanced ")" that would close the anchoring group, is refused), and an expression above
// MaxRegexBytes is refused naming the limit, with a short error.
func TestRegexRules(t *testing.T) {
	for _, c := range []struct {
		expr, want string
	}{
		{`q_proj)|(k_proj`, "unexpected )"}, // anchored it would compile: "^(?:q_proj)|(k_proj)$"
		{`(q_proj`, "missing closing )"},
		{strings.Repeat("x*", peft.MaxRegexBytes/2+1), "above gotpu's limit of 16384 bytes"},
		{strings.Repeat("x{1000}", 1000), "compiles to more than gotpu's limit of 4096 instructions"},
		{strings.Repeat("(?:.?){1000}", 3), "compiles to more than gotpu's limit of 4096 instructions"},
	} {
		cfg := peft.DefaultLoraConfig()
		cfg.TargetModulesRegex = c.expr
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), "LoraConfig.target_modules: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.40q: %v; want an error containing %q", c.expr, err, c.want)
		} else if len(err.Error()) > maxErrorBytes {
			t.Errorf("%.40q: the error is %d bytes long", c.expr, len(err.Error()))
		}
	}
	layers := make([]string, 80)
	for i := range layers {
		layers[i] = strconv.Itoa(i)
	}
	for _, expr := range []string{
		`.*\.(q_proj|v_proj)`,
		`model\.layers\.(` + strings.Join(layers, "|") + `)\.(self_attn\.(q|k|v|o)_proj|mlp\.(gate|up|down)_proj)`,
		`model\.layers\.\d{1,3}\.self_attn\.[qkvo]_proj`,
	} {
		cfg := peft.DefaultLoraConfig()
		cfg.TargetModulesRegex = expr
		if err := cfg.Validate(); err != nil {
			t.Errorf("an ordinary expression: %v", err)
		}
	}
}
