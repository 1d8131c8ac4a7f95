package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gotpu/gotpu/checkpoint"
	"github.com/gotpu/gotpu/trainer"
)

// checkOutputDir is run_clm.py's guard on --output_dir, made safe. A new run (no
// --resume_from_checkpoint) into a directory that is not empty would mix two runs: its
// checkpoints overwrite the old run's of the same steps, the old run's later checkpoints stay,
// and a later `--resume_from_checkpoint true` resumes the old run. So, as run_clm.py without
// --overwrite_output_dir, it is refused, naming what is there and the three ways on. (run_clm.py
// instead resumes a directory with checkpoints by itself, silently taking the other run's
// arguments' state; gotpu asks.) With --overwrite_output_dir the run starts from scratch there,
// and the previous run's checkpoint-N directories are removed first, so that no resume can pick
// one of them later; other files are overwritten as the new run writes them.
func checkOutputDir(a *trainer.TrainingArguments, log *slog.Logger) error {
	if a.ResumeFromCheckpoint != "" || a.OutputDir == "" {
		return nil
	}
	des, err := os.ReadDir(a.OutputDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--output_dir %s: %w", a.OutputDir, err)
	}
	if len(des) == 0 {
		return nil
	}
	if !a.OverwriteOutputDir {
		names := make([]string, 0, len(des))
		for _, de := range des {
			names = append(names, de.Name())
		}
		sort.Strings(names)
		shown := names
		if len(shown) > 5 {
			shown = append(shown[:5:5], fmt.Sprintf("and %d more", len(names)-5))
		}
		return fmt.Errorf("--output_dir %s already exists and is not empty (%s): add --overwrite_output_dir to "+
			"train from scratch into it (its checkpoints are removed first), --resume_from_checkpoint true to "+
			"continue from its last checkpoint, or choose another --output_dir", a.OutputDir, strings.Join(shown, ", "))
	}
	for _, de := range des {
		// checkpoint-N, and the leftovers of its interrupted saves (checkpoint-N.tmp-…, .old-…,
		// .del-…), which checkpoint.Cleanup would otherwise roll forward into the new run.
		base, _, _ := strings.Cut(de.Name(), ".")
		if _, ok := checkpoint.ParseDirName(base); !ok || !de.IsDir() {
			continue
		}
		path := filepath.Join(a.OutputDir, de.Name())
		if err := os.RemoveAll(path); err != nil {
			return fmt.Errorf("--overwrite_output_dir: removing the previous run's %s: %w", path, err)
		}
		log.Info("overwrite_output_dir: removed the previous run's checkpoint", "path", path)
	}
	return nil
}
