// Command devprep writes the inputs scripts/device-check.sh needs and cannot make on the device
// machine, which has Python but no Go toolchain:
//
//	devprep model -config CONFIG.json [-set key=value]... [-seed N] -out DIR
//	devprep tokens -rows N -seq T -vocab V [-seed N] -out FILE.jsonl
//	devprep batch -ref reference.json [-repeat K] -out FILE.jsonl
//
// model writes a randomly initialised Hugging Face model directory (config.json and
// model.safetensors) from a config.json with gotpu's own initialisation (models.New), because
// `gotpu train` only fine-tunes a model directory; -set overrides config fields (the value is
// JSON when it parses as JSON, else a string), as run_clm.py's --config_overrides does.
// tokens writes pre-tokenized JSON lines of uniformly random token ids, the input `gotpu train`
// reads. batch writes a model fixture's batch (testdata/models/*/reference.json) as the JSON
// lines `gotpu score` and `gotpu train` read, the same lines cmd/gotpu's tests write.
//
// It runs on the pure-Go backend only, so it is built with -tags noxla.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/xla"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: devprep model|tokens|batch [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "model":
		err = runModel(os.Args[2:])
	case "tokens":
		err = runTokens(os.Args[2:])
	case "batch":
		err = runBatch(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q (want model, tokens or batch)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "devprep %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// setFlags collects repeated -set key=value flags. They are not comma-separated, unlike
// run_clm.py's --config_overrides, so that a value may be a JSON list.
type setFlags []string

func (s *setFlags) String() string     { return strings.Join(*s, " ") }
func (s *setFlags) Set(v string) error { *s = append(*s, v); return nil }

func runModel(args []string) error {
	fs := flag.NewFlagSet("devprep model", flag.ContinueOnError)
	config := fs.String("config", "", "config.json to start from")
	out := fs.String("out", "", "model directory to write")
	seed := fs.Uint64("seed", 1, "initialisation seed")
	var sets setFlags
	fs.Var(&sets, "set", "key=value override of a config field (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *config == "" || *out == "" {
		return errors.New("-config and -out are required")
	}
	raw, err := os.ReadFile(*config)
	if err != nil {
		return err
	}
	var fields map[string]any
	if err := json.Unmarshal(raw, &fields); err != nil {
		return fmt.Errorf("%s: %w", *config, err)
	}
	for _, kv := range sets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("-set %q: not key=value", kv)
		}
		var val any
		if json.Unmarshal([]byte(v), &val) != nil {
			val = v
		}
		fields[k] = val
	}
	// models.ParseConfig reads a file, so the overridden config goes through one; it lives in
	// its own directory because the model directory may not exist yet.
	tmp, err := os.MkdirTemp("", "devprep")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	b, err := json.MarshalIndent(fields, "", "  ")
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(tmp, "config.json")
	if err := os.WriteFile(cfgPath, b, 0o644); err != nil {
		return err
	}
	cfg, err := models.ParseConfig(cfgPath)
	if err != nil {
		return err
	}
	ctx := context.Background()
	rt, err := xla.Open(ctx, xla.Config{Device: xla.DeviceGo})
	if err != nil {
		return err
	}
	defer rt.Close()
	m, err := models.New(ctx, rt, cfg, models.NewOptions{Seed: *seed})
	if err != nil {
		return err
	}
	if err := m.Save(*out, models.SaveOptions{}); err != nil {
		return err
	}
	n := 0
	for _, p := range m.Params() {
		n += p.NumElements()
	}
	// One JSON line for the script: the parameter count is what its MFU figures need.
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"dir": *out, "architecture": m.Architecture(), "params": n})
}

func runTokens(args []string) error {
	fs := flag.NewFlagSet("devprep tokens", flag.ContinueOnError)
	rows := fs.Int("rows", 0, "number of examples")
	seq := fs.Int("seq", 0, "tokens per example")
	vocab := fs.Int("vocab", 0, "token ids are drawn from [0, vocab)")
	seed := fs.Uint64("seed", 1, "random seed")
	out := fs.String("out", "", "JSON-lines file to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rows <= 0 || *seq <= 0 || *vocab <= 0 || *out == "" {
		return errors.New("-rows, -seq, -vocab (all > 0) and -out are required")
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	r := rand.New(rand.NewPCG(*seed, 0))
	ids := make([]int, *seq)
	for range *rows {
		for i := range ids {
			ids[i] = r.IntN(*vocab)
		}
		b, _ := json.Marshal(map[string][]int{"input_ids": ids})
		w.Write(append(b, '\n'))
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// fixtureBatch is the part of a fixture's reference.json that makes its batch.
type fixtureBatch struct {
	InputIDs      [][]int         `json:"input_ids"`
	AttentionMask [][]int         `json:"attention_mask"`
	TokenTypeIDs  [][]int         `json:"token_type_ids"`
	Labels        json.RawMessage `json:"labels"`
}

func runBatch(args []string) error {
	fs := flag.NewFlagSet("devprep batch", flag.ContinueOnError)
	ref := fs.String("ref", "", "a fixture's reference.json")
	repeat := fs.Int("repeat", 1, "write the batch this many times (more rows for more replicas)")
	out := fs.String("out", "", "JSON-lines file to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *ref == "" || *out == "" || *repeat < 1 {
		return errors.New("-ref and -out are required, -repeat at least 1")
	}
	raw, err := os.ReadFile(*ref)
	if err != nil {
		return err
	}
	var fb fixtureBatch
	if err := json.Unmarshal(raw, &fb); err != nil {
		return fmt.Errorf("%s: %w", *ref, err)
	}
	// Causal fixtures describe their labels in words ("labels = input_ids"); only a classifier's
	// are a list of classes, and only those go into the lines.
	var classes []int
	_ = json.Unmarshal(fb.Labels, &classes)
	var sb strings.Builder
	for range *repeat {
		for i, ids := range fb.InputIDs {
			line := map[string]any{"input_ids": ids}
			if fb.AttentionMask != nil {
				line["attention_mask"] = fb.AttentionMask[i]
			}
			if fb.TokenTypeIDs != nil {
				line["token_type_ids"] = fb.TokenTypeIDs[i]
			}
			if classes != nil {
				line["labels"] = classes[i]
			}
			b, _ := json.Marshal(line)
			sb.Write(append(b, '\n'))
		}
	}
	return os.WriteFile(*out, []byte(sb.String()), 0o644)
}
