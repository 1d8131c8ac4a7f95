package core

import (
	"fmt"
	"strings"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph-building code reads far better unqualified.
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
)

// LoRAParam is the graph parameter (root scope) through which a LoRA adapter (models/peft)
// reaches the architectures' linear layers: a *LoRASpec set for the graph being built. The
// architectures call Proj and ConvProj for every layer an adapter may target, and the adapter's
// branch is added there, so one adapter works for every architecture and for every graph the
// model builds (training, evaluation, KV-cache decoding) without the architectures knowing it.
const LoRAParam = "gotpu_lora"

// LoRASpec says which modules of the graph being built carry a LoRA branch and how it is scaled.
type LoRASpec struct {
	// Modules are the in-model names of the adapted modules ("model.layers.0.self_attn.q_proj").
	Modules map[string]bool
	// Prefix is prepended to a module name to name its adapter tensors: Prefix+module+".lora_A.weight"
	// ("base_model.model." in PEFT's files).
	Prefix string
	// Scaling multiplies the branch: lora_alpha / r, or lora_alpha / sqrt(r) for rsLoRA.
	Scaling float64
	// Dropout is lora_dropout, applied to the branch's input only, when Training.
	Dropout  float64
	Training bool
}

// SetLoRA attaches spec to graph g: the Proj and ConvProj calls of graphs built into g add the
// branches. A nil spec detaches.
func SetLoRA(c *mlctx.Context, g *Graph, spec *LoRASpec) {
	c.InAbsPath("/").SetGraphParam(g, LoRAParam, spec)
}

func loraSpec(c *mlctx.Context, g *Graph) *LoRASpec {
	v, ok := c.GetGraphParam(g, LoRAParam)
	if !ok {
		return nil
	}
	s, _ := v.(*LoRASpec)
	return s
}

// Proj is module's torch.nn.Linear (w [out, in], b [out] or nil) plus the LoRA branch of an
// adapter attached to the graph for module (SetLoRA).
func Proj(c *mlctx.Context, module string, x, w, b *Node) *Node {
	return withLoRA(c, module, x, Linear(x, w, b))
}

// ConvProj is module's transformers Conv1D (GPT-2: w [in, out]) plus the LoRA branch. PEFT's
// forward does not transpose for Conv1D: lora_A is [r, in] and lora_B [out, r] for both layer kinds
// (fan_in_fan_out only transposes the merged delta).
func ConvProj(c *mlctx.Context, module string, x, w, b *Node) *Node {
	return withLoRA(c, module, x, Conv1D(x, w, b))
}

// withLoRA adds PEFT's LoraLayer branch to y = base(x): y + lora_B(lora_A(dropout(x))) * scaling.
// The branch computes in the adapter's dtype (PEFT casts x to lora_A's dtype), or in the graph's
// compute dtype under mixed precision (as torch autocast would), and its result is cast to y's.
func withLoRA(c *mlctx.Context, module string, x, y *Node) *Node {
	spec := loraSpec(c, x.Graph())
	if spec == nil || !spec.Modules[module] {
		return y
	}
	g := x.Graph()
	a := Weight(c, g, spec.Prefix+module+".lora_A.weight")
	bw := Weight(c, g, spec.Prefix+module+".lora_B.weight")
	if a.Rank() != 2 || bw.Rank() != 2 || a.Shape().Dim(0) != bw.Shape().Dim(1) || a.Shape().Dim(1) != x.Shape().Dim(-1) || bw.Shape().Dim(0) != y.Shape().Dim(-1) {
		panic(fmt.Errorf("lora: %s: lora_A %s and lora_B %s do not fit input width %d and output width %d",
			module, a.Shape(), bw.Shape(), x.Shape().Dim(-1), y.Shape().Dim(-1)))
	}
	in := toDType(x, a.DType())
	in = Dropout(c, in, spec.Dropout, spec.Training)
	branch := Linear(Linear(in, a, nil), bw, nil)
	branch = MulScalar(branch, spec.Scaling)
	return Add(y, toDType(branch, y.DType()))
}

// LinearLayer is one module a LoRA adapter can target: a torch.nn.Linear (weight [out, in]) or a
// transformers Conv1D (GPT-2, weight [in, out]), by its in-model HF name.
type LinearLayer struct {
	Module  string
	In, Out int
	Conv1D  bool
}

// LinearLayersOf lists, in table order, the modules of table whose weight is "<module>.weight"
// and whose name is one of suffixes or ends in "." + one of them: the architecture's explicit
// list of its linear layers (each of them built with Proj or ConvProj).
func LinearLayersOf(table []Param, conv bool, suffixes ...string) []LinearLayer {
	var out []LinearLayer
	for _, p := range table {
		module, ok := strings.CutSuffix(p.Name, ".weight")
		if !ok || len(p.Shape) != 2 {
			continue
		}
		for _, s := range suffixes {
			if module == s || strings.HasSuffix(module, "."+s) {
				l := LinearLayer{Module: module, In: p.Shape[1], Out: p.Shape[0], Conv1D: conv}
				if conv {
					l.In, l.Out = p.Shape[0], p.Shape[1]
				}
				out = append(out, l)
				break
			}
		}
	}
	return out
}
