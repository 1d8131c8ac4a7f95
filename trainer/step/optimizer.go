package step

import (
	"fmt"
	"math"
)

// Optimizer selects and configures the update rule, with torch's and Hugging Face's defaults.
type Optimizer struct {
	// Name is "adamw" (torch.optim.AdamW, decoupled weight decay) or "adafactor"
	// (transformers.Adafactor as HF Trainer builds it: scale_parameter=False, relative_step=False,
	// warmup_init=False, external learning rate).
	Name        string
	Beta1       float64 // AdamW
	Beta2       float64 // AdamW
	Epsilon     float64 // AdamW eps
	WeightDecay float64 // applied to parameters not marked NoDecay (HF's decay groups)
	// MaxGradNorm clips the global L2 norm of the gradients; 0 disables (HF: max_grad_norm <= 0).
	MaxGradNorm float64
}

// DefaultAdamW returns torch/HF AdamW defaults (betas 0.9, 0.999, eps 1e-8, no decay, clip 1.0).
func DefaultAdamW() Optimizer {
	return Optimizer{Name: "adamw", Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-8, MaxGradNorm: 1}
}

// Validate names the first bad field.
func (o Optimizer) Validate() error {
	switch {
	case o.Name != "adamw" && o.Name != "adafactor":
		return fmt.Errorf("step.Optimizer.Name: %q is not adamw or adafactor", o.Name)
	case o.Name == "adamw" && (o.Beta1 < 0 || o.Beta1 >= 1):
		return fmt.Errorf("step.Optimizer.Beta1: %v is not in [0,1)", o.Beta1)
	case o.Name == "adamw" && (o.Beta2 < 0 || o.Beta2 >= 1):
		return fmt.Errorf("step.Optimizer.Beta2: %v is not in [0,1)", o.Beta2)
	case o.Name == "adamw" && !(o.Epsilon >= 0):
		return fmt.Errorf("step.Optimizer.Epsilon: %v is negative", o.Epsilon)
	case o.WeightDecay < 0 || math.IsNaN(o.WeightDecay):
		return fmt.Errorf("step.Optimizer.WeightDecay: %v is negative", o.WeightDecay)
	case o.MaxGradNorm < 0 || math.IsNaN(o.MaxGradNorm):
		return fmt.Errorf("step.Optimizer.MaxGradNorm: %v is negative", o.MaxGradNorm)
	}
	return nil
}
