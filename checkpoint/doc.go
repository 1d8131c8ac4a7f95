// Package checkpoint will hold gotpu's checkpoints: host-staged, one writer per host, atomic
// commit (write to a temporary directory, fsync, commit marker, rename), asynchronous, with exact
// resume on any device count.
//
// It is specified by the checkpoint issue and is not implemented yet; the package exists so the
// layout of the module is the designed one.
package checkpoint
