package models

import (
	stdctx "context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/gotpu/gotpu/internal/membudget"
	"github.com/gotpu/gotpu/models/bert"
	"github.com/gotpu/gotpu/models/gemma3"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/models/llama"
	"github.com/gotpu/gotpu/models/qwen3"
	"github.com/gotpu/gotpu/xla"
)

// Supported lists the HF classes Load builds, by model_type.
func Supported() map[string][]string {
	return map[string][]string{
		gpt2.ModelType:    {gpt2.Architecture},
		llama.TypeLlama:   {llama.ArchitectureOf(llama.TypeLlama)},
		llama.TypeMistral: {llama.ArchitectureOf(llama.TypeMistral)},
		llama.TypeQwen2:   {llama.ArchitectureOf(llama.TypeQwen2)},
		bert.ModelType:    {bert.ForSequenceClassification, bert.BareModel},
		qwen3.ModelType:   {qwen3.Architecture},

		gemma3.TypeText:       {gemma3.Architecture},
		gemma3.TypeMultimodal: {gemma3.ArchitectureMultimodal}, // its text model, loaded as Gemma3ForCausalLM
	}
}

// ErrUnsupported is wrapped by Load's error for a model_type or architecture gotpu does not build.
var ErrUnsupported = fmt.Errorf("unsupported model")

// Load reads an HF model directory — or, for a Hub repo id such as "openai-community/gpt2", the
// snapshot ResolvePretrained fetches into the shared Hugging Face cache (opts.Hub, opts.Revision;
// a local directory of the same spelling wins, as in transformers): config.json picks the architecture (model_type, then the first
// of "architectures"), and the weights come from model.safetensors or its shards. Anything else
// (another model type or head, pickle-only weights, missing/unexpected tensors, shape mismatches)
// is an error naming the file and the field or tensor. opts.DType "" gives float32 variables.
func Load(ctx stdctx.Context, rt *xla.Runtime, nameOrPath string, opts LoadOptions) (m Model, err error) {
	defer xla.Recover(&err, "models.Load")
	if err := checkRuntime(rt, "models.Load"); err != nil {
		return nil, err
	}
	dir, err := ResolvePretrained(ctx, nameOrPath, HubOptions{Hub: opts.Hub, Revision: opts.Revision})
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, core.ConfigFile)
	raw, err := core.ReadRawConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	modelType, arch, err := identify(raw)
	if err != nil {
		return nil, err
	}
	// The resource budget, before anything is mapped or allocated (models/estimate.go).
	if err := checkLoadMemory(rt, cfgPath, raw, modelType, arch, opts); err != nil {
		return nil, err
	}
	switch modelType {
	case gpt2.ModelType:
		if arch != "" && arch != gpt2.Architecture {
			return nil, unsupportedArch(cfgPath, modelType, arch)
		}
		return asModel(gpt2.LoadRaw(ctx, rt, dir, raw, opts))
	case llama.TypeLlama, llama.TypeMistral, llama.TypeQwen2:
		if arch != "" && arch != llama.ArchitectureOf(modelType) {
			return nil, unsupportedArch(cfgPath, modelType, arch)
		}
		return asModel(llama.LoadRaw(ctx, rt, dir, raw, opts))
	case bert.ModelType:
		if arch == "" {
			arch = bert.ForSequenceClassification
		}
		if arch != bert.ForSequenceClassification && arch != bert.BareModel {
			return nil, unsupportedArch(cfgPath, modelType, arch)
		}
		return asModel(bert.LoadRaw(ctx, rt, dir, raw, arch, opts))
	case qwen3.ModelType:
		if arch != "" && arch != qwen3.Architecture {
			return nil, unsupportedArch(cfgPath, modelType, arch)
		}
		return asModel(qwen3.LoadRaw(ctx, rt, dir, raw, opts))
	case gemma3.TypeText, gemma3.TypeMultimodal:
		if err := gemma3Arch(cfgPath, modelType, arch); err != nil {
			return nil, err
		}
		return asModel(gemma3.LoadRaw(ctx, rt, dir, raw, opts))
	}
	return nil, fmt.Errorf("%s: field \"model_type\": %w: %q (gotpu supports %s)", cfgPath, ErrUnsupported, modelType, supportedList())
}

// NewOptions control New (Seed, DType).
type NewOptions = core.NewOptions

// ParseConfig reads a config.json and returns the typed config of its architecture
// (*gpt2.Config, *llama.Config or *bert.Config), or an error naming the file and the unsupported
// feature.
func ParseConfig(path string) (Config, error) {
	raw, err := core.ReadRawConfig(path)
	if err != nil {
		return nil, err
	}
	modelType, arch, err := identify(raw)
	if err != nil {
		return nil, err
	}
	return parseTyped(path, raw, modelType, arch)
}

// parseTyped parses raw as the architecture identify found, refusing absurd dimensions first.
func parseTyped(path string, raw *core.RawConfig, modelType, arch string) (Config, error) {
	if err := checkRawDims(raw); err != nil {
		return nil, err
	}
	switch modelType {
	case gpt2.ModelType:
		if arch != "" && arch != gpt2.Architecture {
			return nil, unsupportedArch(path, modelType, arch)
		}
		return asConfig(gpt2.ParseConfig(raw))
	case llama.TypeLlama, llama.TypeMistral, llama.TypeQwen2:
		if arch != "" && arch != llama.ArchitectureOf(modelType) {
			return nil, unsupportedArch(path, modelType, arch)
		}
		return asConfig(llama.ParseConfig(raw))
	case bert.ModelType:
		if arch == "" {
			arch = bert.ForSequenceClassification
		}
		if arch != bert.ForSequenceClassification && arch != bert.BareModel {
			return nil, unsupportedArch(path, modelType, arch)
		}
		return asConfig(bert.ParseConfig(raw, arch))
	case qwen3.ModelType:
		if arch != "" && arch != qwen3.Architecture {
			return nil, unsupportedArch(path, modelType, arch)
		}
		return asConfig(qwen3.ParseConfig(raw))
	case gemma3.TypeText:
		if err := gemma3Arch(path, modelType, arch); err != nil {
			return nil, err
		}
		return asConfig(gemma3.ParseConfig(raw))
	case gemma3.TypeMultimodal:
		if err := gemma3Arch(path, modelType, arch); err != nil {
			return nil, err
		}
		return asConfig(gemma3.ParseMultimodalConfig(raw))
	}
	return nil, fmt.Errorf("%s: field \"model_type\": %w: %q (gotpu supports %s)", path, ErrUnsupported, modelType, supportedList())
}

// New builds a randomly initialised model (HF's _init_weights distributions) from a config
// returned by ParseConfig or built in Go (gpt2.DefaultConfig(), ...).
func New(ctx stdctx.Context, rt *xla.Runtime, cfg Config, opts NewOptions) (Model, error) {
	if err := checkRuntime(rt, "models.New"); err != nil {
		return nil, err
	}
	// The resource budget, before any tensor is allocated (models/estimate.go).
	if err := checkParamMemory(rt, cfg, dtypeBytes(opts.DType, ""), "models.New", membudget.Probe()); err != nil {
		return nil, err
	}
	switch c := cfg.(type) {
	case *gpt2.Config:
		return asModel(gpt2.New(ctx, rt, c, opts))
	case *llama.Config:
		return asModel(llama.New(ctx, rt, c, opts))
	case *bert.Config:
		return asModel(bert.New(ctx, rt, c, opts))
	case *qwen3.Config:
		return asModel(qwen3.New(ctx, rt, c, opts))
	case *gemma3.Config:
		return asModel(gemma3.New(ctx, rt, c, opts))
	}
	return nil, fmt.Errorf("models.New: %w: config type %T", ErrUnsupported, cfg)
}

// identify reads model_type and the first architecture; model_type may be inferred from it.
func identify(raw *core.RawConfig) (modelType, arch string, err error) {
	if err := raw.String("model_type", &modelType); err != nil {
		return "", "", err
	}
	var archs []string
	if _, err := raw.Get("architectures", &archs); err != nil {
		return "", "", err
	}
	if len(archs) > 0 {
		arch = archs[0]
	}
	if modelType == "" {
		for mt, classes := range Supported() {
			for _, c := range classes {
				if c == arch {
					modelType = mt
				}
			}
		}
	}
	if modelType == "" {
		return "", "", raw.FieldError("model_type", fmt.Errorf("%w: missing, and architectures %q names no class gotpu knows (%s)",
			ErrUnsupported, archs, supportedList()))
	}
	return modelType, arch, nil
}

func unsupportedArch(path, modelType, arch string) error {
	return fmt.Errorf("%s: field \"architectures\": %w: %s is not supported for model_type %q (gotpu supports %s)",
		path, ErrUnsupported, arch, modelType, strings.Join(Supported()[modelType], ", "))
}

func supportedList() string {
	return "gpt2 (GPT2LMHeadModel), llama (LlamaForCausalLM), mistral (MistralForCausalLM), " +
		"qwen2 (Qwen2ForCausalLM), bert (BertForSequenceClassification, BertModel), qwen3 (Qwen3ForCausalLM)" +
		", gemma3_text (Gemma3ForCausalLM), gemma3 (Gemma3ForConditionalGeneration: its text model)"
}

// gemma3Arch checks the architecture of a gemma3_text / gemma3 config.
func gemma3Arch(path, modelType, arch string) error {
	want := gemma3.Architecture
	if modelType == gemma3.TypeMultimodal {
		want = gemma3.ArchitectureMultimodal
	}
	if arch != "" && arch != want {
		return unsupportedArch(path, modelType, arch)
	}
	return nil
}

// asModel returns a nil interface (not a typed nil pointer) on error.
func asModel[M Model](m M, err error) (Model, error) {
	if err != nil {
		return nil, err
	}
	return m, nil
}

// asConfig returns a nil interface (not a typed nil pointer) on error.
func asConfig[C Config](c C, err error) (Config, error) {
	if err != nil {
		return nil, err
	}
	return c, nil
}
