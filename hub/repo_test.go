package hub

import (
	"strings"
	"testing"
)

func TestParseRepo(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Repo
	}{
		{"gpt2", Repo{ID: "gpt2", Type: ModelRepo}},
		{"openai-community/gpt2", Repo{ID: "openai-community/gpt2", Type: ModelRepo}},
		{"Qwen/Qwen3-0.6B@main", Repo{ID: "Qwen/Qwen3-0.6B", Type: ModelRepo, Revision: "main"}},
		{"org/name@refs/pr/1", Repo{ID: "org/name", Type: ModelRepo, Revision: "refs/pr/1"}},
		{"org/name@0123456789abcdef0123456789abcdef01234567", Repo{ID: "org/name", Type: ModelRepo, Revision: "0123456789abcdef0123456789abcdef01234567"}},
		{"a_b.c/d_e.f", Repo{ID: "a_b.c/d_e.f", Type: ModelRepo}},
		{strings.Repeat("n", 96), Repo{ID: strings.Repeat("n", 96), Type: ModelRepo}},
	} {
		got, err := ParseRepo(tc.in, ModelRepo)
		if err != nil || got != tc.want {
			t.Errorf("ParseRepo(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if !LooksLikeRepoID(tc.in) {
			t.Errorf("LooksLikeRepoID(%q) = false", tc.in)
		}
	}
	for _, bad := range []string{
		"", "/", "a/b/c", "-a", "a-", ".a", "a.", "org/-a", "org./a", "a--b", "a..b", "a b", "a/b@", "@main",
		"./model", "../model", "/abs/path", "~/model", strings.Repeat("n", 97), "a@../../etc", "a@x//y", "a@x\\y",
		"a@" + strings.Repeat("r", 300), "ünï/code", "org/na$me",
	} {
		if r, err := ParseRepo(bad, ModelRepo); err == nil {
			t.Errorf("ParseRepo(%q) accepted: %+v", bad, r)
		} else if !strings.HasPrefix(err.Error(), "hub: ") {
			t.Errorf("ParseRepo(%q): error %q", bad, err)
		}
		if LooksLikeRepoID(bad) {
			t.Errorf("LooksLikeRepoID(%q) = true", bad)
		}
	}
	if _, err := ParseRepo("org/name", "bucket"); err == nil {
		t.Error("repo type bucket accepted")
	}
}

func TestRepoPaths(t *testing.T) {
	r := Repo{ID: "org/name", Type: DatasetRepo, Revision: "refs/pr/1"}
	if got := r.folderName(); got != "datasets--org--name" {
		t.Errorf("folderName = %q", got)
	}
	if got := resolveURL("https://hf.co", r, "dir/a b#.txt"); got != "https://hf.co/datasets/org/name/resolve/refs%2Fpr%2F1/dir/a%20b%23.txt" {
		t.Errorf("resolveURL = %q", got)
	}
	if got := infoURL("https://hf.co", r); got != "https://hf.co/api/datasets/org/name/revision/refs%2Fpr%2F1" {
		t.Errorf("infoURL = %q", got)
	}
	m := Repo{ID: "gpt2"}.normalized()
	if got := resolveURL("https://hf.co", m, "config.json"); got != "https://hf.co/gpt2/resolve/main/config.json" {
		t.Errorf("resolveURL = %q", got)
	}
	if got := (Repo{ID: "org/x", Type: SpaceRepo}).folderName(); got != "spaces--org--x" {
		t.Errorf("space folder %q", got)
	}
}

func TestValidRepoPath(t *testing.T) {
	for _, ok := range []string{"a", "a/b.c", "sub/dir/file.txt", ".gitattributes", "a/.hidden", "..a", "a..b"} {
		if err := validRepoPath(ok); err != nil {
			t.Errorf("validRepoPath(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/a", "a/", "a//b", "..", "../a", "a/..", "a/./b", ".", "a\\b", "a\x00b", strings.Repeat("x", 256), strings.Repeat("x/", 2100)} {
		if err := validRepoPath(bad); err == nil {
			t.Errorf("validRepoPath(%q) accepted", bad)
		}
	}
}
