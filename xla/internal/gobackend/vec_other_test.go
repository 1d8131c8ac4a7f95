//go:build !amd64 || purego

package gobackend

import "testing"

// forEachVecWidth runs fn once: there are no vector kernels to choose between.
func forEachVecWidth(t *testing.T, fn func(t *testing.T)) { t.Run("portable", fn) }
