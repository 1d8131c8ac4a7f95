//go:build !amd64 || purego

package gemm

// widenPanels returns 0: without the assembly packers packBF16 widens every
// panel in Go.
func widenPanels(dst []float32, src []uint16, x0, p0, nx, kb, w, sp int) int { return 0 }

// widenTransposed returns 0: packBF16 transposes in Go.
func widenTransposed(d []float32, src []uint16, xs, p0, cols, kb, w, sx int) int { return 0 }

// transposedF32 returns 0: packF32 transposes in Go.
func transposedF32(d []float32, src []float32, xs, p0, cols, kb, w, sx int) int { return 0 }

// copyPanel returns false: packF32 copies each step in Go.
func copyPanel(d, src []float32, kb, sp, w int) bool { return false }
