// Package compilecache is gotpu's persistent compilation cache: serialized executables on disk,
// keyed by everything that changes the compiled program, so that the second start of a run, a
// resume after a preemption or the next job with the same shapes loads what the first compiled
// instead of compiling it again. It stores opaque payloads (what PJRT_Executable_Serialize
// returns); package xla produces and consumes them. It has no cgo and no state beyond the
// directory.
//
// # Keys
//
// A Key is an ordered list of name/value fields: the program's hash, the compile options' hash,
// the plugin (path, version, attributes), the platform, the devices and gotpu's version — anything
// that, if it changed, could make a stored executable wrong. Key.ID is the hex SHA-256 of an
// unambiguous encoding of the fields (see Key.ID), and names the entry's file. The whole key is
// stored in the entry too, and Get loads an entry only when the stored key equals the key asked
// for, field by field: a file renamed or copied under another key's name (another plugin version,
// another device count) is a foreign entry, ignored with a warning, never loaded.
//
// # Files
//
// The cache is one directory (Config.Dir) holding one file per entry, named <ID>.xlaexe, and
// nothing else of its own but the temporary files of writers in progress, named
// .<ID>.xlaexe.tmp-<random> (package atomicfile's names). Other files in the directory are left
// alone. An entry file is, in order:
//
//	offset  size  content
//	0       8     magic "GOTPUXLA"
//	8       4     format version, big-endian uint32: 1
//	12      4     header length H, big-endian uint32, at most 1 MiB
//	16      H     header: a JSON object {"key": [{"name", "value"}...], "name", "compile_seconds",
//	              "created" (RFC 3339), "payload_bytes", "payload_sha256" (hex)}
//	16+H    P     payload: the serialized executable, P = payload_bytes
//	16+H+P  32    SHA-256 of every byte before it
//
// An entry is valid only if all of it checks: the magic, the version, the lengths (the file is
// exactly 16+H+P+32 bytes), the trailing checksum, the header (strict JSON, no unknown fields)
// and the payload's own checksum. Anything else — a torn or truncated file, a flipped bit, another
// format version, another key — is reported as a problem: Get logs a warning naming the file and
// the problem and misses (the caller recompiles and Put replaces the entry); List shows it in
// Entry.Problem. A file that is missing is a plain miss, without a warning.
//
// # Concurrency and durability
//
// Every method is safe for concurrent use, within a process and between processes sharing the
// directory, with no locks: an entry is written under a temporary name, fsynced, renamed over its
// final name and the directory fsynced (atomicfile.WriteFile), so a reader opens either the old
// complete file or the new complete one, never a mix; when two writers put the same key at once,
// the last rename wins and both files were valid. Entries are never modified in place, only
// replaced or removed, so a reader that has opened a file reads one version of it to the end.
// Removal by another process at any moment (eviction, Clear) is expected: a file that vanished is
// a miss, and removing a file that is already gone is not an error.
//
// # Size limit and eviction
//
// The entries' files total at most Config.MaxBytes (DefaultMaxBytes, 10 GiB, when 0) after each
// Put: Put evicts entries least recently used first until the total fits, never the entry it
// has just written. An entry's modification time is its last use: Put sets it, and every hit in
// Get sets it to the current time. An entry larger than MaxBytes on its own is refused. The limit
// holds after each Put of one process; between processes it can be exceeded briefly (entries
// being written are not counted until renamed into place), and two processes evicting at once may
// both remove the oldest entries, evicting a little more than needed. Temporary files older than
// an hour are debris of crashed writers; eviction and Clear remove them.
package compilecache
