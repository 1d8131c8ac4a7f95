//go:build !noxla

package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/xla/pjrttest"
)

// TestPlanCompileOnXLACPU: `gotpu plan --compile --device cpu` builds the GPT-2 fixture, runs its
// FSDP train step on 2 devices of XLA's CPU plugin and prints the compiler's figures next to the
// planner's: the arguments are the planner's persistent state plus the device's batch and the
// step's scalars (a few KiB), the outputs the updated state, and every figure is positive.
func TestPlanCompileOnXLACPU(t *testing.T) {
	pjrttest.RequireCPUPlugin(t)
	gpt2 := filepath.Join("..", "..", "testdata", "models", "gpt2-tiny")
	out, errOut, code := runGotpu(t, nil, "plan", "--model", gpt2, "--compile", "--device", "cpu", "--num_devices", "2",
		"--fsdp", "full_shard", "--per_device_train_batch_size", "2", "--block_size", "32")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	t.Logf("gotpu plan --compile:\n%s", out)
	if !strings.Contains(out, "compiled   cpu PJRT plugin, 2 devices: one train step") {
		t.Errorf("output lacks the compiled line:\n%s", out)
	}
	rows := map[string][2]int64{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			continue
		}
		planned, _ := strconv.ParseInt(f[1], 10, 64) // "-" reads as 0
		compiled, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			continue
		}
		rows[f[0]] = [2]int64{planned, compiled}
	}
	for _, name := range []string{"arguments", "outputs", "aliased", "temp", "code", "total"} {
		if _, ok := rows[name]; !ok {
			t.Fatalf("output lacks the %s row:\n%s", name, out)
		}
	}
	// 168,192 parameters sharded over 2 devices: 84,096 floats each, × 3 with AdamW's moments.
	const persistent = 168192 / 2 * 4 * 3
	args, outs := rows["arguments"], rows["outputs"]
	if args[0] != persistent || outs[0] != persistent {
		t.Errorf("planner's persistent bytes %d, %d; want %d", args[0], outs[0], persistent)
	}
	// Beyond the state the program's inputs are the batch (2 × 32 ids, mask and labels: 768 bytes)
	// and the step's scalars; its outputs the step's scalars.
	if extra := args[1] - persistent; extra < 768 || extra > 4096 {
		t.Errorf("compiler's argument bytes %d = persistent %d + %d; want the batch and scalars (768..4096)", args[1], persistent, extra)
	}
	if extra := outs[1] - persistent; extra < 0 || extra > 4096 {
		t.Errorf("compiler's output bytes %d = persistent %d + %d; want the step's scalars (0..4096)", outs[1], persistent, extra)
	}
	if rows["temp"][1] <= 0 {
		t.Errorf("compiler's temp bytes %d: want positive", rows["temp"][1])
	}
	m := rows
	if got, want := m["total"][1], m["arguments"][1]+m["outputs"][1]-m["aliased"][1]+m["temp"][1]+m["code"][1]; got != want {
		t.Errorf("compiler's total %d, want the sum %d", got, want)
	}
}
