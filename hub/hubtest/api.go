package hubtest

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
)

// maxAPIBody bounds a paths-info request body.
const maxAPIBody = 1 << 20

// isAction says whether seg names an API route after the repo id.
func isAction(seg string) bool {
	return seg == "revision" || seg == "tree" || seg == "paths-info"
}

// serveAPI answers /api/{models,datasets,spaces}/{id}[/{action}/{rev}[/{path}]].
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, segs []string) {
	if len(segs) < 2 {
		http.NotFound(w, r)
		return
	}
	typ, ok := repoType(segs[0])
	if !ok {
		http.NotFound(w, r)
		return
	}
	segs = segs[1:]
	var id, action string
	var rest []string
	switch {
	case len(segs) >= 3 && isAction(segs[2]):
		id, action, rest = segs[0]+"/"+segs[1], segs[2], segs[3:]
	case len(segs) >= 2 && isAction(segs[1]):
		id, action, rest = segs[0], segs[1], segs[2:]
	case len(segs) == 2:
		id = segs[0] + "/" + segs[1]
	case len(segs) == 1:
		id = segs[0]
	default:
		http.NotFound(w, r)
		return
	}
	repo := s.lookup(w, r, typ, id, func(to string) string {
		p := "/api/" + typ + "s/" + to
		if action != "" {
			p += "/" + action + "/" + escapeSegments(rest)
		}
		return p
	})
	if repo == nil {
		return
	}
	rev, rest := takeRevision(rest)
	if rev == "" {
		rev = "main"
	}
	s.mu.Lock()
	c := repo.resolveRev(rev)
	s.mu.Unlock()
	if c == nil {
		hubError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	switch action {
	case "", "revision":
		if r.Method != http.MethodGet {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		s.serveInfo(w, r, repo, c)
	case "tree":
		if r.Method != http.MethodGet {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		q := r.URL.Query()
		dir := strings.Join(rest, "/")
		if dir != "" && !c.dirs[dir] {
			hubError(w, http.StatusNotFound, "EntryNotFound", "Entry not found: "+dir)
			return
		}
		s.writeTree(w, r, treeEntries(c, dir, q.Get("recursive") == "true", q.Get("expand") == "true"))
	case "paths-info":
		if r.Method != http.MethodPost {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		paths, expand, err := readPathsInfo(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		out := []entry{}
		for _, p := range paths {
			if f := c.files[p]; f != nil {
				out = append(out, fileEntry(c, f, expand))
			} else if c.dirs[p] {
				out = append(out, dirEntry(p))
			}
		}
		writeJSON(w, out)
	}
}

func escapeSegments(segs []string) string {
	out := make([]string, len(segs))
	for i, s := range segs {
		out[i] = url.PathEscape(s)
	}
	return strings.Join(out, "/")
}

type lfsInfo struct {
	SHA256      string `json:"sha256,omitempty"`
	OID         string `json:"oid,omitempty"`
	Size        int    `json:"size"`
	PointerSize int    `json:"pointerSize"`
}

type sibling struct {
	RFilename string   `json:"rfilename"`
	BlobID    string   `json:"blobId,omitempty"`
	Size      *int     `json:"size,omitempty"`
	LFS       *lfsInfo `json:"lfs,omitempty"`
}

// serveInfo answers the repo-info API with the fields clients read.
func (s *Server) serveInfo(w http.ResponseWriter, r *http.Request, repo *fakeRepo, c *fakeCommit) {
	blobs := r.URL.Query().Get("blobs") == "true"
	names := make([]string, 0, len(c.files))
	for p := range c.files {
		names = append(names, p)
	}
	sort.Strings(names)
	sibs := make([]sibling, 0, len(names))
	for _, p := range names {
		f := c.files[p]
		sb := sibling{RFilename: p}
		if blobs {
			n := len(f.content)
			sb.BlobID, sb.Size = f.gitOID, &n
			if f.lfs {
				sb.LFS = &lfsInfo{SHA256: f.sha256, Size: n, PointerSize: f.pointer}
			}
		}
		sibs = append(sibs, sb)
	}
	var gated any = false
	if repo.gated {
		gated = "manual"
	}
	info := map[string]any{
		"_id":          hex.EncodeToString(sha1Sum(repo.typ + repo.id)[:12]),
		"id":           repo.id,
		"sha":          c.sha,
		"private":      repo.private,
		"gated":        gated,
		"disabled":     false,
		"downloads":    0,
		"likes":        0,
		"lastModified": c.date.Format(time.RFC3339),
		"tags":         []string{},
		"siblings":     sibs,
	}
	if repo.typ == "model" {
		info["modelId"] = repo.id
	}
	writeJSON(w, info)
}

// entry is one item of the tree and paths-info APIs.
type entry struct {
	Type       string         `json:"type"`
	OID        string         `json:"oid"`
	Size       int            `json:"size"`
	Path       string         `json:"path"`
	LFS        *lfsInfo       `json:"lfs,omitempty"`
	LastCommit map[string]any `json:"lastCommit,omitempty"`
	Security   map[string]any `json:"securityFileStatus,omitempty"`
}

func fileEntry(c *fakeCommit, f *fakeFile, expand bool) entry {
	e := entry{Type: "file", OID: f.gitOID, Size: len(f.content), Path: f.path}
	if f.lfs {
		e.LFS = &lfsInfo{OID: f.sha256, Size: len(f.content), PointerSize: f.pointer}
	}
	if expand {
		e.LastCommit = map[string]any{"id": c.sha, "title": "hubtest commit", "date": c.date.Format(time.RFC3339)}
		e.Security = map[string]any{"status": "unscanned"}
	}
	return e
}

func dirEntry(p string) entry {
	return entry{Type: "directory", OID: hex.EncodeToString(sha1Sum("tree " + p)), Size: 0, Path: p}
}

// treeEntries lists dir ("" is the root): its children, or everything below it if recursive.
func treeEntries(c *fakeCommit, dir string, recursive, expand bool) []entry {
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
	}
	under := func(p string) bool {
		if !strings.HasPrefix(p, prefix) {
			return false
		}
		return recursive || !strings.Contains(p[len(prefix):], "/")
	}
	out := []entry{}
	for d := range c.dirs {
		if under(d) {
			out = append(out, dirEntry(d))
		}
	}
	for p, f := range c.files {
		if under(p) {
			out = append(out, fileEntry(c, f, expand))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// readPathsInfo reads the paths and expand flag of a paths-info request, sent as JSON
// (@huggingface/hub) or as a form (huggingface_hub).
func readPathsInfo(r *http.Request) ([]string, bool, error) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	body := http.MaxBytesReader(nil, r.Body, maxAPIBody)
	if ct == "application/json" {
		var req struct {
			Paths  []string `json:"paths"`
			Expand bool     `json:"expand"`
		}
		data, err := io.ReadAll(body)
		if err != nil {
			return nil, false, err
		}
		if err := json.Unmarshal(data, &req); err != nil {
			return nil, false, err
		}
		return req.Paths, req.Expand, nil
	}
	r.Body = body
	if err := r.ParseForm(); err != nil {
		return nil, false, err
	}
	return r.PostForm["paths"], r.PostForm.Get("expand") == "true" || r.PostForm.Get("expand") == "True", nil
}

func writeJSON(w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(data)
}

func sha1Sum(s string) []byte {
	h := sha1.Sum([]byte(s))
	return h[:]
}
