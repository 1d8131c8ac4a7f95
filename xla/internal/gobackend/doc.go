// Package gobackend is gotpu's own CPU backend for GoMLX (issue #7): a backends.Backend whose
// matrix products (DotGeneral and Dot, float32 and bfloat16) run on gotpu's GEMM
// (xla/internal/gemm: AVX-512/AVX2 assembly, pure-Go fallback), whose float32 and bfloat16
// elementwise chains, reductions and transposes, and comparisons, run on its own Go kernels
// (step 2), and whose other operations run on GoMLX's simplego. The structure keeps each step local: teach the planner
// that an operation is native and give it a kernel.
//
// It is the default of the pure-Go device (xla.Config{Device: "go"}, GoBackend "" or "gotpu");
// GoBackend "simplego" selects GoMLX's backend alone. Measured on the GPT-2 it trains
// 5–12× faster than simplego with results equal within float32 tolerance.
//
// # The IR
//
// A Builder records the computation instead of building it. Each call of a backends.Builder
// operation adds a node: its OpType, its operands (values of earlier nodes, flattened in argument
// order), its other arguments copied as attributes, its output shapes, and a replay function
// that issues the same call on another backends.Builder. The ~100 recording methods are
// generated (gen_ops.go, by internal/genops, which reflects over backends.StandardOps and
// backends.CollectiveOps; run `go generate` after a GoMLX upgrade). Nodes are numbered in
// recording order, which is topological.
//
// Output shapes come from replaying every operation, as it is recorded, on a simplego builder
// that is never compiled (the shape builder). simplego derives them with GoMLX's
// backends/shapeinference (and its own rules for the operations shapeinference does not cover),
// so the shapes, and the argument errors, are exactly those the fallback will see; an operation
// simplego does not implement fails right there, with an error naming it. Native products are
// planned from the same shapes and cross-checked at Compile.
//
// # Native and fallback operations, segments
//
// At Compile every operation an output depends on is either native or fallback. Native are:
//   - DotGeneral/Dot in float32 or bfloat16 (dot.go);
//   - fusions (fuse.go, fuse_exec.go): groups of float32 and bfloat16 Add, Sub, Mul, Div, Max,
//     Min, Neg, Abs, Exp, Log, Tanh, Sqrt, Rsqrt, Logistic and float32↔bfloat16 ConvertDType,
//     with the BroadcastInDim, Reshape and bool→float ConvertDType operations feeding them,
//     evaluated in one pass over the output, block by block, by a small register program
//     (simplego's implicit broadcasting of size-1 axes and scalars included, scalar constants
//     folded in) whose results reuse the registers of values no later instruction reads
//     (fuse_regs.go), so a long chain's registers stay in L1. A fusible operation read only elementwise by one group joins it; a broadcast
//     read by several groups is inlined into each, never materialized. Add, Sub, Mul and Div run
//     AVX2 kernels (vec_amd64.s) with results bitwise those of Go's float32 arithmetic; float32
//     Exp and Tanh run AVX2/FMA kernels (vec_exp_amd64.s), within 2 ulps of simplego's float64
//     results rounded once (TestExpF32Vec, TestTanhF32Vec measure 1; softmax and cross-entropy
//     over the vocabulary and GPT-2's GELU make them the hottest transcendentals); the others are
//     evaluated in float64 and rounded once, as simplego does. bfloat16 is computed as simplego
//     computes it (bf16.go), so bitwise equal to it: registers are float32, a bfloat16 operand
//     is widened as it is loaded, a bfloat16 result is truncated to bfloat16 in its register and
//     narrowed as it is stored — simplego truncates, it does not round to nearest even — and a
//     bfloat16 transcendental function reads a 65536-entry table of simplego's results. Widening,
//     narrowing, truncation and bfloat16 Add, Sub, Mul and Div (the float32 operation and the
//     truncation in one pass) have AVX2 kernels (vec_bf16_amd64.s). A fusion that is the last
//     reader of a buffer of its output's shape and type, read only in the output's layout,
//     writes its output over it. A group whose value is a float32 output of the program read
//     only by one other group, elementwise, is computed by that group, which writes it as an
//     extra output (fuse_outputs.go): an optimizer update is one pass writing the new moments
//     and the new parameter, not three;
//   - float32 and bfloat16 ReduceSum/ReduceMax whose reduced axes are adjacent (reduce.go),
//     accumulating in simplego's order, and a bfloat16 one in bfloat16 (every partial sum
//     truncated) as simplego does, so bitwise equal to it; rows are summed eight at a time and
//     row maxima take VMAXPS where it gives Go's max (no NaN, a non-zero maximum). A float32 one
//     whose operand is a fusion's output that nothing else reads computes that fusion itself, a
//     few rows (or a block of eight long rows) at a time, instead of reading it from a buffer
//     (reduce_fused.go): the same values, in the same order;
//   - float32 and bfloat16 Transpose, by tiles where the source's contiguous axis moves;
//   - Equal, NotEqual, LessThan, LessOrEqual, GreaterThan and GreaterOrEqual of int32, float32 or
//     bfloat16 operands with simplego's implicit broadcasting (compare.go): the loss's one-hot
//     labels, a [batch·seq, vocab] comparison, were simplego's costliest remaining operation;
//   - AllReduce (collective.go), always: simplego has no collectives; an all-reduce operand that
//     is an all-gather written as one (a broadcast shard times a one-hot row mask, what gotpu's
//     FSDP step writes, as GoMLX has no all-gather) runs as a row gather (gather.go) with the
//     all-reduce's arithmetic, without materialising the products;
//   - RNGBitGenerator on a uint64 state (rng.go), drawing simplego's numbers: simplego's kernel
//     writes to a state input it does not own, a data race when replicas share the state;
//   - Reshape, Identity and Slice of any element type without pointers, of a native result or
//     an input (view.go): a reshape or identity of an arena value (below) is its place under
//     another shape, so nothing runs; otherwise it is one copy, and a slice a strided copy. As
//     fallback they were a segment call and a copy each — 183 of the 188 segments of GPT-2's
//     training step — and kept the values they read out of the arena.
//
// A native step runs on the flat data of its operands whatever their types (runflat.go); a
// fusion that is the last reader of an operand this execution owns (an intermediate, or a
// donated input), of its own shape and type and read only elementwise, writes its output over
// that operand instead of into a new buffer (exec.go's inPlace): an optimizer update writes the
// new weight and moments over the old ones.
//
// Two planning passes keep a training step's memory near what it needs (remat.go, replay.go):
// an elementwise group read only by other fusions is recomputed in each of them instead of
// materialized, when that keeps no input alive longer (so GELU's intermediates are not held
// from the forward pass to the backward one), and a fill of a constant (a broadcast scalar) read
// by fallback segments is replayed in each instead of made once at the start and held.
//
// Everything else is fallback. Operations are scheduled as soon as possible into alternating
// slots: fallback segment 0, native wave 0, segment 1, wave 1, ... — each operation goes to the
// first slot of its kind that is not before any of its operands (a wave runs its operations in
// recording order, so native chains share a wave), so the number of segments is the number of
// alternations between native and fallback along the longest chain plus one. Each segment is
// replayed into its own simplego builder (values from other slots become its parameters,
// values read elsewhere its outputs; constants are replayed into each segment that reads them
// rather than passed around) and compiled as a simplego executable.
//
// A native product maps onto gemm's batched C = op(A)·op(B): batch axes → Batch, lhs free axes
// → M, rhs free axes → N, contracting axes → K. An operand whose axes are already
// [batch, M, K] or [batch, K, M] (lhs), [batch, K, N] or [batch, N, K] (rhs) is read in place,
// with the GEMM's transpose flags; otherwise it is first transposed into a packed scratch buffer.
// The contracting pairs may be flattened in any common order, and the planner picks the one that
// copies least. The output layout [batch, lhsFree, rhsFree] is the GEMM's row-major C, so it is
// written in place. bfloat16 products widen while packing, accumulate in float32 and round once.
// A product with a vector of at most 8 elements and no batch axes (models' core.Select and its
// gradient, which split GPT-2's q, k, v) is not a GEMM but one pass over the lhs (dot_vec.go).
// Before planning, Compile folds transposes into products (fold.go): a product reads a transposed
// operand's source through its axes (the GEMM's packing reads any layout), a transposed product
// becomes the product with its operands swapped ((A·B)ᵀ = Bᵀ·Aᵀ, the same sums: GoMLX's weight
// gradients), a product whose transpose leaves its rows one strided run and its columns one
// contiguous run — attention's [batch, heads, seq, dim] results transposed to
// [batch, seq, heads, dim] — writes its rows ldc apart and its batch items side by side
// (directly, or swapped), and a transposed short-vector outer product writes the vector's axis
// in place — so those transposes never run.
//
// # Devices, SPMD and AllReduce
//
// The backend has Config.NumDevices virtual devices on the host. A buffer is simplego storage
// tagged with its device (buffer.go). A computation built with DistributedSPMD(N) is one program
// that Execute runs N times concurrently, replica r on its own inputs on device r (or the assigned
// device), one goroutine each; the replicas meet only at AllReduce, which GoMLX's
// Graph.Distributed().AllReduce records and which runs natively: each member of a replica group
// posts its operands (the group's first member also the result buffers), waits at the group's
// barrier, reduces its share of the elements from every member's operands in group order into the
// results, then waits again — so every replica gets bitwise the same result, held once per group:
// the members share the result buffers read-only (never donated or returned without a copy; the
// last member to let go recycles them). A replica that fails
// releases the others from the barriers with an error, instead of leaving them waiting. This is
// the data-parallel path of trainer/step on every backend: the same SPMD graph with an in-graph
// all-reduce that XLA compiles for N TPU cores.
//
// Virtual devices share one memory and the same cores, which spmd.go uses twice, invisibly in the
// results: steps that compute only values the same on every replica (from inputs every replica
// holds in the same storage, all-reduce results and constants — a data-parallel train step's whole
// optimizer update) run once, by replica 0 with all the threads, the others reading their
// results; and outputs that come out bitwise identical on every replica are stored once, every
// replica's buffer referencing the same storage (so a step's updated variables are shared inputs
// of the next). Storage is reference-counted and never written while shared. A data-parallel step
// over 8 virtual devices then costs what one device costs for the same global batch
// (BenchmarkReplicas in trainer/step).
//
// # Buffers and the arena
//
// A native result that only native operations read and that is not an output — most of a
// training step's activations and gradients — lives in the execution's arena (arena.go): one
// block per value table, in which Compile gave every such value a fixed offset by replaying the
// steps' allocations and frees with a best-fit allocator (a reshape sharing its operand's place,
// a fusion written over its operand taking that operand's place). The block is about the most
// that is live at once (1458 MiB for GPT-2 124M's float32 step, whose arena values peak at
// 1455 MiB), where buffers kept per shape held the sum over shapes of each one's most, twice
// that; and an execution allocates nothing for them.
//
// Other values are simplego's buffers, so segments take and return them directly, and native
// operations read and write their flat slices (BufferData, NewSharedBuffer) with no copies. An
// execution frees each intermediate buffer after its last reader — kept for the next execution
// if a native step takes one of its shape (spare.go; no more than the last execution took), else
// into simplego's pool — and donates an owned buffer to the segment that reads it last, so
// simplego may update it in place. A donated input is handed on the same way (if no other buffer
// shares its storage); an input that was not donated is never freed or written, and is copied if
// it is also an output.
//
// # Concurrency
//
// Builders are single-goroutine, as GoMLX uses them. Executables are safe for concurrent use:
// each execution (each replica of an SPMD execution) has its own buffer table and takes a worker
// (a gemm.Pool with its packing buffers, transposition scratch and fusion registers) from the
// backend's free list, creating one if all are busy. A product, and a fusion or reduction of at
// least 32Ki elements, is split over Config.Threads goroutines (GOMAXPROCS by default; divided
// among the replicas of an SPMD execution): the calling one and the helpers of the worker's team,
// which live as long as the worker (a kernel panic in any of them comes back as an error). A
// helper, and the caller waiting for it, polls for the hand-off for up to 1 ms, yielding the
// processor each time, before it blocks: a step hands off about 900 times, and a blocked
// goroutine took 50–200 µs to be woken on the other core, during which that core idled (3–4%
// of a GPT-2 124M step). Segments run on the calling goroutine with simplego's sequential executor (its parallel
// one deadlocks in GoMLX v0.26.0 and loses panics), so a kernel panic reaches the caller, where
// xla's Program recovers it into an error. An SPMD execution starts its replicas' goroutines and
// joins them before returning.
//
// # Errors
//
// Operand errors (nil, foreign, another computation's) and argument errors are returned when the
// operation is recorded, naming the operation and the computation; an operation neither native
// nor implemented by simplego fails there too, naming it. Compile fails if a segment cannot be
// built, or if an AllReduce's replica groups do not partition the replicas. Execute checks every
// input's shape and device against its parameter and replica (naming them) before it takes
// anything, and returns GEMM, segment and replica failures wrapped with the computation's name,
// freeing the buffers it owns.
//
// Sharded parameters: an SPMD program's parameter may carry a sharding spec (GoMLX gives each
// replica its shard of a sharded variable: gotpu's FSDP step); the shape is the replica's, so the
// spec is only accepted, never interpreted. Buffer accounting: every buffer handed out counts its
// bytes on its device until it is finalized or donated (Backend.DeviceBytes, xla.Runtime.DeviceBytes),
// which is how the FSDP tests measure what each virtual device holds between steps.
//
// The assembly kernels (vec_*amd64.s) run on amd64 CPUs with AVX2 (and FMA for Exp and Tanh);
// with the purego build tag, on other architectures and on other CPUs the portable Go loops run
// instead, with bitwise the same results but for float32 Exp and Tanh (whose loops are
// simplego's float64 ones).
//
// Not yet: auto-sharding (partitioning a global-view program) and collectives other than AllReduce; native
// gather/scatter, Where, integer elementwise operations, reductions fused with their
// producers, AVX-512 elementwise kernels; rounding bfloat16 to nearest even (as XLA and gotpu's
// GEMM output do) rather than simplego's truncation.
package gobackend
