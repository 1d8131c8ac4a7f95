// Package xla is gotpu's device runtime: the only place (with models/) that touches GoMLX backends
// and PJRT.
//
// Open returns a Runtime for a Config: a PJRT plugin (libtpu on a Cloud TPU VM, the CUDA plugin, the
// XLA CPU plugin) or GoMLX's pure-Go backend, the embedded default that needs no cgo and no plugin.
// On the pure-Go backend any number of virtual devices can be requested, so data-parallel code is
// developed and tested without an accelerator; a v3-8 exposes 8 devices and a v4-8 exposes 4, so
// nothing here assumes a count.
//
// Plugin discovery is local: it stats files and reads ELF symbol tables, never downloads, and never
// loads a file that does not export GetPjrtApi. With Device "auto" a TPU plugin wins over a CUDA
// one and the XLA CPU plugin is never picked implicitly (GoMLX's own order would silently run a TPU
// VM on its CPU plugin). Importing this package also switches GoMLX's plugin auto-installer off.
//
// Traps of GoMLX v0.26.0 handled here, each pinned by a regression test:
//   - the gradients of Dot/DotGeneral are built as a broadcast product (a GPT-2-shaped step took
//     139 s and 20 GB on the pure-Go backend); Open registers correct ones (vjp.go);
//   - the pure-Go backend's parallel op executor deadlocks with several DotGenerals ready at once;
//     gotpu runs it with sequential op execution;
//   - go-xla returns a nil plugin with a nil error when GetPjrtApi returns NULL; Open reports it.
//
// Errors: Open wraps ErrPluginNotFound (with the places searched and how to install) and
// ErrNotPlugin (a file that is not a plugin). GoMLX reports graph-building errors by panicking;
// Program, Compile, Open and Call recover them and return *PanicError.
//
// Concurrency: a Runtime and its Programs are safe for concurrent use. Close a Runtime once its
// programs are done. The gradient registration is process-wide and happens once, in the first
// Open, before any graph of that runtime exists.
package xla
