package datasets

import (
	"fmt"
	"slices"
	"testing"
)

// split is one expected split: its name and its files in datasets' order.
type split struct {
	name  string
	files []string
}

func one(name string, files ...string) []split { return []split{{name, files}} }

func shards(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(prefix, i)
	}
	return out
}

// defaultPatternCases are the cases of datasets' test_get_data_files_patterns
// (tests/test_data_files.py): the files of a dataset, grouped by the split datasets assigns them,
// in the order datasets returns the splits.
var defaultPatternCases = [][]split{
	// === Main cases ===
	// file named after split at the root
	{{"train", []string{"train.txt"}}, {"validation", []string{"valid.txt"}}, {"test", []string{"test.txt"}}},
	// file named after split in a directory
	{{"train", []string{"data/train.txt"}}, {"validation", []string{"data/valid.txt"}}, {"test", []string{"data/test.txt"}}},
	// directory named after split
	{{"train", []string{"train/split.txt"}}, {"validation", []string{"valid/split.txt"}}, {"test", []string{"test/split.txt"}}},
	// sharded splits
	{{"train", shards("data/train_%d.txt", 3)}, {"validation", shards("data/validation_%d.txt", 3)}, {"test", shards("data/test_%d.txt", 3)}},
	// sharded splits with standard format (+ custom split name)
	{
		{"train", shards("data/train-0000%d-of-00003.txt", 3)},
		{"validation", shards("data/validation-0000%d-of-00003.txt", 3)},
		{"test", shards("data/test-0000%d-of-00003.txt", 3)},
		{"random", shards("data/random-0000%d-of-00003.txt", 3)},
	},
	// === Secondary cases ===
	// Default to train split
	one("train", "dataset.txt"),
	one("train", "data/dataset.txt"),
	one("train", "data/image.jpg", "metadata.jsonl"),
	one("train", "data/image.jpg", "metadata.csv"),
	// With prefix or suffix in directory or file names
	one("train", "my_train_dir/dataset.txt"),
	one("train", "data/my_train_file.txt"),
	one("test", "my_test_dir/dataset.txt"),
	one("test", "data/my_test_file.txt"),
	one("validation", "my_validation_dir/dataset.txt"),
	one("validation", "data/my_validation_file.txt"),
	one("train", "train_dir/dataset.txt"),
	one("train", "data/train_file.txt"),
	one("test", "test_dir/dataset.txt"),
	one("test", "data/test_file.txt"),
	one("validation", "validation_dir/dataset.txt"),
	one("validation", "data/validation_file.txt"),
	one("train", "my_train/dataset.txt"),
	one("train", "data/my_train.txt"),
	one("test", "my_test/dataset.txt"),
	one("test", "data/my_test.txt"),
	one("validation", "my_validation/dataset.txt"),
	one("validation", "data/my_validation.txt"),
	// With test<>eval aliases
	one("test", "eval.txt"),
	one("test", "data/eval.txt"),
	one("test", "eval/dataset.txt"),
	// With valid<>dev aliases
	one("validation", "dev.txt"),
	one("validation", "data/dev.txt"),
	one("validation", "dev/dataset.txt"),
	// With valid<>val aliases
	one("validation", "val.txt"),
	one("validation", "data/val.txt"),
	// With other extensions
	{{"train", []string{"train.parquet"}}, {"validation", []string{"valid.parquet"}}, {"test", []string{"test.parquet"}}},
	// With "dev" or "eval" without separators
	one("train", "developers_list.txt"),
	one("train", "data/seqeval_results.txt"),
	one("train", "contest.txt"),
	// With supported separators
	one("test", "my.test.file.txt"),
	one("test", "my-test-file.txt"),
	one("test", "my_test_file.txt"),
	one("test", "my test file.txt"),
	one("test", "my-test_file.txt"),
	one("test", "test00001.txt"),
	// <split>.<split> case
	one("test", "test/train.txt"),
}

// TestDefaultPatterns runs datasets' cases at the root and below a base directory (datasets runs
// them with base paths "" and "my_dir"): the splits found, their order, and the files each split's
// patterns resolve to, in order.
func TestDefaultPatterns(t *testing.T) {
	for _, base := range []string{"", "my_dir/"} {
		for _, c := range defaultPatternCases {
			var files []string
			for _, s := range c {
				for _, f := range s.files {
					files = append(files, base+f)
				}
			}
			name := fmt.Sprintf("%s%v", base, files)
			t.Run(name, func(t *testing.T) {
				rel := files
				if base != "" {
					rel = nil
					for _, f := range files {
						rel = append(rel, f[len(base):])
					}
				}
				got, err := defaultPatterns(rel)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(c) {
					t.Fatalf("splits %v, want %d splits", got, len(c))
				}
				for i, sp := range got {
					if sp.Split != c[i].name {
						t.Fatalf("split %d is %q, want %q", i, sp.Split, c[i].name)
					}
					var matched []string
					for _, p := range sp.Patterns {
						matched = append(matched, resolveAll(t, p, rel)...)
					}
					if !slices.Equal(matched, c[i].files) {
						t.Errorf("split %q resolves to %q, want %q", sp.Split, matched, c[i].files)
					}
				}
			})
		}
	}
}

// TestDefaultPatternsShardedWithDataInParent is test_get_data_patterns_from_directory_with_the_
// word_data_twice: the sharded pattern is relative to the dataset, whatever its parent is named.
func TestDefaultPatternsShardedWithDataInParent(t *testing.T) {
	got, err := defaultPatterns([]string{"data/train-00001-of-00009.parquet"})
	if err != nil {
		t.Fatal(err)
	}
	want := []SplitPatterns{{Split: "train", Patterns: []string{"data/train-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]*.*"}}}
	if len(got) != 1 || got[0].Split != want[0].Split || !slices.Equal(got[0].Patterns, want[0].Patterns) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestDefaultPatternsDocExamples are the examples of get_data_patterns' docstring.
func TestDefaultPatternsDocExamples(t *testing.T) {
	for _, c := range []struct {
		files  []string
		splits []string
	}{
		{[]string{"README.md", "dataset.csv"}, []string{"train"}},
		{[]string{"README.md", "train.csv", "test.csv"}, []string{"train", "test"}},
		{[]string{"README.md", "data/train.csv", "data/test.csv"}, []string{"train", "test"}},
		{[]string{"README.md", "train_0.csv", "train_1.csv", "train_2.csv", "train_3.csv", "test_0.csv", "test_1.csv"}, []string{"train", "test"}},
		{[]string{"README.md", "data/train/shard_0.csv", "data/train/shard_1.csv", "data/test/shard_0.csv"}, []string{"train", "test"}},
		{[]string{"README.md", "data/train-00000-of-00003.csv", "data/test-00000-of-00001.csv", "data/random-00000-of-00003.csv"}, []string{"train", "test", "random"}},
	} {
		got, err := defaultPatterns(c.files)
		if err != nil {
			t.Fatalf("%v: %v", c.files, err)
		}
		var names []string
		for _, sp := range got {
			names = append(names, sp.Split)
		}
		if !slices.Equal(names, c.splits) {
			t.Errorf("%v: splits %v, want %v", c.files, names, c.splits)
		}
	}
}

func TestDefaultPatternsNoDataFiles(t *testing.T) {
	for _, files := range [][]string{nil, {"README.md"}, {".gitattributes", "README.md", ".hidden/train.csv", "__pycache__/x.py"}} {
		if got, err := defaultPatterns(files); err == nil {
			t.Errorf("%v: got %v, want an error", files, got)
		}
	}
}

func TestDefaultPatternsBadShardedSplitName(t *testing.T) {
	// The greedy match takes "my-split"; a dash is not a word character, and datasets raises
	// "Split name should match ...".
	if got, err := defaultPatterns([]string{"data/my-split-00000-of-00001.parquet"}); err == nil {
		t.Fatalf("a sharded file with a dashed split name was accepted: %v", got)
	}
}
