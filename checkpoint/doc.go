// Package checkpoint writes and reads gotpu's checkpoints: host-staged, one writer per host,
// atomic, asynchronous, verified on load.
//
// # Layout
//
// A save of global step N is the directory output_dir/checkpoint-N holding the files of a
// Snapshot (the trainer writes model.safetensors + config.json, loadable by
// transformers.from_pretrained; optimizer.safetensors keyed by "<state>/<HF parameter name>";
// rng_state.safetensors; trainer_state.json; training_args.json; scheduler.json;
// gotpu_state.json with the data-loader position), plus two files of this package:
// gotpu_manifest.json (format, version, step, and each file's size and SHA-256) and gotpu_commit
// (the manifest's SHA-256).
//
// # Commit protocol
//
// Commit writes everything into checkpoint-N.tmp-<id>/, fsyncs each file, writes and fsyncs the
// manifest, fsyncs the directory, writes the commit marker last (the commit point), fsyncs the
// directory again, renames it to checkpoint-N and fsyncs the parent. Re-saving an existing step
// moves the old directory to checkpoint-N.old-<id> only once the new one is committed, and removes
// it after the rename. Retention (Prune, HF's save_total_limit) renames a victim to
// checkpoint-N.del-<id> before removing it, so a half-deleted checkpoint never lists as
// committed. List, Latest and Open consider only checkpoint-N directories whose marker matches
// their manifest. Cleanup, run by NewWriter when a writer starts, resolves what a crash left: a
// committed tmp directory rolls forward if checkpoint-N is missing, an old one is restored if
// checkpoint-N is missing, everything else is removed.
//
// # File modes
//
// Checkpoints follow gotpu's one file policy (internal/atomicfile), the same as final model
// directories (models.Model.Save) and trainer_state.json: files are created with mode 0666 and
// directories with 0777, less the process's umask, and never chmod-ed afterwards — umask 022 gives
// 0644 files in 0755 directories, umask 077 gives 0600 in 0700, for a checkpoint and the model
// saved from it alike. The umask is the one setting (as for Python's open(), which HF's
// save_pretrained uses); there is no mode option. Every rename into place is preceded by an fsync
// of what is renamed and followed by an fsync of the directory it lands in.
//
// # Hosts
//
// NewWriter elects the writer of a directory on its host: only local rank 0 may ask
// (WriterConfig.LocalRank), and an exclusive flock(2) on a host-local lock file
// (WriterConfig.LockDir, default os.TempDir()) refuses a second writer with ErrWriterHeld; the
// kernel drops the lock when the holder dies, even by SIGKILL. In a job of several hosts
// (WriterConfig.Hosts) every host's writer stages its files in one shared directory,
// checkpoint-N.tmp-<RunID>, and non-primary hosts end with a part manifest (gotpu_part-<h>.json,
// written under a temporary name and renamed); the primary writes its own files, waits for every
// part (at most Hosts.CommitTimeout: a missing host is an ErrHostsMissing error naming it, never
// a hang), verifies each listed file's size and SHA-256, merges the parts into the manifest
// (each entry records its host) and commits as above. Only the primary runs Cleanup, sparing
// the staging directories of its own RunID. This needs a file system all hosts mount (a
// Filestore/NFS share; see docs/multihost.md for object-store buckets).
//
// # Loading
//
// Open verifies before anything is used: marker against manifest, every listed file's size and
// SHA-256, every *.safetensors file through the strict internal/safetensors reader (duplicate or
// invalid names, null or oversized headers, bad offsets, shapes and dtypes), and the presence of
// the files the caller requires. Names read from a manifest are validated as plain file names,
// never used as paths. A damaged checkpoint is an error naming the file; it never silently turns
// into a fresh start. Tensors are stored whole, not per device, so a checkpoint restores onto
// any device count.
//
// # Errors
//
// Errors wrap ErrCorrupt (a file does not match its manifest or is malformed), ErrNotCommitted
// (no valid marker) or ErrNoCheckpoint (nothing committed), with the path, and the underlying
// *os.PathError or syscall error (ENOSPC) where there is one.
//
// # Concurrency
//
// A Writer is the single writer of a host: create one per host, in the process of local rank 0
// (NewWriter enforces it); replicas hand it snapshots and never write. Its one goroutine, started
// by NewWriter and stopped by Close, commits snapshots in order. Save returns once the snapshot
// is queued (training continues while it is written); at most one save is pending, so a second
// Save waits for the first. What is written must be the state at Save even while training goes
// on, in one of two ways:
//
//   - A file's Data or WriteTo holds host copies taken at Save time (the caller copied the
//     device buffers into it).
//   - A Live file (SafetensorsFile over a TensorSource: tensors still on devices, possibly as
//     per-device shards) is staged by the writer: Save returns only once every Live file of the
//     snapshot is written — each tensor gathered to the host by TensorSource.Stage, one at a
//     time, into one buffer the size of the largest tensor, and written through a write buffer
//     of 4 MiB — so the caller may overwrite (donate) the device buffers as soon as Save
//     returns. Stage runs on the writer's goroutine with Save's context, one call at a time,
//     while Save blocks, and never after Save returned. The Live files are written first and
//     fsynced after Save returns; the other files, the manifest and the commit stay in the
//     background. A failed staging (a Stage error, ctx cancelled) fails the save: Save returns
//     the error, naming the file and tensor, nothing of the save is left and earlier
//     checkpoints (one of the same step included) are untouched. A save holds about the
//     largest tensor of host memory plus 8 MiB (the write buffer and the chunk being
//     checksummed, shared by the files of a save), never the sum of the tensors.
//
// An error of a background save is returned by the next Save, Wait or Close — never dropped.
// Writer methods are safe for concurrent use; List, Latest, Open and Prune may run concurrently
// with a writer of another directory; Cleanup and Prune must only be run by the directory's
// single writer.
//
// This package does not build on GoMLX's context/checkpoints, whose Save drops write errors,
// writes final files in place and grows with randomly named metric variables.
package checkpoint
