package trainer_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/checkpoint"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

// A resumed checkpoint is input like any other: its files can be edited by whoever can write
// the directory, and the manifest's checksums only say that the manifest was rewritten with them.
// These tests edit committed checkpoints, re-seal them as a careless or malicious writer would,
// and resume.

// editCheckpointFile replaces the one occurrence of old in dir/name by new, then re-seals the
// checkpoint (manifest sizes and SHA-256, commit marker), so that only the trainer's own checks
// stand between the edit and the resumed run.
func editCheckpointFile(t *testing.T, dir, name, old, new string) {
	t.Helper()
	p := filepath.Join(dir, name)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte(old)); n != 1 {
		t.Fatalf("%s: %q occurs %d times, want 1", name, old, n)
	}
	if err := os.WriteFile(p, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	resealCheckpoint(t, dir)
}

// resealCheckpoint rewrites dir's manifest from the files as they are now and writes the commit
// marker that matches it (the marker format of checkpoint/manifest.go's commitMarker).
func resealCheckpoint(t *testing.T, dir string) {
	t.Helper()
	mb, err := os.ReadFile(filepath.Join(dir, checkpoint.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	m, err := checkpoint.ParseManifest(mb)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range m.Files {
		b, err := os.ReadFile(filepath.Join(dir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		m.Files[i].Size, m.Files[i].SHA256 = int64(len(b)), hex.EncodeToString(sum[:])
	}
	if mb, err = m.Marshal(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(mb)
	marker := checkpoint.Format + " commit v1 sha256:" + hex.EncodeToString(sum[:]) + "\n"
	if err := os.WriteFile(filepath.Join(dir, checkpoint.ManifestFile), mb, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, checkpoint.CommitFile), []byte(marker), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Open(dir); err != nil {
		t.Fatalf("re-sealed checkpoint does not verify: %v", err)
	}
}

// treeSnapshot maps every file under root (relative path) to its bytes.
func treeSnapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.Type()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			out[rel] = "-> " + target
			return err
		}
		b, err := os.ReadFile(p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sealedCheckpoint trains 2 steps and returns its checkpoint-2 (to be copied, never edited).
func sealedCheckpoint(t *testing.T, rt *xla.Runtime) string {
	t.Helper()
	a := baseArgs(t)
	a.MaxSteps, a.SaveSteps, a.SaveStrategy = 2, 2, "steps"
	tr, err := trainer.New(a, tinyGPT2(t, rt), counting(32, 0), nil, trainer.Options{Runtime: rt, Logger: quiet(), SyncCheckpoints: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(a.OutputDir, "checkpoint-2")
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestResumeBestModelCheckpointConfined: best_model_checkpoint is honoured only as a
// checkpoint-N directory of output_dir. A state naming a model directory anywhere else (an
// absolute path, a path climbing out of output_dir, a symlink inside it, a name that is not a
// checkpoint) is refused with an error naming trainer_state.json and the field, before anything
// is trained or written; before this check the outside model was loaded by
// load_best_model_at_end.
func TestResumeBestModelCheckpointConfined(t *testing.T) {
	rt := openRT(t, 1)
	good := sealedCheckpoint(t, rt)
	// The directory the state points at: a valid model directory outside output_dir.
	evil := filepath.Join(t.TempDir(), "evil")
	if err := tinyGPT2(t, rt).Save(evil, models.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	args := func(out string) trainer.TrainingArguments {
		b := baseArgs(t)
		b.OutputDir, b.MaxSteps, b.ResumeFromCheckpoint = out, 4, filepath.Join(out, "checkpoint-2")
		b.EvalStrategy, b.SaveStrategy = "steps", "steps"
		two := 2.0
		b.EvalSteps, b.SaveSteps, b.LoggingSteps = &two, 2, 2
		b.LoadBestModelAtEnd, b.MetricForBestModel = true, "loss"
		return b
	}
	cases := []struct {
		name string
		best func(out string) string // called once per case
	}{
		{"absolute outside", func(string) string { return evil }},
		{"climbs out", func(out string) string { return filepath.Join(out, "..", filepath.Base(out)+"-x", "checkpoint-2") }},
		{"dot-dot suffix", func(out string) string { return out + "/checkpoint-2/../../evil" }},
		{"not a checkpoint", func(out string) string { return filepath.Join(out, "best") }},
		{"leading zero", func(out string) string { return filepath.Join(out, "checkpoint-02") }},
		{"later than the state", func(out string) string { return filepath.Join(out, "checkpoint-9") }},
		{"symlink in output_dir", func(out string) string {
			link := filepath.Join(out, "checkpoint-1")
			if err := os.Symlink(evil, link); err != nil {
				t.Fatal(err)
			}
			return link
		}},
		{"relative outside", func(string) string { return "../../evil/checkpoint-2" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			dir := filepath.Join(out, "checkpoint-2")
			copyTree(t, good, dir)
			best := c.best(out)
			editCheckpointFile(t, dir, "trainer_state.json", `"best_model_checkpoint": null`,
				`"best_model_checkpoint": `+jsonString(best))
			// A best metric no evaluation of the resumed run can beat: the outside directory
			// would stay the best one to the end.
			editCheckpointFile(t, dir, "trainer_state.json", `"best_metric": null`, `"best_metric": -1.0`)
			before := treeSnapshot(t, out)
			tr, err := trainer.New(args(out), tinyGPT2(t, rt), counting(32, 0), noise(8), trainer.Options{Runtime: rt, Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			_, err = tr.Train(context.Background())
			if err == nil || !strings.Contains(err.Error(), "trainer_state.json") || !strings.Contains(err.Error(), "best_model_checkpoint") {
				t.Fatalf("resume with best_model_checkpoint %q: %v; want an error naming trainer_state.json and best_model_checkpoint", best, err)
			}
			t.Log(err)
			if after := treeSnapshot(t, out); !maps.Equal(before, after) {
				t.Errorf("the refused resume changed output_dir: %v -> %v", keys(before), keys(after))
			}
		})
	}
	// The path gotpu writes (output_dir/checkpoint-N, however output_dir is spelled) resumes,
	// and load_best_model_at_end loads that checkpoint.
	t.Run("inside", func(t *testing.T) {
		out := t.TempDir()
		dir := filepath.Join(out, "checkpoint-2")
		copyTree(t, good, dir)
		editCheckpointFile(t, dir, "trainer_state.json", `"best_model_checkpoint": null`,
			`"best_model_checkpoint": `+jsonString(out+"/./checkpoint-2"))
		editCheckpointFile(t, dir, "trainer_state.json", `"best_metric": null`, `"best_metric": -1.0`)
		tr, err := trainer.New(args(out), tinyGPT2(t, rt), counting(32, 0), noise(8), trainer.Options{Runtime: rt, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Train(context.Background()); err != nil {
			t.Fatal(err)
		}
		if b := tr.State().BestModelCheckpoint; b == nil || *b != dir {
			t.Fatalf("best_model_checkpoint %v, want %s", b, dir)
		}
	})
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestResumeIgnoresTrialFields: gotpu runs no hyper-parameter search, so trial_name, trial_params
// and is_hyper_param_search of a resumed state are dropped: an absolute trial_name no longer
// sends TensorBoard's event files outside logging_dir, and the next checkpoint records null.
func TestResumeIgnoresTrialFields(t *testing.T) {
	rt := openRT(t, 1)
	good := sealedCheckpoint(t, rt)
	outside := filepath.Join(t.TempDir(), "outside")
	out := t.TempDir()
	dir := filepath.Join(out, "checkpoint-2")
	copyTree(t, good, dir)
	editCheckpointFile(t, dir, "trainer_state.json", `"trial_name": null`, `"trial_name": `+jsonString(outside))
	editCheckpointFile(t, dir, "trainer_state.json", `"trial_params": null`, `"trial_params": {"learning_rate": 0.1}`)
	editCheckpointFile(t, dir, "trainer_state.json", `"is_hyper_param_search": false`, `"is_hyper_param_search": true`)
	b := baseArgs(t)
	b.OutputDir, b.MaxSteps, b.SaveSteps, b.SaveStrategy, b.LoggingSteps = out, 4, 2, "steps", 2
	b.ResumeFromCheckpoint = dir
	b.ReportTo = []string{"tensorboard"}
	b.LoggingDir = filepath.Join(out, "runs")
	tr, err := trainer.New(b, tinyGPT2(t, rt), counting(32, 0), nil, trainer.Options{Runtime: rt, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Errorf("trial_name %s was used as a path: %v", outside, err)
	}
	if files, _ := filepath.Glob(filepath.Join(b.LoggingDir, "events.out.tfevents.*")); len(files) != 1 {
		t.Errorf("event files in logging_dir: %v", files)
	}
	st := tr.State()
	if st.TrialName != nil || st.IsHyperParamSearch || !st.TrialParams.IsNull() {
		t.Errorf("resumed state keeps trial_name %v, is_hyper_param_search %v, trial_params %v", st.TrialName, st.IsHyperParamSearch, st.TrialParams.Kind())
	}
	saved, err := trainer.LoadTrainerState(filepath.Join(out, "checkpoint-4", "trainer_state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if saved.TrialName != nil || saved.IsHyperParamSearch {
		t.Errorf("checkpoint-4 records trial_name %v, is_hyper_param_search %v", saved.TrialName, saved.IsHyperParamSearch)
	}
}

// TestResumeRefusesInconsistentCounters: the step counters of a checkpoint must agree with each
// other and with its manifest — global_step equal to the manifest's step, the optimizer's step
// count in [0, global_step] (gotpu_state.json and optimizer.safetensors' metadata alike), the
// scheduler at global_step — or the resume is refused with an error naming the file and the
// field, and nothing in output_dir is written or removed. Before these checks, global_step 2^62
// "trained" that many steps and -5 wrote a checkpoint-0.
func TestResumeRefusesInconsistentCounters(t *testing.T) {
	rt := openRT(t, 1)
	good := sealedCheckpoint(t, rt)
	cases := []struct {
		name, file, old, new, field string
	}{
		{"global_step 2^62", "trainer_state.json", `"global_step": 2,`, `"global_step": 4611686018427387904,`, "global_step"},
		{"global_step -5", "trainer_state.json", `"global_step": 2,`, `"global_step": -5,`, "global_step"},
		{"global_step 1", "trainer_state.json", `"global_step": 2,`, `"global_step": 1,`, "global_step"},
		{"optimizer_step 1e15", "gotpu_state.json", `"optimizer_step": 2,`, `"optimizer_step": 1000000000000000,`, "optimizer_step"},
		{"optimizer_step 3", "gotpu_state.json", `"optimizer_step": 2,`, `"optimizer_step": 3,`, "optimizer_step"},
		{"optimizer_step -1", "gotpu_state.json", `"optimizer_step": 2,`, `"optimizer_step": -1,`, "optimizer_step"},
		{"optimizer metadata", "optimizer.safetensors", `"step":"2"`, `"step":"7"`, "step"},
		{"last_epoch", "scheduler.json", `"last_epoch": 2,`, `"last_epoch": -99999999999,`, "last_epoch"},
		{"_step_count", "scheduler.json", `"_step_count": 3,`, `"_step_count": -4,`, "_step_count"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			dir := filepath.Join(out, "checkpoint-2")
			copyTree(t, good, dir)
			editCheckpointFile(t, dir, c.file, c.old, c.new)
			before := treeSnapshot(t, out)
			b := baseArgs(t)
			b.OutputDir, b.MaxSteps, b.SaveSteps, b.SaveStrategy, b.ResumeFromCheckpoint = out, 4, 1, "steps", "true"
			tr, err := trainer.New(b, tinyGPT2(t, rt), counting(32, 0), nil, trainer.Options{Runtime: rt, Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			res, err := tr.Train(context.Background())
			if err == nil || !strings.Contains(err.Error(), c.file) || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("resume with %s %s: %+v, %v; want an error naming %s and %s", c.file, c.new, res, err, c.file, c.field)
			}
			t.Log(err)
			if after := treeSnapshot(t, out); !maps.Equal(before, after) {
				t.Errorf("the refused resume changed output_dir: %v -> %v", keys(before), keys(after))
			}
		})
	}
}

// TestTensorBoardTrialNameStaysInLoggingDir: the one path built from trial_name (the
// TensorBoard directory during a search, HF's os.path.join(logging_dir, trial_name)) refuses a
// name that is not a plain subdirectory, even when set in Go rather than resumed.
func TestTensorBoardTrialNameStaysInLoggingDir(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside")
	args := trainer.DefaultTrainingArguments()
	args.LoggingDir = filepath.Join(t.TempDir(), "runs")
	for _, name := range []string{outside, "../outside", "a/../../outside", "..", ""} {
		st := trainer.NewTrainerState()
		st.IsHyperParamSearch, st.TrialName = true, &name
		cb := trainer.NewTensorBoardCallback()
		err := cb.OnTrainBegin(context.Background(), &trainer.Event{Args: &args, State: &st, Control: &trainer.TrainerControl{}})
		cb.Close()
		if err == nil || !strings.Contains(err.Error(), "trial_name") {
			t.Errorf("trial_name %q: %v; want an error naming trial_name", name, err)
		}
	}
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Errorf("%s was created: %v", outside, err)
	}
	if _, err := os.Stat(filepath.Dir(args.LoggingDir) + "/outside"); !os.IsNotExist(err) {
		t.Errorf("logging_dir/../outside was created: %v", err)
	}
}
