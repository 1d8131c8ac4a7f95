package models

import (
	"fmt"

	"github.com/gotpu/gotpu/xla"
)

// RuntimeOf returns the runtime m was built or loaded with (models.Load, models.New, an
// architecture's New/Load, or a PEFT adapter attached to such a model), so that code running m
// need not be given the runtime a second time. It returns nil for a model that does not record
// one (a Model implemented outside gotpu).
func RuntimeOf(m Model) *xla.Runtime {
	if r, ok := m.(interface{ Runtime() *xla.Runtime }); ok {
		return r.Runtime()
	}
	return nil
}

// ResolveRuntime picks the runtime for running m: given (may be nil) and m's own (RuntimeOf).
// One of them is enough; both must then be the same runtime, since m's weights live on its
// runtime's devices. what names the parameter in errors ("trainer.Options.Runtime").
func ResolveRuntime(given *xla.Runtime, m Model, what string) (*xla.Runtime, error) {
	own := RuntimeOf(m)
	switch {
	case given == nil && own == nil:
		return nil, fmt.Errorf("%s is nil and the model records no runtime: pass the *xla.Runtime the model was loaded with", what)
	case given == nil:
		return own, nil
	case own != nil && own != given:
		return nil, fmt.Errorf("%s is a different runtime from the one the model was loaded with (its weights live there): pass nil to use the model's runtime, or that runtime", what)
	}
	return given, nil
}

// checkRuntime refuses a nil runtime at the API edge, naming the call.
func checkRuntime(rt *xla.Runtime, what string) error {
	if rt == nil {
		return fmt.Errorf("%s: the runtime is nil: open one with xla.Open and pass it", what)
	}
	return nil
}
