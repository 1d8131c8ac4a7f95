// Package pjrttest gives tests XLA's own CPU PJRT plugin (installed by scripts/install-xla-cpu.sh)
// with N devices, to execute the programs that xla/xlatest's builder-only backend can only trace.
//
// OpenCPUPlugin and RequireCPUPlugin skip the test when no plugin is installed and fail it under CI
// (InCI), where .ci/run installs the plugin: a PJRT test that silently stopped running would look
// like a passing one. Tests that execute on the plugin carry "OnXLACPU" in their names: `make test`
// runs them once, without -race (the race detector does not see into the plugin's C++ and would only
// double their time), while the runtime's own PJRT tests run in both passes.
//
// It imports package xla, so xla's own (internal) tests cannot use it; they open the plugin
// directly.
package pjrttest
