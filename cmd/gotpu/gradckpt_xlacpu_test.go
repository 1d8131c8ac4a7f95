//go:build !noxla

package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/xla/pjrttest"
)

// On XLA's CPU plugin (2 devices, FSDP full_shard) fsdp_config's xla_fsdp_grad_ckpt (with xla and
// xla_fsdp_v2: HF's switch under XLA FSDP) compiles a train program whose scratch memory, in the
// compiler's own figures that train logs, is below the program's without checkpointing, and the
// runs log the same losses. (gradient_checkpointing sets the same step option:
// TestGradientCheckpointingOn; its effect on XLA: TestGradientCheckpointingOnXLACPU.)
func TestTrainGradientCheckpointingOnXLACPU(t *testing.T) {
	pjrttest.OpenCPUPlugin(t, 2).Close() // skips without the plugin (fails under CI)
	dir := t.TempDir()
	xlaCfg := `{"xla": true, "xla_fsdp_v2": true, "xla_fsdp_grad_ckpt": true}`
	layout := []string{"--device", "cpu", "--num_devices", "2", "--fsdp", "full_shard", "--per_device_train_batch_size", "4"}
	temp := regexp.MustCompile(`compiled train step: XLA memory per device.* temp_bytes=(\d+)`)
	run := func(name string, extra ...string) (int64, string) {
		out, errOut := ckptTrain(t, dir, name, append(append([]string{}, layout...), extra...)...)
		m := temp.FindStringSubmatch(errOut)
		if m == nil {
			t.Fatalf("%s: no compiled-memory line in stderr:\n%s", name, errOut)
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return n, strings.Join(ckptLosses(t, out), ",")
	}
	off, lossOff := run("off")
	on, lossOn := run("on", "--fsdp_config", xlaCfg)
	t.Logf("XLA temp bytes per device: %d without checkpointing, %d with xla_fsdp_grad_ckpt; losses %s", off, on, lossOn)
	if on >= off {
		t.Errorf("xla_fsdp_grad_ckpt did not lower the compiled temp memory: %d without, %d with", off, on)
	}
	if lossOn != lossOff {
		t.Errorf("losses: %s without checkpointing, %s with xla_fsdp_grad_ckpt", lossOff, lossOn)
	}
}
