// Package xla is gotpu's device runtime: the only place (with models/) that touches GoMLX backends
// and PJRT.
//
// Open returns a Runtime for a Config: a PJRT plugin (libtpu on a Cloud TPU VM, the CUDA plugin, the
// XLA CPU plugin) or GoMLX's pure-Go backend, the embedded default that needs no cgo and no plugin.
// On gotpu's pure-Go backend any number of virtual devices can be requested — they run SPMD
// programs concurrently, with an in-graph AllReduce — so data-parallel code is developed and
// tested without an accelerator, through the same SPMD path XLA runs; a v3-8 exposes 8 devices
// and a v4-8 exposes 4, so nothing here assumes a count. simplego has one device and no
// collectives: Open refuses it with NumDevices above 1.
//
// Two pure-Go backends, chosen by Config.GoBackend: "gotpu" (DefaultGoBackend) is gotpu's own CPU
// backend (internal/gobackend), which records the graph, runs matrix products on gotpu's
// AVX-512/AVX2 GEMM (pure-Go fallback elsewhere) and replays everything else into simplego
// segments; it trains GPT-2 several times faster than simplego alone (`make
// bench` measures both, and PyTorch, in one run). "simplego" is GoMLX's simplego unchanged, kept
// selectable as the reference the gotpu backend is tested against. Runtime.GoBackend and
// Info.GoBackend report which one a runtime uses.
//
// Plugin discovery is local: it stats files and reads ELF symbol tables, never downloads, and never
// loads a file that does not export GetPjrtApi. With Device "auto" a TPU plugin wins over a CUDA
// one and the XLA CPU plugin is never picked implicitly (GoMLX's own order would silently run a TPU
// VM on its CPU plugin). Importing this package also switches GoMLX's plugin auto-installer off.
//
// Traps of GoMLX v0.26.0 handled here, each pinned by a regression test:
//   - the gradients of Dot/DotGeneral are built as a broadcast product (a GPT-2-shaped step took
//     139 s and 20 GB on the pure-Go backend); Open registers correct ones (vjp.go);
//   - simplego's parallel op executor deadlocks with several DotGenerals ready at once; gotpu runs
//     it (alone, and as the gotpu backend's segments) with sequential op execution;
//   - go-xla returns a nil plugin with a nil error when GetPjrtApi returns NULL; Open reports it.
//
// StableHLO without a plugin: StableHLO and StableHLOContext trace any graph function — a model
// program, a step of trainer/step — and return the StableHLO module gotpu would hand to a PJRT plugin,
// as text, on any machine (no device, no plugin, no cgo: it works under -tags noxla too). GoMLX
// v0.26.0 builds that text only inside its XLA backend, which refuses to start before a plugin is
// loaded; gotpu's tracing backend (hlo_backend.go, hlo_ops.go, hlo_elementwise.go) drives go-xla's StableHLO builder,
// the same library GoMLX's backend uses, and a test pins the output byte for byte to GoMLX's for
// every translated operation and every step program of every model family (an all-reduce over
// operands of several dtypes aside: GoMLX emits its per-dtype ops in map order, gotpu in operand
// order). HLOSpec.Replicas > 1 traces an SPMD program whose collectives
// (graph.Graph.Distributed().AllReduce over the mesh axis ReplicaAxis) become stablehlo.all_reduce
// over replica_groups {0..N-1}. HLOSpec.Mesh (a GoMLX distributed.DeviceMesh, exclusive with
// Replicas) traces an AutoSharding program, the form FSDP hands to a plugin for XLA's Shardy to
// partition: one global-view program (num_replicas 1, num_partitions the mesh's devices) that
// declares the mesh (`sdy.mesh @mesh = <["data"=2, "fsdp"=4]>`) and annotates every argument and
// result with an `sdy.sharding` — inputs by HLOSpec.InputShardings, the function's outputs by
// HLOSpec.OutputShardings (nil: replicated), and, in StableHLOContext, each context variable's
// input and updated output by the variable's own spec (Variable.SetShardingSpec; none: replicated,
// as context.Exec.AutoSharding defaults it). The graph builds no collectives there (GoMLX refuses
// graph.Distributed() in AutoSharding graphs): Shardy inserts them. A test pins the text byte for
// byte to what GoMLX's own context.Exec builds for the same function, mesh and specs. Operations
// gotpu's models do not use (convolutions, FFT, ArgMinMax, ...) fail the trace with
// ErrHLOUnsupported naming them; a malformed HLOSpec fails with ErrInvalidHLOSpec.
// ParseStableHLO reads such text back into an HLOModule (operations, operands, dataflow, replica
// groups, meshes, and each argument's and result's type and sharding; arguments keep GoMLX's
// parameter names, sanitised, and HLOModule.ArgIndex finds a variable's by Variable.ParameterName)
// so tests and tools can check a program's structure without an MLIR toolchain.
//
// Errors: Open wraps ErrPluginNotFound (with the places searched and how to install) and
// ErrNotPlugin (a file that is not a plugin). GoMLX reports graph-building errors by panicking;
// Program, Compile, Open and Call recover them and return *PanicError.
//
// Asynchronous execution (queue.go): Runtime.Dispatch queues device work and returns at once; it
// runs in dispatch order on the runtime's executor goroutine (started by Open, stopped by Close,
// which lets the execution in flight finish and fails what is queued with ErrClosed). go-xla's
// execute waits for completion, so on PJRT the executor is what frees the caller; gotpu's CPU
// backend runs through the same queue, so the trainer takes one code path everywhere. Read (and
// Sync) are the only blocking device→host reads: they run after everything dispatched before and
// report the first failed execution since the last read — of their Stream: failures are per
// stream (Runtime.NewStream), so two training runs sharing a runtime never see each other's. Transfer puts host tensors on a device
// from any goroutine. Stats counts executions, programs, transfers and their bytes, blocking
// reads, and per device the busy time and the idle gaps between executions.
// Config.ExecutionDelay makes executions slow on purpose, for tests.
//
// The persistent compilation cache (Config.CompilationCache, package compilecache): on a PJRT
// plugin, Open hooks the plugin's compile (compilehook_pjrt.go: go-xla reads the plugin's
// PJRT_Api table from its Plugin; gotpu hands it a copy whose PJRT_Client_Compile first looks the
// program up — key: the program text and compile options hashed, the plugin, the devices, the
// host CPU for the CPU plugin, gotpu's build — and answers a hit with
// PJRT_Executable_DeserializeAndLoad, a miss by compiling and storing PJRT_Executable_Serialize's
// bytes). gotpu declares the few C API structures it uses itself (pjrt_abi.h), checked against
// go-xla's header by a test. GoMLX sees an ordinary executable either way. Runtime.CompileStats
// counts compiles, hits, misses and their seconds, with the cache off too; on gotpu's pure-Go
// backend it counts that backend's own compiles (no cache: they cost milliseconds).
//
// Concurrency: a Runtime and its Programs are safe for concurrent use. Close a Runtime once its
// programs are done. The gradient registration is process-wide and happens once, in the first
// Open or trace, before any graph of that runtime exists.
package xla
