package trainer

import (
	"math"
	"os"
	"strings"
	"time"
)

// Finalize computes the values Hugging Face derives in TrainingArguments.__post_init__ and
// raises the errors HF raises there. Call it once, after the JSON file and the command-line
// flags are merged, and before Validate. It returns nil or an *ArgumentsError.
//
// Derived values, as transformers 4.5x/5.x computes them:
//   - output_dir "" → "trainer_output"; a leading ~ is expanded (also in logging_dir);
//   - logging_dir "" → output_dir/runs/<Mon02_15-04-05>_<hostname> (4.x; 5.x derives the same
//     directory in its TensorBoard callback);
//   - run_name "" → output_dir (4.x);
//   - disable_tqdm unset → true only when log_level is error or critical;
//   - adafactor: true → optim "adafactor";
//   - do_eval → true when eval_strategy is not "no";
//   - eval_steps unset or 0 with eval_strategy "steps" → logging_steps;
//   - metric_for_best_model unset with load_best_model_at_end (or reduce_lr_on_plateau) → "loss";
//   - greater_is_better unset → whether metric_for_best_model does not end in "loss";
//   - report_to ["none"] → []; ["all"] → every integration gotpu has.
//
// Errors, as HF raises them: logging/eval steps of 0 with the "steps" strategy; interval steps
// above 1 that are not integers; load_best_model_at_end with different eval and save strategies
// (unless save_strategy is "best"), or with save_steps not a multiple of eval_steps;
// dataloader_prefetch_factor without dataloader_num_workers.
func (a *TrainingArguments) Finalize() error {
	host, _ := os.Hostname()
	return a.finalize(time.Now(), host)
}

func (a *TrainingArguments) finalize(now time.Time, host string) error {
	var l errorList
	if a.OutputDir == "" {
		a.OutputDir = "trainer_output"
	}
	a.OutputDir = expandUser(a.OutputDir)
	if a.LoggingDir == "" {
		a.LoggingDir = DefaultLoggingDir(a.OutputDir, now, host)
	}
	a.LoggingDir = expandUser(a.LoggingDir)
	if a.DisableTqdm == nil {
		// HF: logger.getEffectiveLevel() > logging.WARN; "passive" leaves transformers' default,
		// WARNING.
		disable := a.LogLevel == "error" || a.LogLevel == "critical"
		a.DisableTqdm = &disable
	}
	if a.Adafactor {
		a.Optim = "adafactor"
	}
	if !a.DoEval && a.EvalStrategy != "no" {
		a.DoEval = true
	}
	if a.EvalStrategy == "steps" && (a.EvalSteps == nil || *a.EvalSteps == 0) {
		if a.LoggingSteps > 0 {
			steps := a.LoggingSteps
			a.EvalSteps = &steps
		} else {
			l.invalid("eval_steps", `eval_strategy "steps" requires a non-zero eval_steps or logging_steps`)
		}
	}
	if a.LoggingStrategy == "steps" && a.LoggingSteps == 0 {
		l.invalid("logging_steps", `0 with logging_strategy "steps"; set a positive interval`)
	}
	integral := func(field string, strategy string, v float64) {
		if strategy == "steps" && v > 1 && v != math.Trunc(v) {
			l.invalid(field, "%s must be an integer when above 1 (below 1 it is a ratio of max_steps)", fmtFloat(v))
		}
	}
	integral("logging_steps", string(a.LoggingStrategy), a.LoggingSteps)
	if a.EvalSteps != nil {
		integral("eval_steps", string(a.EvalStrategy), *a.EvalSteps)
	}
	integral("save_steps", string(a.SaveStrategy), a.SaveSteps)
	if a.LoadBestModelAtEnd && a.SaveStrategy != "best" {
		a.checkBestModelSteps(&l)
	}
	if a.MetricForBestModel == "" && (a.LoadBestModelAtEnd || a.LRSchedulerType == "reduce_lr_on_plateau") {
		a.MetricForBestModel = "loss"
	}
	if a.GreaterIsBetter == nil && a.MetricForBestModel != "" {
		greater := !strings.HasSuffix(a.MetricForBestModel, "loss")
		a.GreaterIsBetter = &greater
	}
	if a.RunName == "" {
		a.RunName = a.OutputDir
	}
	switch {
	case len(a.ReportTo) == 1 && a.ReportTo[0] == "none":
		a.ReportTo = []string{}
	case len(a.ReportTo) == 1 && a.ReportTo[0] == "all":
		a.ReportTo = append([]string(nil), supportedReportTo...)
	case a.ReportTo == nil:
		a.ReportTo = []string{}
	}
	if a.DataloaderNumWorkers == 0 && a.DataloaderPrefetchFactor != nil {
		l.invalid("dataloader_prefetch_factor", "set, but dataloader_num_workers is 0; it applies only to worker processes")
	}
	return l.err("", "")
}

// checkBestModelSteps is HF's load_best_model_at_end check (5.x form, which fixed 4.50's
// rejection of ratio intervals that are multiples).
func (a *TrainingArguments) checkBestModelSteps(l *errorList) {
	if string(a.EvalStrategy) != string(a.SaveStrategy) {
		l.invalid("load_best_model_at_end", "requires eval_strategy (%q) and save_strategy (%q) to match, unless save_strategy is \"best\"",
			a.EvalStrategy, a.SaveStrategy)
		return
	}
	if a.EvalStrategy != "steps" || a.EvalSteps == nil {
		return
	}
	save, eval := a.SaveSteps, *a.EvalSteps
	if eval == 0 || math.Mod(save, eval) == 0 {
		return
	}
	if eval < 1 || save < 1 {
		if !(eval < 1 && save < 1) {
			l.invalid("load_best_model_at_end", "requires save_steps (%s) to be a multiple of eval_steps (%s), which cannot be guaranteed when one is a ratio and the other is not",
				fmtFloat(save), fmtFloat(eval))
			return
		}
		// HF scales both ratios by 1e6 to dodge binary fractions (0.2 % 0.1 != 0).
		const large = 1_000_000
		if math.Mod(save*large, eval*large) != 0 {
			l.invalid("load_best_model_at_end", "requires save_steps (%s) to be a multiple of eval_steps (%s)", fmtFloat(save), fmtFloat(eval))
		}
		return
	}
	l.invalid("load_best_model_at_end", "requires save_steps (%s) to be a round multiple of eval_steps (%s)", fmtFloat(save), fmtFloat(eval))
}

// DefaultLoggingDir is transformers 4.x's default logging_dir:
// os.path.join(output_dir, "runs", now.strftime("%b%d_%H-%M-%S") + "_" + hostname).
func DefaultLoggingDir(outputDir string, now time.Time, hostname string) string {
	return pyPathJoin(outputDir, "runs/"+now.Format("Jan02_15-04-05")+"_"+hostname)
}

// pyPathJoin is POSIX os.path.join for two parts: unlike filepath.Join it does not clean the
// path ("./results" stays "./results").
func pyPathJoin(a, b string) string {
	switch {
	case strings.HasPrefix(b, "/"):
		return b
	case a == "" || strings.HasSuffix(a, "/"):
		return a + b
	}
	return a + "/" + b
}

// expandUser is os.path.expanduser for "~" and "~/…" (HF expands output_dir and logging_dir).
func expandUser(p string) string {
	if p != "~" && !strings.HasPrefix(p, "~/") {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return p
	}
	return home + p[1:]
}
