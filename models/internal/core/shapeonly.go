package core

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
)

// NewShapeOnlyBase builds a model base whose variables have a shape and a dtype but no value:
// enough to trace the model's programs (a trace reads shapes only), nothing allocated. Running a
// program of it fails (GoMLX would ask for the missing values); it exists so that the compiler's
// memory figures of a model too large for the host can be read (trainer.CompilePlan).
func NewShapeOnlyBase(cfg interface {
	Config
	Validate() error
}, table []Param, backend backends.Backend, dtype string) (*Base, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dt := dtypes.Float32
	if dtype != "" {
		var err error
		if dt, err = ParseDTypeName(dtype); err != nil {
			return nil, fmt.Errorf("shape-only model: dtype: %w", err)
		}
	}
	c := mlctx.New()
	for _, p := range table {
		c.InAbsPath(p.Scope()).VariableWithShape(p.Var(), shapes.Make(dt, p.Shape...))
	}
	cfg.SetDType(TorchDTypeName(dt))
	return &Base{Cfg: cfg, Ctx: c, Table: table, Backend: backend}, nil
}
