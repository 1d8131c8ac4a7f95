package step

import (
	"fmt"
	"math"

	"github.com/gotpu/gotpu/models"
)

// checkLossOptions validates Config.LabelSmoothing and Config.NEFTuneAlpha against the model
// before any program is traced, so a setting the model cannot honour fails at New, naming the
// TrainingArguments field, rather than at the first step.
func (c Config) checkLossOptions(m models.Model) error {
	if x := c.LabelSmoothing; !(x >= 0 && x < 1) {
		return fmt.Errorf("step.Config.LabelSmoothing (label_smoothing_factor): %g is not in [0, 1)", x)
	}
	if x := c.NEFTuneAlpha; !(x >= 0) || math.IsInf(x, 1) {
		return fmt.Errorf("step.Config.NEFTuneAlpha (neftune_noise_alpha): %g is not a finite non-negative number", x)
	}
	if c.LabelSmoothing == 0 {
		return nil
	}
	if _, ok := m.(models.CausalLM); ok {
		return nil
	}
	// A classifier's labels reach the programs as integers (batchInputs), so its problem is
	// single-label classification unless config.json says otherwise or it has one label
	// (core.ProblemType). HF's LabelSmoother gathers at integer class labels: it cannot smooth a
	// regression or multi-label loss.
	cls, ok := m.(interface {
		NumLabels() int
		ProblemType() string
	})
	if !ok {
		return nil // e.g. a LoRA adapter on a classifier: the model's forward refuses it by name
	}
	problem := cls.ProblemType()
	if problem == "" {
		problem = "single_label_classification"
		if cls.NumLabels() == 1 {
			problem = "regression"
		}
	}
	if problem != "single_label_classification" {
		return fmt.Errorf("label_smoothing_factor %g: label smoothing applies to causal language models and "+
			"single_label_classification (HF's LabelSmoother gathers integer class labels), but this %s's problem_type is %s: "+
			"set label_smoothing_factor to 0", c.LabelSmoothing, m.Architecture(), problem)
	}
	return nil
}
