// Package scripts holds the scripts that run outside gotpu itself, and the tests that keep them
// working. It has no code of its own.
//
// device-check.sh runs gotpu's XLA path on a real accelerator in one prepared command (issue
// #14): built here with --build, carried to the device machine, run there; its --dry-run runs
// every step that needs no plugin on the pure-Go backend. devicecheck_test.go runs the dry run,
// so a broken step is found here and not in the device's few minutes. The helpers it calls live
// in device/: devprep (Go: random-init model directories, token batches) and Python scripts for
// the comparisons and the PyTorch and JAX baselines. See README.md.
package scripts
