//go:build noxla

package xla

import "fmt"

// xlaCompiledIn tells whether this binary can load PJRT plugins (false with the noxla build tag).
const xlaCompiledIn = false

func (r *Runtime) openPJRT(p Plugin) error {
	return fmt.Errorf("xla.Open: found the %s PJRT plugin %s, but this binary was built with -tags noxla "+
		"and can only use the pure-Go backend (--device go); rebuild without the noxla tag (cgo required)", p.Kind, p.Path)
}
