package datasets

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeTree creates files (relative path → content) below dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func absAll(dir string, rel ...string) []string {
	out := make([]string, len(rel))
	for i, r := range rel {
		out[i] = filepath.Join(dir, filepath.FromSlash(r))
	}
	return out
}

func TestResolveLocalDefaultPatterns(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"README.md":              "# no metadata\n",
		"data/train.jsonl":       "{}\n",
		"data/valid.jsonl":       "{}\n",
		".git/objects/train.csv": "not data",
		".cache/test.jsonl":      "hidden",
		"__pycache__/test.jsonl": "special",
	})
	r, err := ResolveLocal(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"train":      absAll(dir, "data/train.jsonl"),
		"validation": absAll(dir, "data/valid.jsonl"),
	}
	if r.Repo != dir || r.Commit != "" || r.Format != "json" || !maps.EqualFunc(r.Splits, want, slices.Equal) {
		t.Fatalf("got %+v, want %v", r, want)
	}
}

func TestResolveLocalConfigs(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"README.md":                              pushToHubReadme,
		"data/train-00000-of-00002.parquet":      "a",
		"data/train-00001-of-00002.parquet":      "b",
		"data/validation-00000-of-00001.parquet": "c",
		"other/train-00000-of-00001.parquet":     "d",
	})
	r, err := ResolveLocal(dir, "other")
	if err != nil {
		t.Fatal(err)
	}
	if want := absAll(dir, "other/train-00000-of-00001.parquet"); r.Config != "other" || !slices.Equal(r.Splits["train"], want) {
		t.Fatalf("got %+v", r)
	}
	// A relative dir resolves to the same absolute paths.
	t.Chdir(filepath.Dir(dir))
	r2, err := ResolveLocal(filepath.Base(dir), "other")
	if err != nil {
		t.Fatal(err)
	}
	if r2.Repo != dir || !slices.Equal(r2.Splits["train"], r.Splits["train"]) {
		t.Fatalf("relative dir: %+v", r2)
	}
	if _, err := ResolveLocal(dir, "missing"); err == nil || !strings.Contains(err.Error(), "available configs: default, other") {
		t.Fatalf("unknown config: %v", err)
	}
}

// TestResolveLocalHuggingfaceYAML: a standalone .huggingface.yaml replaces the README's configs.
func TestResolveLocalHuggingfaceYAML(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"README.md":         "---\nconfigs:\n- config_name: readme\n  data_files: a.csv\n---\n",
		".huggingface.yaml": "configs:\n- config_name: yaml\n  data_files: b.csv\n",
		"a.csv":             "x\n1\n",
		"b.csv":             "x\n2\n",
	})
	r, err := ResolveLocal(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Config != "yaml" || !slices.Equal(r.Splits["train"], absAll(dir, "b.csv")) {
		t.Fatalf("got %+v", r)
	}
}

// TestResolveLocalLinks: linked files and directories are followed like fsspec's local listing
// does, and a link cycle is walked once.
func TestResolveLocalLinks(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	writeTree(t, outside, map[string]string{"shared/x.txt": "hello\n", "one.txt": "1\n"})
	writeTree(t, dir, map[string]string{"train/a.txt": "a\n"})
	for _, l := range [][2]string{
		{filepath.Join(outside, "one.txt"), filepath.Join(dir, "train", "linked.txt")},
		{filepath.Join(outside, "shared"), filepath.Join(dir, "test")},
		{dir, filepath.Join(dir, "train", "loop")}, // a cycle back to the root
		{filepath.Join(outside, "missing"), filepath.Join(dir, "train", "dangling.txt")},
	} {
		if err := os.Symlink(l[0], l[1]); err != nil {
			t.Skipf("symlinks unavailable: %v", err)
		}
	}
	r, err := ResolveLocal(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"train": absAll(dir, "train/a.txt", "train/linked.txt"),
		"test":  absAll(dir, "test/x.txt"),
	}
	if !maps.EqualFunc(r.Splits, want, slices.Equal) {
		t.Fatalf("got %q, want %q", r.Splits, want)
	}
}

func TestResolveLocalErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := ResolveLocal(filepath.Join(dir, "missing"), ""); err == nil {
		t.Error("a missing directory resolved")
	}
	writeTree(t, dir, map[string]string{"file.csv": "x\n"})
	if _, err := ResolveLocal(filepath.Join(dir, "file.csv"), ""); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("a file as the directory: %v", err)
	}
	empty := t.TempDir()
	if _, err := ResolveLocal(empty, ""); err == nil || !strings.Contains(err.Error(), "no data files") || !strings.Contains(err.Error(), empty) {
		t.Errorf("empty directory: %v", err)
	}
	big := t.TempDir()
	writeTree(t, big, map[string]string{"README.md": "---\n" + strings.Repeat("# pad\n", MaxReadmeBytes/6+1) + "---\n", "a.csv": "x\n"})
	if _, err := ResolveLocal(big, ""); err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Errorf("oversized README: %v", err)
	}
	bad := t.TempDir()
	writeTree(t, bad, map[string]string{"README.md": "---\nconfigs:\n- config_name: a\n  data_files: {x: y}\n---\n", "a.csv": "x\n"})
	if _, err := ResolveLocal(bad, ""); err == nil || !strings.Contains(err.Error(), "README.md:4: configs[0].data_files") {
		t.Errorf("bad README: %v", err)
	}
}
