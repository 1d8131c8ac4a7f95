package trainer

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/internal/cli"
)

// writeFSDPConfig writes an fsdp_config file and returns its path.
func writeFSDPConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fsdp_config.json")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// jsonQuote quotes a string for embedding in a JSON test input.
func jsonQuote(s string) string { return string(appendPyString(nil, s)) }

// TestFSDPArgsOptionForms: every form HF's post-init takes for fsdp.
func TestFSDPArgsOptionForms(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{`"full_shard auto_wrap"`, []string{"full_shard", "auto_wrap"}},
		{`"  hybrid_shard\tauto_wrap "`, []string{"hybrid_shard", "auto_wrap"}},
		{`["hybrid_shard"]`, []string{"hybrid_shard"}},
		{`true`, []string{"full_shard"}},
		{`false`, []string{}}, {`null`, []string{}}, {`""`, []string{}}, {`[]`, []string{}},
	} {
		a, _, err := ParseTrainingArgumentsJSON([]byte(`{"fsdp": `+tt.in+`}`), "args.json")
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(a.FSDP, tt.want) {
			t.Errorf("%s: fsdp = %#v, want %#v", tt.in, a.FSDP, tt.want)
		}
	}
	for _, in := range []string{`5`, `{"full_shard": true}`, `["full_shard", 1]`} {
		_, _, err := ParseTrainingArgumentsJSON([]byte(`{"fsdp": `+in+`}`), "args.json")
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "args.json: trainer.TrainingArguments.fsdp: ") {
			t.Errorf("%s: err = %v", in, err)
		}
	}
}

// TestFSDPArgsRefusals: each refusal names the option or key (and the fsdp_config file).
func TestFSDPArgsRefusals(t *testing.T) {
	for _, tt := range []struct {
		name   string
		fsdp   string // JSON value of fsdp
		config string // content of the fsdp_config file ("" for none)
		want   string // substring of the error; FILE is replaced by the config file's path
		kind   error
	}{
		{"offload", `"full_shard offload"`, "",
			`fsdp: "offload" is not implemented by gotpu (supported: full_shard, hybrid_shard, auto_wrap)`, ErrUnsupportedArgument},
		{"shard_grad_op", `["shard_grad_op", "auto_wrap"]`, "", `fsdp: "shard_grad_op" is not implemented by gotpu`, ErrUnsupportedArgument},
		{"hybrid_shard_zero2", `"hybrid_shard_zero2"`, "", `fsdp: "hybrid_shard_zero2" is not implemented by gotpu`, ErrUnsupportedArgument},
		{"no_shard", `"no_shard"`, "", `"no_shard" is not implemented by gotpu (supported: full_shard, hybrid_shard, auto_wrap); plain data parallelism: leave fsdp empty`, ErrUnsupportedArgument},
		{"unknown option", `"full_shard,auto_wrap"`, "", `fsdp: "full_shard,auto_wrap" is not an FSDP option`, ErrInvalidArgument},
		{"full and hybrid", `"full_shard hybrid_shard"`, "", `"full_shard" and "hybrid_shard" are both given; choose one`, ErrInvalidArgument},
		{"auto_wrap alone", `"auto_wrap"`, "", `"auto_wrap" alone`, ErrInvalidArgument},
		{"unknown key", `"full_shard"`, `{"min_num_params": 0, "limit_all_gather": true}`,
			`fsdp_config: FILE: limit_all_gather: not an fsdp_config key gotpu knows`, ErrUnknownArgument},
		{"typo suggestion", `"full_shard"`, `{"limit_all_gather": true}`, `did you mean limit_all_gathers?`, ErrUnknownArgument},
		{"accelerate key", `"full_shard"`, `{"fsdp_sharding_strategy": "FULL_SHARD"}`,
			`FILE: sharding_strategy: an Accelerate FSDP config key, which HF's Trainer does not read from fsdp_config`, ErrUnknownArgument},
		{"activation checkpointing", `"full_shard"`, `{"activation_checkpointing": true}`,
			`fsdp_config: FILE: activation_checkpointing: true is not implemented by gotpu`, ErrUnsupportedArgument},
		{"grad ckpt without xla", `"full_shard"`, `{"xla_fsdp_grad_ckpt": true}`,
			`FILE: xla_fsdp_grad_ckpt: true has no effect without xla: true (HF ignores it then)`, ErrInvalidArgument},
		{"fsdp v1", `"full_shard"`, `{"xla": true}`, `FILE: xla: true with xla_fsdp_v2 false selects torch_xla's FSDPv1 wrapper`, ErrUnsupportedArgument},
		{"xla settings", `"full_shard"`, `{"xla": true, "xla_fsdp_v2": true, "xla_fsdp_settings": {"compute_dtype": "bfloat16"}}`,
			`FILE: xla_fsdp_settings: {"compute_dtype": "bfloat16"} is not implemented by gotpu`, ErrUnsupportedArgument},
		{"offload params", `"full_shard"`, `{"offload_params": true}`, `FILE: offload_params: true is not implemented`, ErrUnsupportedArgument},
		{"bad prefetch", `"full_shard"`, `{"backward_prefetch": "early"}`, `FILE: backward_prefetch: "early" is not backward_pre, backward_post or no_prefetch`, ErrInvalidArgument},
		{"bad version", `"full_shard"`, `{"fsdp_version": 3}`, `FILE: version: 3 is not 1 or 2`, ErrInvalidArgument},
		{"negative min", `"full_shard"`, `{"min_num_params": -1}`, `FILE: min_num_params: -1 is negative`, ErrInvalidArgument},
		{"mutually exclusive", `"full_shard auto_wrap"`, `{"fsdp_min_num_params": 1000, "fsdp_transformer_layer_cls_to_wrap": "GPT2Block"}`,
			`FILE: transformer_layer_cls_to_wrap: min_num_params 1000 and transformer_layer_cls_to_wrap are mutually exclusive`, ErrInvalidArgument},
		{"empty class list", `"full_shard"`, `{"transformer_layer_cls_to_wrap": []}`, `FILE: transformer_layer_cls_to_wrap: [] holds no class name`, ErrInvalidArgument},
		{"sync states", `"full_shard"`, `{"sync_module_states": "false", "cpu_ram_efficient_loading": "true"}`,
			`FILE: sync_module_states: must be true when cpu_ram_efficient_loading is true`, ErrInvalidArgument},
		{"mesh with full_shard", `"full_shard"`, `{"gotpu_mesh_shape": [2, 4]}`,
			`FILE: gotpu_mesh_shape: [2, 4] with full_shard: full_shard puts every device on the fsdp axis, so the shape is [1, number of devices]`, ErrInvalidArgument},
		{"mesh zero", `"hybrid_shard"`, `{"gotpu_mesh_shape": [0, 8]}`, `FILE: gotpu_mesh_shape: [0, 8]: data and fsdp must each be at least 1`, ErrInvalidArgument},
		{"mesh rank", `"hybrid_shard"`, `{"gotpu_mesh_shape": [2, 2, 2]}`, `FILE: gotpu_mesh_shape: [2, 2, 2] has 3 entries, want [data, fsdp]`, ErrInvalidArgument},
		// Decoding errors name the file and key too.
		{"mesh type", `"hybrid_shard"`, `{"gotpu_mesh_shape": "2x4"}`, `fsdp_config: FILE: gotpu_mesh_shape: "2x4" is a string, want [data, fsdp]`, ErrInvalidArgument},
		{"min type", `"full_shard"`, `{"min_num_params": "1e8"}`, `fsdp_config: FILE: min_num_params: "1e8" is a string, want an integer`, ErrInvalidArgument},
		{"xla type", `"full_shard"`, `{"xla": "true"}`, `fsdp_config: FILE: xla: "true" is a string, want true or false`, ErrInvalidArgument},
		{"not an object", `"full_shard"`, `["min_num_params"]`, `fsdp_config: FILE: ["min_num_params"] is a list, want an object`, ErrInvalidArgument},
		{"bad json", `"full_shard"`, `{"xla": tru}`, `fsdp_config: FILE: `, ErrInvalidArgument},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := `{"fsdp": ` + tt.fsdp
			path := ""
			if tt.config != "" {
				path = writeFSDPConfig(t, tt.config)
				in += `, "fsdp_config": ` + jsonQuote(path)
			}
			_, _, err := ParseTrainingArgumentsJSON([]byte(in+"}"), "args.json")
			want := strings.ReplaceAll(tt.want, "FILE", path)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("err = %v\nwant %q", err, want)
			}
			if !errors.Is(err, tt.kind) {
				t.Errorf("err is not %v: %v", tt.kind, err)
			}
			if !strings.HasPrefix(err.Error(), "args.json: ") {
				t.Errorf("error does not name the argument file: %v", err)
			}
		})
	}
}

// TestFSDPArgsConfigFile: reading the file is bounded and its failures name it.
func TestFSDPArgsConfigFile(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, append([]byte(`{"min_num_params": 0, "x": "`), bytes.Repeat([]byte("a"), 1<<20)...), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.json")
	for path, want := range map[string]string{
		big:     big + " is larger than 1 MiB",
		missing: missing,
		dir:     dir + " is not a regular file",
	} {
		_, _, err := ParseTrainingArgumentsJSON([]byte(`{"fsdp": "full_shard", "fsdp_config": `+jsonQuote(path)+`}`), "args.json")
		if err == nil || !strings.Contains(err.Error(), "trainer.TrainingArguments.fsdp_config: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v", path, err)
		}
		if _, err := LoadFSDPConfig(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("LoadFSDPConfig(%s): %v", path, err)
		}
	}
	c, err := LoadFSDPConfig(writeFSDPConfig(t, `{"fsdp_transformer_layer_cls_to_wrap": ["LlamaDecoderLayer"], "xla": true, "xla_fsdp_v2": true}`))
	if err != nil || c.Source == "" || !reflect.DeepEqual(c.TransformerLayerClsToWrap, []string{"LlamaDecoderLayer"}) || !c.XLA || !c.XLAFSDPv2 {
		t.Errorf("LoadFSDPConfig = %+v, %v", c, err)
	}
}

// TestFSDPArgsConfigNormalization: HF's post-init on fsdp_config — the fsdp_ prefix stripped
// (the key moving to the end, as pop-and-set does), a class name made a list, the defaults
// appended — and to_dict's output of it.
func TestFSDPArgsConfigNormalization(t *testing.T) {
	path := writeFSDPConfig(t, `{"fsdp_transformer_layer_cls_to_wrap": "GPT2Block", "xla_fsdp_v2": true, "xla": true, "backward_prefetch": "BACKWARD_PRE", "fsdp_version": 2}`)
	a, _, err := ParseTrainingArgumentsJSON([]byte(`{"fsdp": "full_shard auto_wrap", "fsdp_config": `+jsonQuote(path)+`}`), "args.json")
	if err != nil {
		t.Fatal(err)
	}
	c := a.FSDPConfig
	if !reflect.DeepEqual(c.TransformerLayerClsToWrap, []string{"GPT2Block"}) || !c.XLA || !c.XLAFSDPv2 || c.MinNumParams != 0 || c.Source != path {
		t.Errorf("config = %+v", c)
	}
	// What HF's dict is after __post_init__, derived from _process_fsdp_args by hand.
	want := `{"xla_fsdp_v2": true, "xla": true, "backward_prefetch": "BACKWARD_PRE", "transformer_layer_cls_to_wrap": ["GPT2Block"], ` +
		`"version": 2, "min_num_params": 0, "xla_fsdp_grad_ckpt": false}`
	if got := jsonPreviewFull(c.toJSON()); got != want {
		t.Errorf("fsdp_config written as\n%s\nwant\n%s", got, want)
	}
	// Without fsdp, the mutually exclusive pair is only HF's warning: kept as given.
	a, _, err = ParseTrainingArgumentsJSON([]byte(`{"fsdp_config": {"min_num_params": 10, "transformer_layer_cls_to_wrap": "GPT2Block"}}`), "args.json")
	if err != nil || a.FSDPConfig.MinNumParams != 10 || len(a.FSDP) != 0 {
		t.Fatalf("config without fsdp: %v", err)
	}
	if !strings.Contains(string(a.ToJSON()), `"min_num_params": 10`) {
		t.Error("fsdp_config without fsdp was not recorded")
	}
	if p, err := a.FSDPPlan(8, 1); err != nil || p.Enabled || p.Data != 8 || p.FSDP != 1 || p.MinNumParams != 0 {
		t.Errorf("plan without fsdp = %+v, %v", p, err)
	}
	// Inline JSON string (the command-line dict form): string values converted as
	// _convert_str_dict does.
	a, _, err = ParseTrainingArgumentsJSON([]byte(`{"fsdp": "hybrid_shard", "fsdp_config": "{\"xla\": \"true\", \"xla_fsdp_v2\": \"True\", \"gotpu_mesh_shape\": [2, 4], \"min_num_params\": \"100\"}"}`), "args.json")
	if err != nil || !a.FSDPConfig.XLA || !a.FSDPConfig.XLAFSDPv2 || a.FSDPConfig.MinNumParams != 100 || a.FSDPConfig.Source != "" {
		t.Errorf("inline config = %+v, %v", a.FSDPConfig, err)
	}
}

func jsonPreviewFull(v JSONValue) string {
	return string(appendPyJSON(nil, v, pyJSONStyle{indent: -1}, 0))
}

// TestFSDPArgsPlan: the mesh of each fsdp setting.
func TestFSDPArgsPlan(t *testing.T) {
	for _, tt := range []struct {
		name              string
		fsdp              []string
		mesh              []int
		devices, hosts    int
		data, shard       int
		enabled, hybrid   bool
		want              string // error substring
		minNumParams      int64
		layers, wantLayer []string
	}{
		{name: "off", devices: 8, hosts: 1, data: 8, shard: 1},
		{name: "full", fsdp: []string{"full_shard", "auto_wrap"}, devices: 8, hosts: 1, data: 1, shard: 8, enabled: true,
			minNumParams: 1000, layers: nil},
		{name: "full on two hosts", fsdp: []string{"full_shard"}, devices: 8, hosts: 2, data: 1, shard: 8, enabled: true},
		{name: "full with its mesh", fsdp: []string{"full_shard"}, mesh: []int{1, 8}, devices: 8, hosts: 1, data: 1, shard: 8, enabled: true},
		{name: "full mesh wrong size", fsdp: []string{"full_shard"}, mesh: []int{1, 4}, devices: 8, hosts: 1,
			want: "gotpu_mesh_shape: [1, 4] is 4 devices, but the run has 8; want [1, 8] for full_shard"},
		{name: "hybrid 2x4", fsdp: []string{"hybrid_shard", "auto_wrap"}, mesh: []int{2, 4}, devices: 8, hosts: 1, data: 2, shard: 4,
			enabled: true, hybrid: true, layers: []string{"LlamaDecoderLayer"}, wantLayer: []string{"LlamaDecoderLayer"}},
		{name: "hybrid 4x2", fsdp: []string{"hybrid_shard"}, mesh: []int{4, 2}, devices: 8, hosts: 1, data: 4, shard: 2, enabled: true, hybrid: true},
		{name: "hybrid default one host", fsdp: []string{"hybrid_shard"}, devices: 8, hosts: 1, data: 1, shard: 8, enabled: true, hybrid: true},
		{name: "hybrid default two hosts", fsdp: []string{"hybrid_shard"}, devices: 8, hosts: 2, data: 2, shard: 4, enabled: true, hybrid: true},
		{name: "hybrid uneven hosts", fsdp: []string{"hybrid_shard"}, devices: 8, hosts: 3,
			want: "8 devices do not split evenly over 3 hosts; give fsdp_config gotpu_mesh_shape [data, fsdp]"},
		{name: "hybrid mesh too big", fsdp: []string{"hybrid_shard"}, mesh: []int{2, 4}, devices: 6, hosts: 1,
			want: "gotpu_mesh_shape: [2, 4] is 8 devices, but the run has 6; want [data, fsdp] with data × fsdp = 6"},
		{name: "hybrid mesh 3x3", fsdp: []string{"hybrid_shard"}, mesh: []int{3, 3}, devices: 8, hosts: 1, want: "is 9 devices"},
		{name: "mesh 2x4 full", fsdp: []string{"full_shard"}, mesh: []int{2, 4}, devices: 8, hosts: 1, want: "with full_shard"},
		{name: "no devices", fsdp: []string{"full_shard"}, devices: 0, hosts: 1, want: "num_devices: 0 devices"},
		{name: "bad option", fsdp: []string{"offload"}, devices: 8, hosts: 1, want: `"offload" is not implemented`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := DefaultTrainingArguments()
			a.FSDP = tt.fsdp
			a.FSDPConfig = FSDPConfig{MeshShape: tt.mesh, MinNumParams: tt.minNumParams, TransformerLayerClsToWrap: tt.layers}
			p, err := a.FSDPPlan(tt.devices, tt.hosts)
			if tt.want != "" {
				var ae *ArgumentsError
				if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.As(err, &ae) {
					t.Fatalf("plan = %+v, err = %v; want %q", p, err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := FSDPPlan{Enabled: tt.enabled, Hybrid: tt.hybrid, Data: tt.data, FSDP: tt.shard, LayerClasses: tt.wantLayer}
			if tt.enabled {
				want.MinNumParams = tt.minNumParams
			}
			if !reflect.DeepEqual(p, want) {
				t.Errorf("plan = %+v, want %+v", p, want)
			}
			if p.Data*p.FSDP != tt.devices {
				t.Errorf("mesh %d × %d does not cover %d devices", p.Data, p.FSDP, tt.devices)
			}
		})
	}
}

// TestFSDPArgsJSONRoundTrip: training_args.json carries fsdp and fsdp_config as HF's to_dict
// writes them, and reads back to the same arguments.
func TestFSDPArgsJSONRoundTrip(t *testing.T) {
	// The default, as HF ≥ 4.36 dumps it (marketguardians: fsdp [], the post-init dict).
	def := DefaultTrainingArguments()
	out := string(def.ToJSON())
	for _, want := range []string{
		"\"ignore_data_skip\": false,\n  \"fsdp\": [],\n  \"fsdp_config\": {\n    \"min_num_params\": 0,\n    \"xla\": false,\n" +
			"    \"xla_fsdp_v2\": false,\n    \"xla_fsdp_grad_ckpt\": false\n  },\n  \"label_smoothing_factor\": 0.0,",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("default ToJSON lacks\n%s\nin\n%s", want, out)
		}
	}
	// HF's own dumps: the values gotpu writes back equal the file's.
	for _, file := range []string{"marketguardians_training_args_full_dump.json", "grpo_accounting_grpoconfig_dump.json"} {
		orig, err := parsePyJSON(readTestFile(t, filepath.Join(argsDir, file)))
		if err != nil {
			t.Fatal(err)
		}
		var kept []JSONMember
		for _, m := range orig.Object() {
			if strings.HasPrefix(m.Key, "fsdp") {
				kept = append(kept, m)
			}
		}
		a, _, err := ParseTrainingArgumentsJSON(appendPyJSON(nil, JSONObjectValue(kept...), pyJSONStyle{indent: -1}, 0), file)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		written, err := parsePyJSON(a.ToJSON())
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"fsdp", "fsdp_config"} {
			w, _ := orig.Get(key)
			g, _ := written.Get(key)
			if !g.Equal(w) {
				t.Errorf("%s: %s written as %s, HF wrote %s", file, key, jsonPreviewFull(g), jsonPreviewFull(w))
			}
		}
	}
	// A run with FSDP: from a config file, back from the checkpoint's training_args.json.
	path := writeFSDPConfig(t, `{"fsdp_transformer_layer_cls_to_wrap": ["LlamaDecoderLayer", "MistralDecoderLayer"], "xla": true, "xla_fsdp_v2": true, "gotpu_mesh_shape": [2, 4], "limit_all_gathers": "true", "use_orig_params": false}`)
	a, _, err := ParseTrainingArgumentsJSON([]byte(`{"fsdp": "hybrid_shard auto_wrap", "fsdp_config": `+jsonQuote(path)+`, "num_devices": 8}`), "args.json")
	if err != nil {
		t.Fatal(err)
	}
	first := a.ToJSON()
	if !bytes.Contains(first, []byte("\"fsdp\": [\n    \"hybrid_shard\",\n    \"auto_wrap\"\n  ],")) ||
		!bytes.Contains(first, []byte(`"gotpu_mesh_shape": [`)) || bytes.Contains(first, []byte(path)) {
		t.Errorf("ToJSON:\n%s", first)
	}
	back, _, err := ParseTrainingArgumentsJSON(first, "training_args.json")
	if err != nil {
		t.Fatalf("written arguments refused: %v\n%s", err, first)
	}
	if second := back.ToJSON(); !bytes.Equal(first, second) {
		t.Errorf("not stable:\n%s\n%s", first, second)
	}
	a.FSDPConfig.Source = "" // the file's name is not written
	assertArgs(t, back, a)
	p1, err1 := a.FSDPPlan(8, 1)
	p2, err2 := back.FSDPPlan(8, 1)
	if err1 != nil || err2 != nil || !reflect.DeepEqual(p1, p2) || p1.Data != 2 || p1.FSDP != 4 || !p1.Hybrid {
		t.Errorf("plans %+v %v, %+v %v", p1, err1, p2, err2)
	}
}

// TestFSDPArgsFlags: --fsdp and --fsdp_config through the command-line path gotpu train uses
// (RegisterFlags, cli.Parse, MergeFlags over --args).
func TestFSDPArgsFlags(t *testing.T) {
	path := writeFSDPConfig(t, `{"fsdp_transformer_layer_cls_to_wrap": "GPT2Block", "backward_prefetch": "backward_pre"}`)
	a, _, _, err := parseFlags(t, "--num_devices", "8", "--fsdp", "full_shard auto_wrap", "--fsdp_config", path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.FSDP, []string{"full_shard", "auto_wrap"}) || !reflect.DeepEqual(a.FSDPConfig.TransformerLayerClsToWrap, []string{"GPT2Block"}) ||
		a.FSDPConfig.Source != path {
		t.Errorf("parsed fsdp %v, config %+v", a.FSDP, a.FSDPConfig)
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	if p, err := a.FSDPPlan(a.NumDevices, 1); err != nil || !p.Enabled || p.Data != 1 || p.FSDP != 8 ||
		!reflect.DeepEqual(p.LayerClasses, []string{"GPT2Block"}) {
		t.Errorf("plan %+v, %v", p, err)
	}
	// Repeated --fsdp adds options; the inline dict form converts strings as HF does.
	a, _, _, err = parseFlags(t, "--fsdp", "hybrid_shard", "--fsdp=auto_wrap", "--fsdp-config",
		`{"gotpu_mesh_shape": [2, 4], "xla": "true", "xla_fsdp_v2": "true"}`)
	if err != nil || !reflect.DeepEqual(a.FSDP, []string{"hybrid_shard", "auto_wrap"}) || !a.FSDPConfig.XLA {
		t.Fatalf("fsdp %v, config %+v, %v", a.FSDP, a.FSDPConfig, err)
	}
	if p, err := a.FSDPPlan(8, 1); err != nil || p.Data != 2 || p.FSDP != 4 {
		t.Errorf("plan %+v, %v", p, err)
	}
	// A config that cannot be read or decoded is a usage error naming the file.
	missing := filepath.Join(t.TempDir(), "nope.json")
	for args, want := range map[string][]string{
		missing:                           {"--fsdp", "full_shard", "--fsdp_config", missing},
		"xla: 1 is a int, want true or f": {"--fsdp_config", writeFSDPConfig(t, `{"xla": 1}`)},
		"not a JSON object":               {"--fsdp_config", "{nope"},
	} {
		_, _, _, err := parseFlags(t, want...)
		if !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), "fsdp_config") || !strings.Contains(err.Error(), args) {
			t.Errorf("%v: err = %v", want, err)
		}
	}
	// Values refused by Validate name the flag's file.
	bad := writeFSDPConfig(t, `{"activation_checkpointing": true}`)
	a, _, _, err = parseFlags(t, "--fsdp", "full_shard offload", "--fsdp_config", bad)
	if err != nil {
		t.Fatal(err)
	}
	err = a.Validate()
	var ae *ArgumentsError
	if !errors.As(err, &ae) || !reflect.DeepEqual(ae.FieldNames(), []string{"fsdp", "fsdp_config"}) ||
		!strings.Contains(err.Error(), `fsdp_config: `+bad+`: activation_checkpointing: true is not implemented by gotpu`) {
		t.Errorf("err = %v", err)
	}

	// Flags over an argument file: only what is given overrides, and nothing is shared.
	file, _, err := ParseTrainingArgumentsJSON([]byte(`{"fsdp": "full_shard", "fsdp_config": {"min_num_params": 5}}`), "args.json")
	if err != nil {
		t.Fatal(err)
	}
	flagged, _, fs, err := parseFlags(t, "--fsdp", "hybrid_shard")
	if err != nil {
		t.Fatal(err)
	}
	file.MergeFlags(flagged, fs)
	if !reflect.DeepEqual(file.FSDP, []string{"hybrid_shard"}) || file.FSDPConfig.MinNumParams != 5 {
		t.Errorf("merged fsdp %v, config %+v", file.FSDP, file.FSDPConfig)
	}
	flagged, _, fs, err = parseFlags(t, "--fsdp_config", `{"gotpu_mesh_shape": [2, 4]}`)
	if err != nil {
		t.Fatal(err)
	}
	file.MergeFlags(flagged, fs)
	flagged.FSDPConfig.MeshShape[0] = 9
	if !reflect.DeepEqual(file.FSDPConfig.MeshShape, []int{2, 4}) || file.FSDPConfig.MinNumParams != 0 {
		t.Errorf("merged config %+v", file.FSDPConfig)
	}
}

// FuzzFSDPConfig: the fsdp_config parser never panics, and a config it and Validate accept is
// written (ToJSON) to a dict that reads back to the same config and the same bytes.
func FuzzFSDPConfig(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"min_num_params": 0, "xla": false, "xla_fsdp_v2": false, "xla_fsdp_grad_ckpt": false}`,
		`{"fsdp_min_num_params": 0, "xla": false, "xla_fsdp_grad_ckpt": false}`,
		`{"fsdp_transformer_layer_cls_to_wrap": "GPT2Block", "xla_fsdp_v2": true, "xla": true}`,
		`{"gotpu_mesh_shape": [2, 4], "backward_prefetch": "backward_post", "fsdp_version": "2", "use_orig_params": "false"}`,
		`{"fsdp_fsdp_min_num_params": 1, "min_num_params": 2, "fsdp_min_num_params": 3}`,
		`{"xla_fsdp_settings": {}, "activation_checkpointing": false, "transformer_layer_cls_to_wrap": null}`,
	} {
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, hybrid bool) {
		c, err := ParseFSDPConfig(data, "fuzz.json")
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		a := DefaultTrainingArguments()
		a.FSDP = []string{FSDPFullShard}
		if hybrid {
			a.FSDP = []string{FSDPHybridShard}
		}
		a.FSDPConfig = c
		if err := a.Validate(); err != nil {
			return
		}
		out := jsonPreviewFull(c.toJSON())
		back, err := ParseFSDPConfig([]byte(out), "")
		if err != nil {
			t.Fatalf("written config refused: %v\n%s", err, out)
		}
		if again := jsonPreviewFull(back.toJSON()); again != out {
			t.Fatalf("not stable:\n%s\n%s", out, again)
		}
		c.Source = ""
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("read back %+v, want %+v", back, c)
		}
	})
}

// gradient_checkpointing, and fsdp_config's xla_fsdp_grad_ckpt where HF reads it (XLA FSDP), turn
// the step's recomputation on; xla_fsdp_grad_ckpt without fsdp or without xla does not (HF ignores
// it there; without xla it is refused, TestFSDPArgsRefusals).
func TestGradientCheckpointingOn(t *testing.T) {
	xla := writeFSDPConfig(t, `{"xla": true, "xla_fsdp_v2": true, "xla_fsdp_grad_ckpt": true}`)
	for _, tt := range []struct {
		name, json string
		want       bool
	}{
		{"default", `{}`, false},
		{"gradient_checkpointing", `{"gradient_checkpointing": true}`, true},
		{"xla_fsdp_grad_ckpt", `{"fsdp": "full_shard", "fsdp_config": ` + jsonQuote(xla) + `}`, true},
		{"xla_fsdp_grad_ckpt without fsdp", `{"fsdp_config": ` + jsonQuote(xla) + `}`, false},
	} {
		a, _, err := ParseTrainingArgumentsJSON([]byte(tt.json), "args.json")
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := a.GradientCheckpointingOn(); got != tt.want {
			t.Errorf("%s: GradientCheckpointingOn = %v, want %v", tt.name, got, tt.want)
		}
	}
}
