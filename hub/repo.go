package hub

import (
	"fmt"
	"net/url"
	"strings"
)

// RepoType is the kind of Hub repository; it picks the URL prefix and the cache folder prefix.
type RepoType string

const (
	ModelRepo   RepoType = "model"
	DatasetRepo RepoType = "dataset"
	SpaceRepo   RepoType = "space"
)

// DefaultRevision is the revision used when Repo.Revision is empty, as in huggingface_hub.
const DefaultRevision = "main"

// maxRepoNameLen is validate_repo_id's limit on the name part of a repo id.
const maxRepoNameLen = 96

// maxRevisionLen bounds a revision: it becomes a path under refs/ and a URL segment.
const maxRevisionLen = 256

// Repo names a repository and a revision of it.
type Repo struct {
	ID       string   // "org/name" or "name"
	Type     RepoType // "" means ModelRepo
	Revision string   // branch, tag, "refs/pr/N" or a 40-hex commit; "" means "main"
}

// ParseRepo parses "org/name" or "name", optionally followed by "@revision", as a repo of type
// t. The id is checked as huggingface_hub's validate_repo_id checks it: letters, digits, "_",
// "-" and ".", at most one "/", no "--" or "..", neither part starting or ending with "-" or ".",
// a name of at most 96 characters.
func ParseRepo(s string, t RepoType) (Repo, error) {
	id, rev, hasRev := strings.Cut(s, "@")
	r := Repo{ID: id, Type: t, Revision: rev}
	if hasRev && rev == "" {
		return Repo{}, fmt.Errorf("hub: repo %q: empty revision after @", s)
	}
	if err := r.validate(); err != nil {
		return Repo{}, err
	}
	return r, nil
}

// LooksLikeRepoID reports whether ParseRepo would accept s as a model repo. Callers that also
// accept local paths should look for the path first: "models/gpt2" is a valid repo id too.
func LooksLikeRepoID(s string) bool {
	_, err := ParseRepo(s, ModelRepo)
	return err == nil
}

// String formats the repo as ParseRepo reads it ("org/name@rev"; the type is not shown).
func (r Repo) String() string {
	if r.Revision == "" {
		return r.ID
	}
	return r.ID + "@" + r.Revision
}

// normalized fills the defaults of Type and Revision.
func (r Repo) normalized() Repo {
	if r.Type == "" {
		r.Type = ModelRepo
	}
	if r.Revision == "" {
		r.Revision = DefaultRevision
	}
	return r
}

// validate checks the id, type and revision of r (empty type and revision allowed).
func (r Repo) validate() error {
	switch r.Type {
	case "", ModelRepo, DatasetRepo, SpaceRepo:
	default:
		return fmt.Errorf("hub: repo %q: type %q is not model, dataset or space", r.ID, r.Type)
	}
	if err := validateRepoID(r.ID); err != nil {
		return err
	}
	if r.Revision != "" {
		if err := validateRevision(r.Revision); err != nil {
			return fmt.Errorf("hub: repo %s: %w", r.ID, err)
		}
	}
	return nil
}

func validateRepoID(id string) error {
	if id == "" {
		return fmt.Errorf("hub: empty repo id (want org/name or name)")
	}
	if strings.Count(id, "/") > 1 {
		return fmt.Errorf("hub: repo id %q: more than one \"/\" (want org/name or name)", id)
	}
	if strings.Contains(id, "--") || strings.Contains(id, "..") {
		return fmt.Errorf("hub: repo id %q: \"--\" and \"..\" are not allowed", id)
	}
	ns, name, hasNS := strings.Cut(id, "/")
	if !hasNS {
		ns, name = "", id
	} else if err := validateIDPart(id, "namespace", ns, 0); err != nil {
		return err
	}
	return validateIDPart(id, "name", name, maxRepoNameLen)
}

// validateIDPart checks one side of the "/" of a repo id; maxLen 0 means unbounded (as the
// namespace is in validate_repo_id).
func validateIDPart(id, what, part string, maxLen int) error {
	if part == "" {
		return fmt.Errorf("hub: repo id %q: empty %s", id, what)
	}
	if maxLen > 0 && len(part) > maxLen {
		return fmt.Errorf("hub: repo id %q: %s longer than %d characters", id, what, maxLen)
	}
	for i := 0; i < len(part); i++ {
		c := part[i]
		if !isWordByte(c) && c != '-' && c != '.' {
			return fmt.Errorf("hub: repo id %q: character %q not allowed (letters, digits, '_', '-' and '.' only)", id, c)
		}
	}
	if !isWordByte(part[0]) || !isWordByte(part[len(part)-1]) {
		return fmt.Errorf("hub: repo id %q: %s must not start or end with '-' or '.'", id, what)
	}
	return nil
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// validateRevision refuses revisions that could not be a git ref and would escape refs/ when
// used as a path: empty or "." / ".." segments, backslashes, control characters.
func validateRevision(rev string) error {
	if len(rev) > maxRevisionLen {
		return fmt.Errorf("revision longer than %d bytes", maxRevisionLen)
	}
	for i := 0; i < len(rev); i++ {
		if c := rev[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return fmt.Errorf("revision %q: character %q not allowed", rev, c)
		}
	}
	for _, seg := range strings.Split(rev, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("revision %q: empty, \".\" or \"..\" path segment", rev)
		}
	}
	return nil
}

// IsCommit reports whether rev is a full commit sha as the Hub writes it (huggingface_hub's
// REGEX_COMMIT_HASH: 40 lowercase hex digits): one immutable snapshot, not a branch or tag that
// may move.
func IsCommit(rev string) bool { return isHex(rev, 40) }

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// folderName is the repo's folder in the cache: "models--org--name".
func (r Repo) folderName() string {
	return string(r.Type) + "s--" + strings.ReplaceAll(r.ID, "/", "--")
}

// urlPrefix is the path prefix of the repo's type in resolve URLs ("" for models).
func (r Repo) urlPrefix() string {
	if r.Type == ModelRepo {
		return ""
	}
	return string(r.Type) + "s/"
}

// describe names the repo for error messages: `model "org/name" revision "main"`.
func (r Repo) describe() string {
	t := r.Type
	if t == "" {
		t = ModelRepo
	}
	rev := r.Revision
	if rev == "" {
		rev = DefaultRevision
	}
	return fmt.Sprintf("%s %q revision %q", t, r.ID, rev)
}

// resolveURL is {endpoint}/{prefix}{id}/resolve/{revision}/{path}: the revision escaped as one
// segment (refs/pr/1 → refs%2Fpr%2F1), each segment of the path escaped.
func resolveURL(endpoint string, r Repo, filename string) string {
	return endpoint + "/" + r.urlPrefix() + r.ID + "/resolve/" + url.PathEscape(r.Revision) + "/" + escapePath(filename)
}

// infoURL is the repo-info API: {endpoint}/api/{type}s/{id}/revision/{revision}.
func infoURL(endpoint string, r Repo) string {
	return endpoint + "/api/" + string(r.Type) + "s/" + r.ID + "/revision/" + url.PathEscape(r.Revision)
}

func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}
