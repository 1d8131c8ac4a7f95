package hub

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseRepo: no input panics; an accepted one round-trips through String and yields a
// cache folder and URL that stay one path component and one URL path.
func FuzzParseRepo(f *testing.F) {
	for _, s := range []string{"gpt2", "org/name", "org/name@main", "org/name@refs/pr/1", "a--b", "-a/b", "a/b/c", "a@", "@", "a@../x", "ü/x", strings.Repeat("a", 97)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRepo(s, ModelRepo)
		if err != nil {
			if LooksLikeRepoID(s) {
				t.Fatalf("LooksLikeRepoID(%q) true but ParseRepo fails: %v", s, err)
			}
			return
		}
		if r.String() != s {
			t.Fatalf("String() = %q, input %q", r.String(), s)
		}
		folder := r.normalized().folderName()
		if strings.ContainsAny(folder, "/\\") || strings.Contains(folder, "..") {
			t.Fatalf("folder %q from %q", folder, s)
		}
		u, err := url.Parse(resolveURL("https://hf.co", r.normalized(), "config.json"))
		if err != nil || u.Host != "hf.co" || !strings.HasSuffix(u.Path, "/config.json") {
			t.Fatalf("resolve URL of %q: %v %v", s, u, err)
		}
		if rev := r.Revision; rev != "" {
			if err := validRepoPath(rev); err != nil {
				t.Fatalf("accepted revision %q is not a safe relative path: %v", rev, err)
			}
		}
	})
}

// FuzzParseRepoInfo: no API answer panics; an accepted one has a commit and only safe names.
func FuzzParseRepoInfo(f *testing.F) {
	f.Add([]byte(`{"id":"org/name","sha":"0123456789abcdef0123456789abcdef01234567","siblings":[{"rfilename":"config.json"},{"rfilename":"sub/model.safetensors"}]}`))
	f.Add([]byte(`{"sha":"0123456789abcdef0123456789abcdef01234567","siblings":[{"rfilename":"../x"}]}`))
	f.Add([]byte(`{"sha":"xyz"}`))
	f.Add([]byte(`{"sha":"0123456789abcdef0123456789abcdef01234567","siblings":null}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"siblings":[{"rfilename":5}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		commit, files, err := parseRepoInfo(data, "fuzz")
		if err != nil {
			return
		}
		if !IsCommit(commit) {
			t.Fatalf("commit %q accepted", commit)
		}
		for _, f := range files {
			if err := validRepoPath(f); err != nil {
				t.Fatalf("file %q accepted: %v", f, err)
			}
		}
	})
}

// FuzzFileMeta: no set of HEAD headers panics; accepted metadata names a usable blob, a
// commit, a size and an http(s) location.
func FuzzFileMeta(f *testing.F) {
	const c = "0123456789abcdef0123456789abcdef01234567"
	f.Add(c, `"abc123"`, "", "12", "", "")
	f.Add(c, `W/"abc123"`, `"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"`, "0", "1048576", "https://cdn.example/x?sig=1")
	f.Add(c, `"../../etc/passwd"`, "", "1", "", "")
	f.Add("nope", `""`, "", "-1", "x", "javascript:alert(1)")
	f.Add(c, `"a"`, "", "1", "", "/relative/path")
	f.Fuzz(func(t *testing.T, commit, etag, linked, length, linkedSize, location string) {
		h := http.Header{}
		set := func(k, v string) {
			if v != "" {
				h.Set(k, v)
			}
		}
		set("X-Repo-Commit", commit)
		set("ETag", etag)
		set("X-Linked-Etag", linked)
		set("Content-Length", length)
		set("X-Linked-Size", linkedSize)
		set("Location", location)
		base, _ := url.Parse("https://huggingface.co/org/name/resolve/main/f")
		m, err := parseFileMeta(h, base)
		if err != nil {
			if !utf8.ValidString(err.Error()) && utf8.ValidString(commit+etag+linked+length+linkedSize+location) {
				t.Fatalf("error message not valid UTF-8: %q", err)
			}
			return
		}
		if !IsCommit(m.commit) || !validEtag(m.etag) || m.size < 0 {
			t.Fatalf("accepted %+v", m)
		}
		if m.location != "" {
			u, err := url.Parse(m.location)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
				t.Fatalf("location %q accepted", m.location)
			}
		}
	})
}

// FuzzNormalizeETag: unquoting never panics and never leaves a quote at either end of a
// valid etag.
func FuzzNormalizeETag(f *testing.F) {
	for _, s := range []string{`"abc"`, `W/"abc"`, `abc`, `""`, `W/`, `"`, `W/W/"x"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := normalizeETag(s)
		if validEtag(e) && (strings.HasPrefix(e, `"`) || strings.HasSuffix(e, `"`) || strings.Contains(e, "/")) {
			t.Fatalf("normalizeETag(%q) = %q", s, e)
		}
	})
}

// FuzzContentRange: no header panics; accepted ranges are ordered and within the total.
func FuzzContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-99/100", "bytes 10-99/*", "bytes 5-4/10", "bytes -1-2/3", "bytes 0-0/0", "bytes 9223372036854775807-9223372036854775807/*", "items 0-1/2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		start, end, total, err := parseContentRange(s)
		if err != nil {
			return
		}
		if start < 0 || end < start || (total != -1 && total <= end) {
			t.Fatalf("parseContentRange(%q) = %d, %d, %d", s, start, end, total)
		}
	})
}

// FuzzMatchGlob: no pattern panics or takes more than quadratic time (the names and patterns
// are capped so a blow-up would show as a timeout); a pattern without metacharacters matches
// only itself, and "*" + name matches name.
func FuzzMatchGlob(f *testing.F) {
	for _, s := range [][2]string{{"*.json", "a.json"}, {"[a-", "[a-"}, {"[!]", "x"}, {"*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaa"}, {"?", "é"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		if len(pattern) > 512 || len(name) > 512 {
			return
		}
		got := matchGlob(pattern, name)
		if !strings.ContainsAny(pattern, "*?[") && got != (pattern == name) {
			t.Fatalf("literal pattern %q vs %q: %v", pattern, name, got)
		}
		if !strings.ContainsAny(name, "*?[") && !matchGlob("*"+name, name) {
			t.Fatalf("*%s does not match %q", name, name)
		}
	})
}
