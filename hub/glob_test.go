package hub

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

var globCases = []struct {
	pattern, name string
	want          bool
}{
	{"*.json", "config.json", true},
	{"*.json", "sub/dir/x.json", true}, // "*" crosses "/"
	{"*.json", "config.jsonl", false},
	{"sub/*", "sub/a/b.bin", true},
	{"model-?????-of-*.safetensors", "model-00001-of-00002.safetensors", true},
	{"model-?????-of-*.safetensors", "model-0001-of-00002.safetensors", false},
	{"[ct]*", "tokenizer.json", true},
	{"[!ct]*", "tokenizer.json", false},
	{"[!ct]*", "README.md", true},
	{"[a-c]x", "bx", true},
	{"[a-c]x", "dx", false},
	{"[]]x", "]x", true},
	{"[!]]x", "]x", false},
	{"[a-]x", "-x", true},
	{"[z-a]x", "mx", false},
	{"[!z-a]x", "mx", true},
	{"[x", "[x", true}, // no closing "]": a literal "["
	{"a[", "a[", true},
	{"\\*", "\\abc", true}, // backslash is not an escape
	{"", "", true},
	{"", "a", false},
	{"*", "", true},
	{"**", "a/b", true},
	{"?", "é", true}, // one character, not one byte
	{"*a*a*a*a*a*a*b", strings.Repeat("a", 40), false},
	{"ünï*", "ünïcode", true},
}

func TestMatchGlob(t *testing.T) {
	for _, tc := range globCases {
		if got := matchGlob(tc.pattern, tc.name); got != tc.want {
			t.Errorf("matchGlob(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}

// TestMatchGlobAgainstPython checks matchGlob against Python's own fnmatch.fnmatchcase (what
// huggingface_hub's filter_repo_objects calls on POSIX) on the table above and on generated
// cases. Skipped where python3 is not installed.
func TestMatchGlobAgainstPython(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	type pair struct {
		P string `json:"p"`
		N string `json:"n"`
	}
	var pairs []pair
	for _, tc := range globCases {
		pairs = append(pairs, pair{tc.pattern, tc.name})
	}
	// Every pattern of 1 to 3 characters over a small alphabet rich in metacharacters, against
	// names that exercise them.
	alpha := []string{"a", "b", "-", "/", "*", "?", "[", "]", "!", "z"}
	names := []string{"", "a", "ab", "a/b", "b-a", "[a]", "z!", "]", "a*b", "-", "/a/", "ba/zb"}
	patterns := []string{""}
	for length := 1; length <= 3; length++ {
		var next []string
		for _, p := range patterns {
			for _, c := range alpha {
				next = append(next, p+c)
			}
		}
		patterns = next
		for _, p := range patterns {
			for _, n := range names {
				pairs = append(pairs, pair{p, n})
			}
		}
	}
	in, err := json.Marshal(pairs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, "-c", `import fnmatch, json, sys
print(json.dumps([fnmatch.fnmatchcase(x["n"], x["p"]) for x in json.load(sys.stdin)]))`)
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v", err)
	}
	var want []bool
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(pairs) {
		t.Fatalf("python3 output: %v (%d answers for %d cases)", err, len(want), len(pairs))
	}
	bad := 0
	for i, p := range pairs {
		if got := matchGlob(p.P, p.N); got != want[i] {
			bad++
			if bad <= 10 {
				t.Errorf("matchGlob(%q, %q) = %v, Python's fnmatchcase says %v", p.P, p.N, got, want[i])
			}
		}
	}
	t.Logf("%d (pattern, name) cases agree with Python's fnmatch.fnmatchcase; %d differ", len(pairs)-bad, bad)
}

func TestFilterFiles(t *testing.T) {
	files := []string{"a.json", "b/c.json", "b/d.bin", "e.bin"}
	for _, tc := range []struct {
		inc, exc, want []string
	}{
		{nil, nil, files},
		{[]string{"b/"}, nil, []string{"b/c.json", "b/d.bin"}},
		{nil, []string{"b/"}, []string{"a.json", "e.bin"}},
		{[]string{"*.json"}, []string{"b/*"}, []string{"a.json"}},
	} {
		if got := filterFiles(files, tc.inc, tc.exc); !slices.Equal(got, tc.want) {
			t.Errorf("filterFiles(%v, %v) = %v, want %v", tc.inc, tc.exc, got, tc.want)
		}
	}
}
