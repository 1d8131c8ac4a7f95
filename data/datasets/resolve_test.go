package datasets

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestResolveFilesWithoutConfigs resolves whole datasets with no configs in their README: splits,
// format and files, including the extension filtering datasets applies after it picks a format.
func TestResolveFilesWithoutConfigs(t *testing.T) {
	for _, c := range []struct {
		name   string
		files  []string
		format string
		sep    string
		splits map[string][]string
	}{
		{"root split files", []string{"README.md", "train.csv", "test.csv"}, "csv", "",
			map[string][]string{"train": {"train.csv"}, "test": {"test.csv"}}},
		{"push_to_hub layout", []string{"README.md", ".gitattributes", "data/train-00000-of-00001.parquet"}, "parquet", "",
			map[string][]string{"train": {"data/train-00000-of-00001.parquet"}}},
		{"push_to_hub shards in order", []string{
			"data/train-00001-of-00002.parquet", "data/train-00000-of-00002.parquet",
			"data/test-00000-of-00001.parquet", "data/random-00000-of-00001.parquet",
		}, "parquet", "", map[string][]string{
			"train":  {"data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet"},
			"test":   {"data/test-00000-of-00001.parquet"},
			"random": {"data/random-00000-of-00001.parquet"},
		}},
		{"split directories", []string{"train/shard_1.csv", "train/shard_0.csv", "test/shard_0.csv"}, "csv", "",
			map[string][]string{"train": {"train/shard_0.csv", "train/shard_1.csv"}, "test": {"test/shard_0.csv"}}},
		{"keyword inside a name", []string{"data/my_train_file.txt"}, "text", "",
			map[string][]string{"train": {"data/my_train_file.txt"}}},
		{"no keyword: all train", []string{"random.txt"}, "text", "",
			map[string][]string{"train": {"random.txt"}}},
		{"dev is validation", []string{"dev.jsonl", "train.jsonl"}, "json", "",
			map[string][]string{"train": {"train.jsonl"}, "validation": {"dev.jsonl"}}},
		{"eval files are test", []string{"data/eval-a.json", "data/eval-b.json", "data/train.json"}, "json", "",
			map[string][]string{"train": {"data/train.json"}, "test": {"data/eval-a.json", "data/eval-b.json"}}},
		{"nested directories", []string{"a/b/train/c/x.arrow", "a/b/train/y.arrow", "a/valid/z.arrow"}, "arrow", "",
			map[string][]string{"train": {"a/b/train/c/x.arrow", "a/b/train/y.arrow"}, "validation": {"a/valid/z.arrow"}}},
		{"hidden and special dirs ignored", []string{".cache/train.csv", "__pycache__/test.csv", "data/train.csv", ".hidden.csv"}, "csv", "",
			map[string][]string{"train": {"data/train.csv"}}},
		{"custom sharded split", []string{"data/random-00000-of-00001.parquet"}, "parquet", "",
			map[string][]string{"random": {"data/random-00000-of-00001.parquet"}}},
		{"tsv means tab", []string{"train.tsv", "test.tsv"}, "csv", "\t",
			map[string][]string{"train": {"train.tsv"}, "test": {"test.tsv"}}},
		{"most common extension wins, others dropped", []string{"a.csv", "b.csv", "c.json", "notes.md"}, "csv", "",
			map[string][]string{"train": {"a.csv", "b.csv"}}},
		{"a tie goes to parquet", []string{"a.csv", "b.parquet"}, "parquet", "",
			map[string][]string{"train": {"b.parquet"}}},
		{"a tie goes to jsonl over json", []string{"a.json", "b.jsonl"}, "json", "",
			map[string][]string{"train": {"a.json", "b.jsonl"}}},
		{"metadata files count last", []string{"metadata.jsonl", "metadata.csv", "x.txt"}, "text", "",
			map[string][]string{"train": {"x.txt"}}},
		{"README.md is never data", []string{"README.md", "notes.txt"}, "text", "",
			map[string][]string{"train": {"notes.txt"}}},
		{"unknown extensions are not data", []string{"train.csv", "train.bin", "train.CSV"}, "csv", "",
			map[string][]string{"train": {"train.csv"}}},
		{"a keyword dir and a keyword file in one split", []string{"train/train-1/x.csv"}, "csv", "",
			// datasets lists a file once per pattern of the split that matches it.
			map[string][]string{"train": {"train/train-1/x.csv", "train/train-1/x.csv"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := ResolveFiles(c.files, nil, "")
			if err != nil {
				t.Fatal(err)
			}
			if r.Config != "default" || r.Format != c.format || r.Sep != c.sep {
				t.Errorf("config %q format %q sep %q, want default %q %q", r.Config, r.Format, r.Sep, c.format, c.sep)
			}
			if !maps.EqualFunc(r.Splits, c.splits, slices.Equal) {
				t.Errorf("splits %q, want %q", r.Splits, c.splits)
			}
		})
	}
}

// TestResolveFilesRefusals: datasets' errors, and the formats and encodings gotpu does not read,
// each named.
func TestResolveFilesRefusals(t *testing.T) {
	for _, c := range []struct {
		name  string
		files []string
		want  string
	}{
		{"images", []string{"data/image.jpg", "metadata.jsonl"}, `"imagefolder" builder`},
		{"images with metadata csv", []string{"data/image.jpg", "metadata.csv"}, `"imagefolder" builder`},
		{"audio", []string{"a.wav", "b.wav", "c.csv"}, `"audiofolder" builder`},
		{"webdataset", []string{"train-000.tar"}, `"webdataset" builder`},
		{"gzip csv", []string{"train.csv.gz", "test.csv.gz"}, `"train.csv.gz" is compressed (.gz)`},
		{"zstd jsonl", []string{"data/train.jsonl.zst"}, `"data/train.jsonl.zst" is compressed (.zst)`},
		{"zip archive", []string{"data.zip"}, "zip archives"},
		{"a zip beside csv", []string{"a.csv", "b.csv", "c.zip"}, `"c.zip" is a zip archive`},
		{"splits of two formats", []string{"train.csv", "test.json"}, "not all of one format (train: csv, test: json)"},
		{"csv and tsv splits", []string{"train.csv", "test.tsv"}, "not all of one format"},
		{"no data file", []string{"README.md", ".gitattributes"}, "contains no data files"},
		{"only unknown extensions", []string{"weights.bin"}, "no data files match"},
		{"upper-case extension", []string{"TRAIN.CSV"}, "no data files match"},
		{"eval logs", []string{"logs/run.eval", "train.csv"}, `"eval" builder`},
		{"bad path in listing", []string{"../x.csv"}, "not a clean relative path"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := ResolveFiles(c.files, nil, "")
			if err == nil {
				t.Fatalf("resolved %+v, want an error containing %q", r, c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not contain %q", err, c.want)
			}
		})
	}
}

const pushToHubReadme = `---
dataset_info:
- config_name: default
  features:
  - name: text
    dtype: string
  splits:
  - name: train
    num_examples: 3
- config_name: other
  features:
  - name: text
    dtype: string
configs:
- config_name: default
  data_files:
  - split: train
    path: data/train-*
  - split: validation
    path: data/validation-*
- config_name: other
  data_files:
  - split: train
    path: other/train-*
---
# A dataset

Text.
`

var pushToHubFiles = []string{
	".gitattributes", "README.md",
	"data/train-00001-of-00002.parquet", "data/train-00000-of-00002.parquet",
	"data/validation-00000-of-00001.parquet",
	"other/train-00000-of-00001.parquet",
}

func TestResolveFilesWithConfigs(t *testing.T) {
	r, err := ResolveFiles(pushToHubFiles, []byte(pushToHubReadme), "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"train":      {"data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet"},
		"validation": {"data/validation-00000-of-00001.parquet"},
	}
	if r.Config != "default" || r.Format != "parquet" || !maps.EqualFunc(r.Splits, want, slices.Equal) {
		t.Fatalf("got %+v, want config default, parquet, %v", r, want)
	}
	if got := r.SplitNames(); !slices.Equal(got, []string{"train", "validation"}) {
		t.Errorf("SplitNames %v", got)
	}
	if _, err := r.Split("test"); err == nil || !strings.Contains(err.Error(), "available splits: train, validation") {
		t.Errorf("Split(test): %v", err)
	}
	files, err := r.Split("train")
	if err != nil || len(files) != 2 {
		t.Fatalf("Split(train) = %v, %v", files, err)
	}
	files[0] = "changed"
	if r.Splits["train"][0] == "changed" {
		t.Error("Split returned the resolved slice itself")
	}

	r, err = ResolveFiles(pushToHubFiles, []byte(pushToHubReadme), "other")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string][]string{"train": {"other/train-00000-of-00001.parquet"}}; r.Config != "other" || !maps.EqualFunc(r.Splits, want, slices.Equal) {
		t.Fatalf("other: %+v", r)
	}

	_, err = ResolveFiles(pushToHubFiles, []byte(pushToHubReadme), "nope")
	if err == nil || !strings.Contains(err.Error(), `config "nope" not found; available configs: default, other`) {
		t.Fatalf("unknown config: %v", err)
	}
}

// TestResolveConfigPatterns: the forms of data_files, data_dir, pattern order and the errors
// datasets raises when a config's files are wrong.
func TestResolveConfigPatterns(t *testing.T) {
	files := []string{
		"README.md", "a/x.csv", "a/y.csv", "b/z.csv", "b/notes.txt", "sub/train.jsonl", "sub/test.jsonl", "sub/deep/w.csv",
	}
	for _, c := range []struct {
		name, yaml, config string
		splits             map[string][]string
		format             string
	}{
		{"string", "data_files: a/*.csv", "", map[string][]string{"train": {"a/x.csv", "a/y.csv"}}, "csv"},
		{"list", "data_files: [b/z.csv, a/*.csv]", "",
			// pattern order, each pattern's files sorted
			map[string][]string{"train": {"b/z.csv", "a/x.csv", "a/y.csv"}}, "csv"},
		{"split list", "data_files:\n  - split: train\n    path: [a/y.csv, a/x.csv]\n  - split: test\n    path: b/z.csv", "",
			map[string][]string{"train": {"a/y.csv", "a/x.csv"}, "test": {"b/z.csv"}}, "csv"},
		{"data_dir with default patterns", "data_dir: sub", "",
			map[string][]string{"train": {"sub/train.jsonl"}, "test": {"sub/test.jsonl"}}, "json"},
		{"data_dir with data_files", "data_dir: sub\n  data_files: '**/*.csv'", "",
			map[string][]string{"train": {"sub/deep/w.csv"}}, "csv"},
		{"custom split names", "data_files:\n  - split: dev.v2\n    path: a/x.csv", "",
			map[string][]string{"dev.v2": {"a/x.csv"}}, "csv"},
		{"magic pattern that finds nothing is skipped", "data_files: [a/*.csv, c/*.csv]", "",
			map[string][]string{"train": {"a/x.csv", "a/y.csv"}}, "csv"},
	} {
		t.Run(c.name, func(t *testing.T) {
			readme := "---\nconfigs:\n- config_name: default\n  " + c.yaml + "\n---\n"
			r, err := ResolveFiles(files, []byte(readme), c.config)
			if err != nil {
				t.Fatal(err)
			}
			if r.Format != c.format || !maps.EqualFunc(r.Splits, c.splits, slices.Equal) {
				t.Fatalf("got %s %q, want %s %q", r.Format, r.Splits, c.format, c.splits)
			}
		})
	}
	for _, c := range []struct{ name, yaml, want string }{
		{"missing literal file", "data_files: a/missing.csv", `unable to find "a/missing.csv"`},
		{"nothing matches", "data_files: c/*.csv", "no data files match"},
		{"mixed formats in a config", "data_files: b/*", `"b/notes.txt" is not a csv data file`},
		{"pattern leaves the dataset", "data_files: ../x.csv", `".." leaves the dataset`},
		{"double star in a name", "data_files: a/**.csv", "'**' can only be an entire path component"},
		{"data_dir leaves the dataset", "data_dir: ../up", "leaves the dataset"},
	} {
		t.Run(c.name, func(t *testing.T) {
			readme := "---\nconfigs:\n- config_name: default\n  " + c.yaml + "\n---\n"
			_, err := ResolveFiles(files, []byte(readme), "")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestResolveWithoutConfigsOnlyDefault(t *testing.T) {
	files := []string{"train.csv"}
	for _, name := range []string{"", "default"} {
		if r, err := ResolveFiles(files, nil, name); err != nil || r.Config != "default" {
			t.Errorf("config %q: %+v, %v", name, r, err)
		}
	}
	_, err := ResolveFiles(files, []byte("# no metadata\n"), "other")
	if err == nil || !strings.Contains(err.Error(), `config "other" not found`) || !strings.Contains(err.Error(), `"default"`) {
		t.Fatalf("got %v", err)
	}
}

func TestSplitNamesOrder(t *testing.T) {
	r := &Resolved{Splits: map[string][]string{"zeta": nil, "test": nil, "alpha": nil, "train": nil, "validation": nil}}
	if got, want := r.SplitNames(), []string{"train", "validation", "test", "alpha", "zeta"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// BenchmarkResolveFiles100k resolves a listing of 100,000 files by the default patterns, all of
// them train files: every keyword pattern is tried against every file.
func BenchmarkResolveFiles100k(b *testing.B) {
	files := make([]string, 0, 100_000)
	for i := range 100_000 {
		files = append(files, fmt.Sprintf("train/part%03d/chunk-%06d.parquet", i%100, i))
	}
	b.ResetTimer()
	for range b.N {
		r, err := ResolveFiles(files, nil, "")
		if err != nil || len(r.Splits["train"]) != len(files) {
			b.Fatalf("%v, %d files", err, len(r.Splits["train"]))
		}
	}
}

// TestHiddenOrSpecialDataDir is datasets' test_resolve_pattern_locally_hidden_base_path and
// ..._special_base_path: a hidden or "__" base directory does not hide the files below it.
func TestHiddenOrSpecialDataDir(t *testing.T) {
	for _, dir := range []string{".test_hidden_base_path", "__test_special_base_path__"} {
		readme := "---\nconfigs:\n- config_name: default\n  data_dir: " + dir + "\n---\n"
		r, err := ResolveFiles([]string{dir + "/a.txt", "b.txt"}, []byte(readme), "")
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if want := []string{dir + "/a.txt"}; !slices.Equal(r.Splits["train"], want) {
			t.Errorf("%s: %q, want %q", dir, r.Splits, want)
		}
	}
}
