// Package gemm is the float32 matrix-multiplication kernel of gotpu's own CPU
// backend: C (=|+=) op(A)·op(B) for row-major matrices with arbitrary leading
// dimensions, op = identity or transpose on either input (the layouts
// DotGeneral needs for the forward pass and both gradients), a batched form
// (DotGeneral batch axes), and bfloat16-storage variants that accumulate in
// float32 and write float32 or bfloat16.
//
// # Design
//
// The structure is the classic Goto/BLIS one, laid out for row-major C with
// the vector dimension along N:
//
//	for ic in M by mc:              rows of the worker's share
//	  for pc in K by kc:
//	    pack A[ic:ic+mc, pc:pc+kc]  into mr-row micro-panels
//	    for jc in N by nc:
//	      pack B[pc:pc+kc, jc:jc+nc] into nr-column micro-panels (→ L2)
//	      for each mr-row A micro-panel (stays in L1):
//	        for each nr-column B micro-panel (streams from L2):
//	          micro-kernel: mr×nr tile of C += Apanel·Bpanel over kc
//
// Packing (pack.go) turns every layout — transposed or not, any stride, float32
// or bfloat16 — into the same contiguous panels, so there is one micro-kernel
// per instruction set and no layout-specific kernels. Edge panels are
// zero-padded; edge tiles (sizes that are not multiples of the tile, such as 1,
// 7, 129, 1000) are computed into a small per-worker tile and only the valid
// part is stored.
//
// # Micro-kernels and dispatch
//
//   - AVX-512 (kernel_amd64.s): 12×32 tile; 24 zmm accumulators, two zmm for the
//     B row and six rotating broadcast registers (all 32 zmm), so each k step is
//     2 vector loads + 12 broadcasts + 24 FMAs.
//   - AVX2+FMA (kernel_amd64.s): 6×16 tile; 12 ymm accumulators, two for the B
//     row, two alternating broadcast registers (all 16 ymm).
//   - Generic (kernel.go): a pure-Go 4×8 tile on the same packed layout, the
//     fallback for other CPUs/architectures and the `purego` build tag.
//
// KernelAuto picks AVX-512, then AVX2, then generic, from golang.org/x/sys/cpu
// (which includes the OS-support check via XGETBV). Any available kernel can be
// forced with Config.Kernel, which is how the tests run every path.
//
// # Blocking values
//
// Tuned for the target machine (AMD EPYC Zen 4/5: 32–48 KiB L1d, 1 MiB L2 per
// core):
//
//   - kc = 256: the A micro-panel reused from L1 is mr×kc×4 B = 12 KiB for the
//     12-row AVX-512 tile (6 KiB for AVX2), leaving room in a 32 KiB L1 for the
//     streaming B panels and the C tile; the C tile is loaded/stored once per
//     kc steps, a 1/256 overhead.
//   - nc = 512: the packed B block is kc×nc×4 B = 512 KiB, half of L2, so it
//     stays resident while every A micro-panel of the block sweeps it.
//   - mc ≤ 1020 (a multiple of 12, 6 and 4): large, because the A block only
//     needs to be packed once per kc slice; B is re-packed once per mc rows, so
//     a large mc keeps that cost at ≤ 1/mc of the FMAs. A worker's rows are cut
//     into the fewest near-equal blocks (1024 rows → 516 + 508, not
//     1020 + 4).
//
// kc ∈ {192, 256, 384, 512} and nc ∈ {256, 512, 1024} measured within noise of
// each other at 1024³ on the target machine; 256/512 is the value whose
// footprint argument above also holds on 32 KiB-L1 parts.
//
// # Threading, buffers and concurrency
//
// A Pool (NewPool) fixes the kernel and thread count and owns one set of
// packing buffers per worker. A call splits its work into disjoint pieces of C
// — whole batch items when there are at least as many items as threads,
// otherwise a split of M or N (the larger, so that the operand every worker
// packs in full is the smaller one) on tile boundaries — runs piece 0 on the
// calling goroutine and the others on goroutines it starts, and joins them all
// before returning; no goroutine outlives a call, and no synchronisation is
// needed while computing because the pieces share nothing writable. Products
// below 64³ multiply-adds stay on one goroutine. Buffers grow to the largest
// size seen and are reused, so steady-state calls allocate nothing (the
// goroutine bodies are func values built once in NewPool). A Pool serialises
// its own calls with a mutex; independent callers wanting parallelism use one
// Pool each. Cancelling the context stops the call at the next kc block with
// the context's error (C is then partially written).
//
// # bfloat16
//
// bfloat16 inputs (uint16 bit patterns) are widened to float32 while packing —
// exact, and free relative to the kernel — so the float32 kernels accumulate in
// float32. For a bfloat16 C, each worker accumulates a chunk of rows in a
// float32 scratch (≤ 4 MiB) over the whole K and rounds to bfloat16 once, ties
// to even.
//
// # Errors
//
// Shapes, leading dimensions, batch strides and slice lengths are validated
// before any work; errors name the field (Op.LDA, Batch.StrideC, "A has N
// elements, need M", ...). An output overlapping an input is rejected. The API
// does not panic on bad input.
package gemm
