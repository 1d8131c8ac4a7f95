package trainer_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/models/peft"
	"github.com/gotpu/gotpu/trainer"
)

// TestPeftConfigTargets: lora_target_modules as TRL hands it to PEFT — a lone "all-linear" (any
// case) is the string form PEFT expands, other names a list, "all-linear" beside other names an
// error naming the flag — and an adapter's targets conflict with the flag unless they are the
// same (the string "all-linear" on both sides, in any case, or the same set of names).
func TestPeftConfigTargets(t *testing.T) {
	on := true
	args := func(targets ...string) trainer.ModelDataArguments {
		return trainer.ModelDataArguments{UsePeft: &on, LoraTargetModules: targets}
	}
	for _, c := range []struct {
		flags []string
		list  []string
		str   string
		err   string
	}{
		{[]string{"all-linear"}, nil, "all-linear", ""},
		{[]string{"ALL-LINEAR"}, nil, "ALL-LINEAR", ""},
		{[]string{"q_proj,v_proj"}, []string{"q_proj", "v_proj"}, "", ""},
		{[]string{"c_attn"}, []string{"c_attn"}, "", ""},
		{[]string{"c_attn,all-linear"}, nil, "", "--lora_target_modules"},
		{[]string{"c_attn", "all-linear"}, nil, "", "--lora_target_modules"},
	} {
		cfg, use, err := args(c.flags...).PeftConfig()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "as a list entry") {
				t.Errorf("%q: %v, want an error naming %s", c.flags, err, c.err)
			}
			continue
		}
		if err != nil || !use || !slices.Equal(cfg.TargetModules, c.list) || cfg.TargetModulesRegex != c.str {
			t.Errorf("%q: list %q, string %q, use %v, err %v; want %q, %q", c.flags, cfg.TargetModules, cfg.TargetModulesRegex, use, err, c.list, c.str)
		}
	}

	expanded := peft.DefaultLoraConfig()
	expanded.TargetModules = []string{"transformer.h.0.attn.c_attn", "transformer.h.1.attn.c_attn"}
	shorthand := peft.DefaultLoraConfig()
	shorthand.TargetModulesRegex = "All-Linear"
	for _, c := range []struct {
		flag    string
		adapter peft.LoraConfig
		want    string // "" no conflict
	}{
		{"all-linear", shorthand, ""},
		{"all-linear", expanded, "--lora_target_modules all-linear: the adapter in dir has transformer.h.0.attn.c_attn,transformer.h.1.attn.c_attn"},
		{"transformer.h.1.attn.c_attn,transformer.h.0.attn.c_attn", expanded, ""},
		{"c_attn", shorthand, "--lora_target_modules c_attn: the adapter in dir has All-Linear"},
	} {
		err := args(c.flag).AdapterConflicts(c.adapter, "dir")
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("flag %s against %q/%q: %v, want %q", c.flag, c.adapter.TargetModules, c.adapter.TargetModulesRegex, err, c.want)
		}
	}
}
