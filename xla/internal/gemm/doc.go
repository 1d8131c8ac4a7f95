// Package gemm is the float32 matrix-multiplication kernel of gotpu's own CPU
// backend: C (=|+=) op(A)·op(B) for row-major matrices with arbitrary leading
// dimensions, op = identity or transpose on either input (the layouts
// DotGeneral needs for the forward pass and both gradients), a batched form
// (DotGeneral batch axes), and bfloat16-storage variants that accumulate in
// float32 and write float32 or bfloat16 — on CPUs with AVX512-BF16 with a
// VDPBF16PS kernel at twice the float32 multiply-add rate.
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
// per instruction set and panel type and no layout-specific kernels: float32
// panels for the float32 kernels, and for the AVX512-BF16 kernel bfloat16
// panels paired along k (see bfloat16 below). Edge panels are zero-padded;
// edge tiles (sizes that are not multiples of the tile, such as 1, 7, 129,
// 1000) are computed into a small per-worker tile and only the valid part is
// stored. The driver (driver.go) is one generic loop nest over an engine — a
// kernel, its packing and its blocking — instantiated for both panel types.
//
// Packing pays for itself through reuse: a packed A panel serves nc/nr kernel
// calls. Where the other side has at most directMaxTiles (6) tiles — the
// attention products of a transformer, a 512×512 score matrix against 64
// value columns or 64 gradient rows against it — an operand is read in place
// instead (direct operands): the AVX-512 float32 engine's strided kernel
// (kernel_strided_amd64.s) takes A's row and k strides and B's k stride, so
// A in either layout and an untransposed B need no copy, and each step does
// the packed kernel's FMAs in the same order (the same bits;
// TestDirectOperands). Partial panels are still packed, zero-padded. The
// panel a direct tile reads next is prefetched while the current one
// computes. On the GPT-2 124M step's attention shapes (BenchmarkDirectOperands,
// both paths alternating in one process) in place against packed measured
// 1.09-1.19× for P·V, 1.19-1.26× for dS^T·Q and 1.07-1.11× for dO^T·P; the
// whole step, A/B in one process, 3094 against 3140 ms.
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
//   - AVX512-BF16 (kernel_bf16_amd64.s), for bfloat16 inputs: the AVX-512
//     kernel's 12×32 tile and register plan with VDPBF16PS in place of
//     VFMADD231PS. A step is a pair of k values: 2 loads of 32 B-column pairs,
//     12 broadcasts (VPBROADCASTD) of A-row pairs, 24 VDPBF16PS, each doing
//     16 lanes × 2 multiply-adds, twice an FMA's, at the same one per cycle on
//     Zen 4 (peak loops: ~230 against ~115 GFLOP/s per core). On
//     cache-resident panels the kernel runs at ~97% of that peak
//     (BenchmarkMicroKernel: ~225 GFLOP/s per core; the float32 kernel ~113),
//     so the float32 kernel's tile was kept. Go's assembler has no
//     AVX512_BF16 mnemonics, so a macro emits the EVEX encoding as bytes. The
//     embedded-broadcast form ({1to16} memory operand) measured the same and
//     is not used.
//
// KernelAuto picks AVX512-BF16, then AVX-512, then AVX2, then generic, from
// golang.org/x/sys/cpu (which includes the OS-support check via XGETBV; the
// BF16 kernel needs AVX512F, AVX512BW for its packing, and AVX512_BF16).
// KernelAVX512BF16 runs float32 inputs on the AVX-512 kernel and bfloat16
// inputs on the BF16 kernel; the other kernels run bfloat16 inputs by
// widening them (below), so on this hardware KernelAVX512 selects the
// widening path that CPUs without AVX512-BF16 take. Any available kernel can
// be forced with Config.Kernel, which is how the tests run every path.
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
// The BF16 kernel's engine uses the same kc = 256 values (128 pairs; the A
// micro-panel is then 6 KiB), nc = 512 and mc = 1020: the kernels sum each
// kc block from zero and add it to C, so equal block boundaries are part of
// what makes both bfloat16 paths give the same bits (see Numerics). kc ∈
// {256, 384, 512, 768, 1024} and nc ∈ {256, 512} measured within a few
// percent of each other at 1024³ and on the GPT-2 shapes.
//
// bfloat16 inputs (uint16 bit patterns) run one of two ways, both
// accumulating in float32:
//
//   - The AVX512-BF16 kernel (KernelAVX512BF16, KernelAuto where the CPU has
//     it). Panels stay bfloat16, pair-interleaved along k (packPairs): a dword
//     holds (x, k) in its high half and (x, k+1) in its low half, an A panel
//     holds per pair the 12 rows' dwords and a B panel the 32 columns'. An odd
//     kb leaves the last low halves zero (adding 0·0). The panels are half the
//     bytes of float32 ones, and packing them is vector code (pack_amd64.s):
//     when the k-pair's two values are a row apart (A transposed, B not) two
//     rows are interleaved (VPMOVZXWD, VPSLLD, VPORD), a few panels at a time
//     so that both rows' cache lines are consumed whole; when they are adjacent
//     (A not transposed, B transposed) the pair is already a dword (halves
//     then swapped with VPRORD) and 16×16 blocks of dwords are transposed in
//     registers. Both run at 20-40 GB/s of
//     bfloat16 against 3-5 GB/s for the Go loops (BenchmarkPackBF16), which
//     keeps packing at a few percent of a product.
//   - Widening (every other kernel, and so every CPU without AVX512-BF16):
//     each value is widened to float32 while packing — exact, since bfloat16
//     is the upper half of a float32 — and the float32 kernel runs unchanged.
//     The widening is vector code where the CPU allows: AVX2 for rows
//     contiguous along the panel (VPMOVZXWD, VPSLLD 16), AVX-512 transposes
//     for rows contiguous along k (11-20 GB/s of bfloat16 in
//     BenchmarkPackBF16, against 2.3-3.2 GB/s for the Go loops they replace).
//
// Numerics. Both paths accumulate in float32 with one rounding per
// multiply-add, in k order: the bfloat16 products are exact in float32
// (8-bit significands), so VDPBF16PS's two additions per lane (the pair's
// high half first, then its low half, each rounded to nearest even) round
// exactly as two FMAs would, and with k in the high half they come in k
// order. The two paths therefore give the same bits (TestBF16PathsBitwise),
// so a bfloat16 training run does not depend on which one the CPU has —
// denormals aside: VDPBF16PS ignores MXCSR and treats denormals as zero: denormal bfloat16 inputs (and a denormal
// float32 accumulator) read as 0 and a denormal result is flushed to 0
// (DAZ/FTZ), where the widening path is exact. This is the only semantic
// difference: NaN and ±Inf propagate by IEEE rules on both (a NaN input makes
// a NaN, Inf·0 is NaN, overflow is ±Inf), except that Inf times a denormal is
// NaN on the BF16 kernel (the denormal is 0) and ±Inf when widened. Adding
// the old C (Accumulate) is a float32 addition outside VDPBF16PS and keeps
// denormals.
//
// For a bfloat16 C, each worker accumulates a chunk of rows in a float32
// scratch (≤ 4 MiB) over the whole K and rounds to bfloat16 once, ties to
// even (with Accumulate, after adding the old value in float32). The rounding
// is vector code bit-identical to Float32ToBF16 (integer rounding, NaN kept
// quiet, denormals kept), so both paths round alike.
//
// # Concurrency
//
// A Pool splits a call over up to Config.Threads workers: whole batch items
// each when there are enough, otherwise halves (thirds, ...) of the rows or
// of the columns, whichever duplicates less packing. Worker 0 is the calling
// goroutine. The others are, by default, goroutines started for the call and
// joined before it returns; with Config.Runner they are the caller's own
// (gobackend runs them on the helpers of its fusions and reductions, which
// are usually still polling for work, so the second worker starts in
// microseconds instead of the tens of microseconds an idle core's thread
// takes to wake). A Pool serialises its calls.
//
// # Errors
//
// Shapes, leading dimensions, batch strides and slice lengths are validated
// before any work; errors name the field (Op.LDA, Batch.StrideC, "A has N
// elements, need M", ...). An output overlapping an input is rejected. The API
// does not panic on bad input.
package gemm
