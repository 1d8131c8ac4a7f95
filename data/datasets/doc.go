// Package datasets decides which files make a Hugging Face dataset's config and splits, exactly
// as the `datasets` library does for load_dataset("org/name", config) or
// load_dataset("path/to/dir") when the dataset has no loading script (datasets' data_files.py and
// the Hub and local module factories of load.py), so that --dataset_name and
// --dataset_config_name pick the same files in gotpu as in a Python run. Reading the files is
// not its concern: it returns their paths and the format datasets would read them with.
//
// The rules, in datasets' order:
//
//   - The README.md's YAML block (and a .huggingface.yaml over it) may list `configs`, each with
//     a config_name, data_files (a pattern, a list of patterns for split "train", or a list of
//     {split, path}), an optional data_dir and `default`. The requested config is used, else the
//     one marked default, else the one named "default", else the only one.
//   - Without configs (or for a config without data_files) the default patterns decide: the
//     push_to_hub layout data/{split}-00000-of-00001.*, else inspect_ai .eval logs, else split
//     keywords (train/training, validation/valid/dev/val, test/testing/eval/evaluation) in
//     directory names, else in file names, else every file is "train".
//   - Patterns are fsspec globs ("**" spans directories, "*" does not cross "/"); hidden and
//     "__special__" paths and README.md-like metadata are left out unless a pattern names them.
//   - The format is the most common known extension (.parquet, .arrow, .csv/.tsv, .json/.jsonl,
//     .txt, ...); the default patterns then keep only that format's files.
//
// A split's files come pattern by pattern, each pattern's matches sorted by path; a file two
// patterns of a split match is listed twice, as datasets lists it, but a pattern the split
// repeats is resolved once (datasets would read its files once per copy). What a card's patterns
// may cost is bounded (MaxPatternChecks) and checked before they are matched. The format is
// inferred from the chosen config's own files (datasets infers it from the first config's and
// fails at reading time when another config differs).
//
// # Errors
//
// Errors name the dataset, the config and split, and for a bad card the file (README.md or
// .huggingface.yaml), the line and the field (configs[1].data_files[0].split). Formats datasets
// reads and gotpu does not (images, audio, webdataset, ...) are refused with the builder datasets
// would use; so are compressed (.csv.gz, .jsonl.zst) and zip-archived data files, which datasets
// decompresses on the fly: they are named, never silently dropped. README.md and
// .huggingface.yaml are read only up to MaxReadmeBytes; patterns are bounded in length and
// compiled to linear-time (RE2) expressions; a local directory walk is bounded in files and
// entries and skips link cycles.
//
// # Concurrency
//
// Every function is safe to call concurrently; none keeps state between calls or starts
// goroutines. ResolveHub and DownloadSplit make their Hub requests one after another through the
// given hub.Client (whose cache is shared and safe across processes) and stop at ctx's end.
package datasets
