package core

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
)

// Disposition is what an architecture's name mapping says about one tensor found in a file.
type Disposition struct {
	// Name is the table name the tensor loads into ("" when ignored).
	Name string
	// Ignore drops the tensor; Why says why (logged). Quiet logs at debug level (known buffers such as
	// GPT-2's attn.bias masks); otherwise at info level (heads of other architectures, which HF
	// also drops with a warning).
	Ignore bool
	Why    string
	Quiet  bool
}

// Mapping is an architecture's explicit correspondence between file names and its table.
type Mapping struct {
	// Arch names the model in errors ("GPT2LMHeadModel").
	Arch string
	// Table lists every parameter, in HF's state-dict order.
	Table []Param
	// Map translates a name found in a file. Names it returns that are neither in Table nor in
	// Tied are unexpected tensors: an error.
	Map func(fileName string) Disposition
	// Tied maps a table-less name (a tied lm_head.weight) to the parameter it aliases; a file may
	// carry it only with the same shape and bytes.
	Tied map[string]string
	// ShapeHint explains where a parameter's shape comes from, for errors ("n_embd=64").
	ShapeHint func(name string) string
}

// LoadWeights reads every parameter of m.Table from ck into tensors of dtype target (InvalidDType
// keeps each file dtype), validating names, shapes and dtypes. Errors name the file and tensor.
func LoadWeights(ctx context.Context, ck *Checkpoint, m Mapping, backend backends.Backend, target dtypes.DType) (map[string]*tensors.Tensor, error) {
	byName := map[string]Param{}
	for _, p := range m.Table {
		byName[p.Name] = p
	}
	found := map[string]Entry{}
	foundAs := map[string]string{} // table name -> file name, to report duplicates
	tied := map[string]Entry{}
	var unexpected []string
	for _, fname := range ck.Order {
		e := ck.Tensors[fname]
		d := m.Map(fname)
		if d.Ignore {
			lvl := slog.LevelInfo
			if d.Quiet {
				lvl = slog.LevelDebug
			}
			slog.Log(ctx, lvl, "gotpu: ignoring checkpoint tensor", "file", e.File.Path(), "tensor", fname, "why", d.Why)
			continue
		}
		if prev, dup := foundAs[d.Name]; dup {
			return nil, fmt.Errorf("%s: tensors %q and %q both map to %s parameter %q", e.File.Path(), prev, fname, m.Arch, d.Name)
		}
		switch {
		case byName[d.Name].Name != "":
			found[d.Name] = e
			foundAs[d.Name] = fname
		case m.Tied[d.Name] != "":
			tied[d.Name] = e
			foundAs[d.Name] = fname
		default:
			unexpected = append(unexpected, fmt.Sprintf("%q in %s", fname, filepath.Base(e.File.Path())))
		}
	}
	if len(unexpected) > 0 {
		return nil, fmt.Errorf("%s: unexpected tensor%s for %s with this config: %s", ck.Source(), plural(len(unexpected)), m.Arch, clip(unexpected))
	}
	var missing []string
	for _, p := range m.Table {
		if _, ok := found[p.Name]; !ok {
			missing = append(missing, fmt.Sprintf("%q", p.Name))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: missing tensor%s for %s: %s", ck.Source(), plural(len(missing)), m.Arch, clip(missing))
	}
	for _, p := range m.Table {
		e := found[p.Name]
		if err := checkEntry(e, p, m, foundAs[p.Name]); err != nil {
			return nil, err
		}
	}
	for name, e := range tied {
		target := m.Tied[name]
		te := found[target]
		a, err1 := e.File.Bytes(e.Info.Name)
		b, err2 := te.File.Bytes(te.Info.Name)
		if err1 != nil || err2 != nil || e.Info.DType != te.Info.DType || !slices.Equal(e.Info.Shape, te.Info.Shape) || !bytes.Equal(a, b) {
			return nil, fmt.Errorf("%s: tensor %q differs from %q, but tie_word_embeddings is true so they must be the same tensor",
				e.File.Path(), e.Info.Name, te.Info.Name)
		}
		slog.DebugContext(ctx, "gotpu: tied tensor matches its target", "tensor", name, "target", target)
	}
	for _, p := range m.Table {
		dt := target
		if dt == dtypes.InvalidDType {
			dt, _ = DTypeOf(found[p.Name].Info.DType)
		}
		if dt == dtypes.Float64 {
			continue // converted to float32 below
		}
		if err := CheckBackendDType(backend, dt); err != nil {
			return nil, fmt.Errorf("%s: tensor %q is %s: %w", found[p.Name].File.Path(), foundAs[p.Name], found[p.Name].Info.DType, err)
		}
	}
	out := make(map[string]*tensors.Tensor, len(m.Table))
	for _, p := range m.Table {
		if err := ctx.Err(); err != nil {
			FinalizeAll(out)
			return nil, err
		}
		e := found[p.Name]
		raw, err := e.File.Bytes(e.Info.Name)
		if err != nil {
			FinalizeAll(out)
			return nil, err
		}
		dt := target
		if dt == dtypes.InvalidDType {
			dt, _ = DTypeOf(e.Info.DType)
			if dt == dtypes.Float64 {
				dt = dtypes.Float32 // gotpu computes in float32 at most; F64 files are rare.
			}
		}
		t, err := DeviceTensor(backend, dt, e.Info.DType, raw, p.Shape)
		if err != nil {
			FinalizeAll(out)
			return nil, fmt.Errorf("%s: tensor %q: %w", e.File.Path(), e.Info.Name, err)
		}
		out[p.Name] = t
	}
	return out, nil
}

func checkEntry(e Entry, p Param, m Mapping, fname string) error {
	if _, ok := DTypeOf(e.Info.DType); !ok {
		return fmt.Errorf("%s: tensor %q: dtype %s is not a floating-point type gotpu loads (F32, BF16, F16, F64)",
			e.File.Path(), fname, e.Info.DType)
	}
	if !slices.Equal(e.Info.Shape, p.Shape) {
		hint := ""
		if m.ShapeHint != nil {
			if h := m.ShapeHint(p.Name); h != "" {
				hint = " (" + h + ")"
			}
		}
		return fmt.Errorf("%s: tensor %q: shape %v does not match %v that config.json implies%s",
			e.File.Path(), fname, e.Info.Shape, p.Shape, hint)
	}
	return nil
}

// FinalizeAll frees tensors (on error paths).
func FinalizeAll(ts map[string]*tensors.Tensor) {
	for _, t := range ts {
		_ = t.FinalizeAll()
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// clip joins at most 8 items, counting the rest.
func clip(items []string) string {
	if len(items) <= 8 {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:8], ", ") + fmt.Sprintf(" and %d more", len(items)-8)
}

// PopulateContext creates one variable per table entry, at Param.Scope()/Param.Var(), holding values[name].
func PopulateContext(c *mlctx.Context, table []Param, values map[string]*tensors.Tensor) {
	for _, p := range table {
		c.InAbsPath(p.Scope()).VariableWithValue(p.Var(), values[p.Name])
	}
}
