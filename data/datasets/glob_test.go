package datasets

import (
	"slices"
	"strings"
	"testing"
)

// resolveAll returns the files (sorted input order) that pattern resolves to, with no extension
// filter: datasets' resolve_pattern without allowed_extensions.
func resolveAll(t *testing.T, pattern string, files []string) []string {
	t.Helper()
	g, err := compileGlob(pattern)
	if err != nil {
		t.Fatalf("compileGlob(%q): %v", pattern, err)
	}
	sorted := slices.Sorted(slices.Values(files))
	var out []string
	for _, f := range sorted {
		if g.match(f) {
			out = append(out, f)
		}
	}
	return out
}

// complexDataDir is datasets' complex_data_dir fixture (tests/test_data_files.py).
var complexDataDir = []string{
	"README.md",
	".dummy",
	"data/train.txt",
	"data/test.txt",
	"data/subdir/train.txt",
	"data/subdir/test.txt",
	"data/.dummy_subdir/train.txt",
	"data/.dummy_subdir/test.txt",
	"__pycache__/script.py",
}

// TestPatternResultsFixture checks datasets' _TEST_PATTERNS_SIZES for the fixture (hidden files,
// the hidden subdir, __pycache__ and README.md are never matched by these patterns), with the
// files spelled out.
func TestPatternResultsFixture(t *testing.T) {
	four := []string{"data/subdir/test.txt", "data/subdir/train.txt", "data/test.txt", "data/train.txt"}
	for _, c := range []struct {
		pattern string
		want    []string
	}{
		{"*", nil},
		{"**", four},
		{"**/*", four},
		{"*.txt", nil},
		{"data/*", []string{"data/test.txt", "data/train.txt"}},
		{"data/**", four},
		{"**/*.txt", four},
		{"**/train.txt", []string{"data/subdir/train.txt", "data/train.txt"}},
	} {
		if got := resolveAll(t, c.pattern, complexDataDir); !slices.Equal(got, c.want) {
			t.Errorf("%q: got %q, want %q", c.pattern, got, c.want)
		}
	}
}

// TestHiddenAndSpecialOnlyIfRequested is datasets' test_is_unrequested_hidden_file... and
// test_is_inside_unrequested_special_dir, plus the resolve_pattern cases that request hidden
// files and dirs explicitly.
func TestHiddenAndSpecialOnlyIfRequested(t *testing.T) {
	for _, c := range []struct {
		path, pattern string
		kept          bool
	}{
		{".hidden_file.txt", "**", false},
		{".hidden_file.txt", ".*", true},
		{".hidden_dir/a.txt", "**", false},
		{".hidden_dir/a.txt", ".*/*", true},
		{".hidden_dir/a.txt", ".hidden_dir/*", true},
		{".hidden_dir/.hidden_file.txt", "**", false},
		{".hidden_dir/.hidden_file.txt", ".*/*", false},
		{".hidden_dir/.hidden_file.txt", ".*/.*", true},
		{".hidden_dir/.hidden_file.txt", ".hidden_dir/*", false},
		{".hidden_dir/.hidden_file.txt", ".hidden_dir/.*", true},
		{"__pycache__/b.txt", "**", false},
		{"__pycache__/b.txt", "*/b.txt", false},
		{"__pycache__/b.txt", "__pycache__/*", true},
		{"__pycache__/__b.txt", "__pycache__/*", true},
		{"__pycache__/__b.txt", "__*/*", true},
		{"__b.txt", "*", true},
		{"data/.dummy_subdir/train.txt", "data/*dummy_subdir/train.txt", false},
		{"data/.dummy_subdir/train.txt", "data/.dummy_subdir/train.txt", true},
		{"data/.dummy_subdir/train.txt", "*/.dummy_subdir/train.txt", true},
		{".dummy", "*dummy", false},
		{".dummy", ".dummy", true},
		// README.md and the other metadata files are data only when named.
		{"README.md", "**", false},
		{"README.md", "README.md", true},
		{"sub/dataset_infos.json", "**/*.json", false},
		{"sub/config.json", "sub/config.json", true},
	} {
		g, err := compileGlob(c.pattern)
		if err != nil {
			t.Fatalf("%q: %v", c.pattern, err)
		}
		if got := g.match(c.path); got != c.kept {
			t.Errorf("pattern %q, path %q: kept=%v, want %v", c.pattern, c.path, got, c.kept)
		}
	}
}

func TestResolveSortedFiles(t *testing.T) {
	got := resolveAll(t, "*", []string{"3.txt", "0.txt", "2.txt"})
	if want := []string{"0.txt", "2.txt", "3.txt"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestGlobSemantics checks fsspec's glob (>= 2023.12) rules one by one.
func TestGlobSemantics(t *testing.T) {
	for _, c := range []struct {
		pattern, path string
		want          bool
	}{
		{"**", "a", true},
		{"**", "a/b/c.csv", true},
		{"**/x.csv", "x.csv", true}, // "**/" is zero or more directories
		{"**/x.csv", "a/b/x.csv", true},
		{"a/**", "a/b", true},
		{"a/**", "a/b/c", true},
		{"a/**", "ab/c", false},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"*", "a", true},
		{"*", "a/b", false},     // "*" does not cross "/"
		{"*/b", "a/b", true},    //
		{"*/b", "b", false},     // a whole-component "*" needs a character
		{"a*", "a", true},       // inside a component "*" may be empty
		{"a*b", "a/b", false},   // and never crosses "/"
		{"a?c", "abc", true},    //
		{"a?c", "a/c", false},   // "?" is not "/"
		{"[ab]x", "bx", true},   //
		{"[!ab]x", "cx", true},  //
		{"[!ab]x", "ax", false}, //
		{"a[!x]b", "a/b", true}, // a negated class may match "/" (as in Python's fnmatch)
		{"[a-c]", "b", true},
		{"[c-a]", "b", false}, // a reversed range is empty
		{"[c-a]", "c", false},
		{"[!c-a]", "q", true}, // negated empty class: any character
		{"[a-]", "-", true},   // trailing "-" is literal
		{"[-a]", "-", true},   // leading "-" is literal
		{"[]a]", "]", true},   // leading "]" is literal
		{"[!]a]", "b", true},
		{"[!]a]", "]", false},
		{"a[b", "a[b", true}, // unclosed "[" is literal
		{"[a-c-e]", "-", true},
		{"[a-c-e]", "d", false},
		{"[a-c-e]", "e", true},
		{"[x-ab-c]", "b", true},
		{"[x-ab-c]", "x", false},
		{"f.csv", "fxcsv", false}, // "." is literal
		{"a+b(c)", "a+b(c)", true},
		{"data/*.csv", "data/x.csv", true},
		{"data/*.csv", "data/sub/x.csv", false},
		{"train[-._ 0-9]*", "train_1.csv", true},
		{"train[-._ 0-9]*", "trainer.csv", false},
		{"**/*[-._ 0-9]test[-._ 0-9]*", "my test file.txt", true},
		{"./data/x.csv", "data/x.csv", true}, // gotpu drops a leading "./"
	} {
		g, err := compileGlob(c.pattern)
		if err != nil {
			t.Fatalf("%q: %v", c.pattern, err)
		}
		if got := g.match(c.path); got != c.want {
			t.Errorf("pattern %q, path %q: %v, want %v (regexp %v)", c.pattern, c.path, got, c.want, g.re)
		}
	}
}

func TestGlobRefusals(t *testing.T) {
	for _, p := range []string{
		"**.csv",       // fsspec: '**' can only be an entire path component
		"a/b**/c",      //
		"/abs/x.csv",   // outside the dataset
		"../x.csv",     //
		"a/../../x",    //
		"hf://d/x.csv", // a URL
		"zip://*::a.zip",
		"",
		strings.Repeat("a", maxPatternLen+1),
	} {
		if _, err := compileGlob(p); err == nil {
			t.Errorf("compileGlob(%q) accepted it", p)
		}
	}
}
