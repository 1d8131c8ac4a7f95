package models

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/models/internal/reftest"
	"github.com/gotpu/gotpu/xla"
)

func openGo(t testing.TB) *xla.Runtime {
	t.Helper()
	rt, err := xla.Open(context.Background(), xla.Config{Device: "go"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// fixtures lists the shared fixtures with the model kind the Python driver takes.
var fixtures = []struct{ name, kind string }{
	{"gpt2-tiny", "gpt2"}, {"gpt2-tiny-affine", "gpt2"}, {"llama-tiny", "llama"}, {"bert-tiny", "bert"},
	{"gemma3-tiny", "gemma3"},
}

func fixtureDir(t testing.TB, name string) string { return filepath.Join(reftest.Dir(t), name) }

// copyDir copies a fixture's config.json and model.safetensors into a fresh temporary directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		copyFile(t, filepath.Join(src, f), filepath.Join(dst, f))
	}
	return dst
}

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// fixtureInputs are the reference batch as host tensors (labels as the fixture uses them).
func fixtureInputs(ref *reftest.Reference) core.Inputs {
	ids := reftest.Int32(ref.InputIDs)
	in := core.Inputs{InputIDs: ids, Labels: ids}
	if l := ref.ClassLabels(); l != nil {
		flat := make([]int32, len(l))
		for i, v := range l {
			flat[i] = int32(v)
		}
		in.Labels = tensors.FromFlatDataAndDimensions(flat, len(l))
		in.AttentionMask = reftest.Int32(ref.AttentionMask)
		in.TokenTypeIDs = reftest.Int32(ref.TokenTypeIDs)
	}
	return in
}

// logitsOf runs the fixture batch through m and returns logits and loss.
func logitsOf(t testing.TB, rt *xla.Runtime, m Model, ref *reftest.Reference) ([]float64, float64) {
	t.Helper()
	res, err := core.Run(rt.Backend(), m.(core.Forwarder), fixtureInputs(ref), false)
	if err != nil {
		t.Fatal(err)
	}
	return reftest.Float64s(t, res.Logits), reftest.Float64s(t, res.Loss)[0]
}
