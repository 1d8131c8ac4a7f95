package core

import "github.com/gotpu/gotpu/xla"

// Runtime is the runtime whose backend holds the model's weights: the one given to the
// architecture's New or Load. Code that runs the model (the trainer, generation) takes it from
// here, so a caller names the runtime once. It is nil for a Base assembled with NewBase.
func (b *Base) Runtime() *xla.Runtime { return b.rt }
