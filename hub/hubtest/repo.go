package hubtest

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"
)

// DefaultLFSThreshold is the size from which a file is stored as LFS when RepoOptions leaves
// LFSThreshold at 0.
const DefaultLFSThreshold = 1024

// RepoOptions describe a repo or branch added with AddRepo.
type RepoOptions struct {
	// Gated repos answer 401 GatedRepo without the server's token.
	Gated bool
	// Private repos answer 401 RepoNotFound without the server's token.
	Private bool
	// Branch is the branch (or tag, or "refs/pr/N") the files are committed to; "" is "main".
	Branch string
	// LFSThreshold: files of at least this many bytes are LFS files. 0 means
	// DefaultLFSThreshold; negative means none.
	LFSThreshold int
	// Commit overrides the commit sha (40 lowercase hex digits); "" derives it from the files.
	Commit string
}

// fakeRepo is one repository: branches pointing at commits.
type fakeRepo struct {
	typ, id        string
	gated, private bool
	branches       map[string]string
	commits        map[string]*fakeCommit
}

type fakeCommit struct {
	sha   string
	date  time.Time
	files map[string]*fakeFile
	dirs  map[string]bool // every directory holding a file, "a" and "a/b" for "a/b/c"
}

type fakeFile struct {
	path    string
	content []byte
	gitOID  string // the git blob sha1: of the content, or of the LFS pointer for LFS files
	lfs     bool
	sha256  string
	pointer int // size of the LFS pointer file
}

// GitBlobSHA1 is git's object id of a blob: sha1("blob <size>\0" + content), the ETag the Hub
// sends for a regular file.
func GitBlobSHA1(content []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// SHA256 is the hex sha256 of content, the X-Linked-Etag of an LFS file.
func SHA256(content []byte) string {
	s := sha256.Sum256(content)
	return hex.EncodeToString(s[:])
}

// lfsPointer is the git-lfs pointer file committed in place of an LFS file.
func lfsPointer(sha string, size int) string {
	return fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", sha, size)
}

func newCommit(files map[string][]byte, threshold int, sha string) *fakeCommit {
	c := &fakeCommit{files: map[string]*fakeFile{}, dirs: map[string]bool{}, date: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	h := sha1.New()
	h.Write([]byte("hubtest commit\n"))
	for _, p := range paths {
		content := append([]byte(nil), files[p]...)
		f := &fakeFile{path: p, content: content}
		if threshold > 0 && len(content) >= threshold {
			f.lfs = true
			f.sha256 = SHA256(content)
			ptr := lfsPointer(f.sha256, len(content))
			f.pointer = len(ptr)
			f.gitOID = GitBlobSHA1([]byte(ptr))
		} else {
			f.gitOID = GitBlobSHA1(content)
		}
		c.files[p] = f
		for d := p; strings.Contains(d, "/"); {
			d = d[:strings.LastIndex(d, "/")]
			c.dirs[d] = true
		}
		fmt.Fprintf(h, "%s\x00%s\n", p, f.gitOID)
	}
	c.sha = sha
	if c.sha == "" {
		c.sha = hex.EncodeToString(h.Sum(nil))
	}
	return c
}

func repoKey(typ, id string) string { return typ + ":" + id }

// AddRepo commits files (path → content) to a branch of the repo typ ("model", "dataset" or
// "space") id, creating the repo if needed, and returns the commit sha. The Gated and Private
// options of the latest call apply to the whole repo. The contents are copied.
func (s *Server) AddRepo(typ, id string, files map[string][]byte, opts RepoOptions) string {
	switch typ {
	case "model", "dataset", "space":
	default:
		s.fail("hubtest: AddRepo: repo type %q is not model, dataset or space", typ)
		return ""
	}
	if opts.Commit != "" && !isCommit(opts.Commit) {
		s.fail("hubtest: AddRepo %s: RepoOptions.Commit %q is not 40 lowercase hex digits", id, opts.Commit)
		return ""
	}
	threshold := opts.LFSThreshold
	if threshold == 0 {
		threshold = DefaultLFSThreshold
	}
	branch := opts.Branch
	if branch == "" {
		branch = "main"
	}
	c := newCommit(files, threshold, opts.Commit)

	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoKey(typ, id)]
	if r == nil {
		r = &fakeRepo{typ: typ, id: id, branches: map[string]string{}, commits: map[string]*fakeCommit{}}
		s.repos[repoKey(typ, id)] = r
	}
	r.gated, r.private = opts.Gated, opts.Private
	r.branches[branch] = c.sha
	r.commits[c.sha] = c
	for _, f := range c.files {
		if f.lfs {
			s.blobs[f.sha256] = f.content
		}
	}
	return c.sha
}

// Rename makes requests for the repo typ/from answer with a 307 to the same path under the id
// to, relative to the Hub host, as the Hub does for a renamed repo.
func (s *Server) Rename(typ, from, to string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renamed[repoKey(typ, from)] = to
}

// resolveRev maps a branch, tag or known commit to a commit of r.
func (r *fakeRepo) resolveRev(rev string) *fakeCommit {
	if sha, ok := r.branches[rev]; ok {
		return r.commits[sha]
	}
	return r.commits[rev]
}

func isCommit(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
