package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/gotpu/gotpu/internal/atomicfile"
)

// Hosts places a Writer in a job of several hosts (a TPU pod slice). Every host's writer
// stages its own files (its replicas' RNG and data-loader positions, and on the primary the
// model and optimizer, which are whole and identical on every host) into one shared staging
// directory, output_dir/checkpoint-N.tmp-<RunID>, on a file system all hosts mount. Each
// non-primary host ends its part with a part manifest; the primary (Host 0) waits for all of
// them, verifies every file they list, merges them into the checkpoint's manifest and commits
// exactly as a single host does. Nothing is committed unless every host delivered: a host that
// never delivers fails the primary's save after CommitTimeout with an error naming it — a save
// never hangs on an unmatched rendezvous — and the staging directory is removed (or, if a late
// host recreates it, by the primary's Cleanup at the next start).
type Hosts struct {
	// Host is this host's index in [0, Count); host 0 is the primary, which commits.
	Host int
	// Count is the number of hosts; 0 or 1 means a single host (no staging protocol).
	Count int
	// RunID names the shared staging directory: the same on every host for one attempt of a
	// run, different for the next attempt (take it from the job's coordination service, e.g.
	// the PJRT distributed runtime's key-value store, or the launcher's job id). 1–32 lowercase
	// hex digits.
	RunID string
	// CommitTimeout bounds the primary's wait for the other hosts' parts (default 10 minutes).
	CommitTimeout time.Duration
	// Poll is how often the primary looks for parts (default 100 ms).
	Poll time.Duration
}

// Multi reports whether h describes more than one host.
func (h Hosts) Multi() bool { return h.Count > 1 }

var runIDPattern = regexp.MustCompile(`^[0-9a-f]{1,32}$`)

// Validate checks h, naming the bad field.
func (h Hosts) Validate() error {
	switch {
	case h.Count < 0:
		return fmt.Errorf("checkpoint.Hosts.Count: %d is negative", h.Count)
	case !h.Multi() && h.Host != 0:
		return fmt.Errorf("checkpoint.Hosts.Host: %d with Count %d (a single host is host 0)", h.Host, h.Count)
	case h.Multi() && (h.Host < 0 || h.Host >= h.Count):
		return fmt.Errorf("checkpoint.Hosts.Host: %d is outside [0, %d)", h.Host, h.Count)
	case h.Multi() && !runIDPattern.MatchString(h.RunID):
		return fmt.Errorf("checkpoint.Hosts.RunID: %q is not 1–32 lowercase hex digits (every host must use the same one)", h.RunID)
	case h.CommitTimeout < 0:
		return fmt.Errorf("checkpoint.Hosts.CommitTimeout: %v is negative", h.CommitTimeout)
	case h.Poll < 0:
		return fmt.Errorf("checkpoint.Hosts.Poll: %v is negative", h.Poll)
	}
	return nil
}

func (h Hosts) timeout() time.Duration {
	if h.CommitTimeout == 0 {
		return 10 * time.Minute
	}
	return h.CommitTimeout
}

func (h Hosts) poll() time.Duration {
	if h.Poll == 0 {
		return 100 * time.Millisecond
	}
	return h.Poll
}

// PartFormat identifies a host's part manifest.
const PartFormat = "gotpu-checkpoint-part"

// partPrefix starts the names of part manifests, gotpu_part-<host>.json.
const partPrefix = "gotpu_part-"

// PartFile is the name of host's part manifest in a staging directory.
func PartFile(host int) string { return partPrefix + strconv.Itoa(host) + ".json" }

// Part is what a non-primary host delivered: the files it wrote into the staging directory.
type Part struct {
	Format  string      `json:"format"`
	Version int         `json:"version"`
	Step    int         `json:"step"`
	Host    int         `json:"host"`
	Files   []FileEntry `json:"files"`
}

// ParsePart decodes and validates a part manifest as strictly as ParseManifest does.
func ParsePart(b []byte) (*Part, error) {
	if len(b) > MaxManifestSize {
		return nil, fmt.Errorf("%w: %d bytes exceeds the %d byte limit", ErrCorrupt, len(b), MaxManifestSize)
	}
	if !utf8.Valid(b) {
		return nil, fmt.Errorf("%w: not valid UTF-8", ErrCorrupt)
	}
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", ErrCorrupt)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p Part
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: trailing data after the JSON object", ErrCorrupt)
	}
	switch {
	case p.Format != PartFormat:
		return nil, fmt.Errorf("%w: format %q, want %q", ErrCorrupt, p.Format, PartFormat)
	case p.Version != Version:
		return nil, fmt.Errorf("%w: version %d is not supported (want %d)", ErrCorrupt, p.Version, Version)
	case p.Host < 1:
		return nil, fmt.Errorf("%w: host %d (parts come from hosts 1 and up)", ErrCorrupt, p.Host)
	}
	// The file list obeys the manifest's rules.
	m := Manifest{Format: Format, Version: Version, Step: p.Step, Files: p.Files}
	if err := m.validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// validateSnapshot checks the file names of a snapshot.
func validateSnapshot(snap Snapshot) error {
	if snap.Step < 0 {
		return fmt.Errorf("checkpoint: negative step %d", snap.Step)
	}
	seen := map[string]bool{}
	for _, f := range snap.Files {
		if err := ValidateName(f.Name); err != nil {
			return fmt.Errorf("checkpoint: snapshot file: %w", err)
		}
		if seen[f.Name] {
			return fmt.Errorf("checkpoint: snapshot file %q given twice", f.Name)
		}
		seen[f.Name] = true
	}
	return nil
}

// stagingDir is the shared staging directory of step in a multi-host run.
func stagingDir(outputDir string, step int, runID string) string {
	return filepath.Join(outputDir, DirName(step)+".tmp-"+runID)
}

// WritePart writes a non-primary host's files for snap into the shared staging directory, then
// its part manifest (through a temporary name and a rename, so the primary never reads half of
// it), and fsyncs the directory. The host's part is durable when it returns; the checkpoint is
// committed later by the primary.
func WritePart(outputDir string, hosts Hosts, snap Snapshot) error {
	return writePart(outputDir, hosts, snap, nil)
}

// writePart is WritePart, staging the Live files with st (see writeFiles).
func writePart(outputDir string, hosts Hosts, snap Snapshot, st *stager) error {
	if err := hosts.Validate(); err != nil {
		return err
	}
	if !hosts.Multi() || hosts.Host == 0 {
		return fmt.Errorf("checkpoint: WritePart is for hosts 1..Count-1, not host %d of %d", hosts.Host, hosts.Count)
	}
	if err := validateSnapshot(snap); err != nil {
		return err
	}
	stage := stagingDir(outputDir, snap.Step, hosts.RunID)
	if err := atomicfile.MkdirAll(stage); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	files, err := writeFiles(stage, snap.Files, st)
	if err != nil {
		return fmt.Errorf("host %d: %w", hosts.Host, err)
	}
	p := Part{Format: PartFormat, Version: Version, Step: snap.Step, Host: hosts.Host, Files: append([]FileEntry{}, files...)}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	name := PartFile(hosts.Host)
	tmp := filepath.Join(stage, name+".writing")
	if _, err := writeFile(tmp, File{Data: append(b, '\n')}); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(stage, name)); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return syncDir(stage)
}

// commitPrimary is the primary's side of a multi-host save: it writes its own files into the
// staging directory, waits for every other host's part, verifies and merges them, and commits.
func commitPrimary(ctx context.Context, outputDir string, hosts Hosts, snap Snapshot) (string, error) {
	return commitPrimaryStaged(ctx, outputDir, hosts, snap, nil)
}

// commitPrimaryStaged is commitPrimary, staging the Live files with st (see writeFiles); ctx
// bounds the wait for the parts.
func commitPrimaryStaged(ctx context.Context, outputDir string, hosts Hosts, snap Snapshot, st *stager) (dir string, err error) {
	if err := validateSnapshot(snap); err != nil {
		return "", err
	}
	stage := stagingDir(outputDir, snap.Step, hosts.RunID)
	if err := atomicfile.MkdirAll(stage); err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	defer func() {
		if err != nil {
			if rerr := os.RemoveAll(stage); rerr != nil {
				err = errors.Join(err, fmt.Errorf("checkpoint: removing %s: %w", stage, rerr))
			}
		}
	}()
	files, err := writeFiles(stage, snap.Files, st)
	if err != nil {
		return "", err
	}
	m := Manifest{Format: Format, Version: Version, Step: snap.Step, Files: files}
	owner := map[string]int{}
	for _, f := range snap.Files {
		owner[f.Name] = 0
	}
	parts, err := awaitParts(ctx, stage, hosts, snap.Step)
	if err != nil {
		return "", err
	}
	for _, p := range parts {
		for _, e := range p.Files {
			if h, ok := owner[e.Name]; ok {
				return "", fmt.Errorf("%w: %s: host %d's part lists %s, which host %d wrote", ErrCorrupt, stage, p.Host, e.Name, h)
			}
			if err := verifyEntry(stage, e); err != nil {
				return "", fmt.Errorf("host %d's part: %w", p.Host, err)
			}
			owner[e.Name] = p.Host
			e.Host = p.Host
			m.Files = append(m.Files, e)
		}
	}
	// The parts are merged into the manifest; the directory then holds exactly its files.
	for h := 1; h < hosts.Count; h++ {
		if err := os.Remove(filepath.Join(stage, PartFile(h))); err != nil {
			return "", fmt.Errorf("checkpoint: %w", err)
		}
	}
	return finishCommit(stage, filepath.Join(outputDir, DirName(snap.Step)), hosts.RunID, m)
}

// awaitParts polls the staging directory until every host 1..Count-1 delivered its part, the
// timeout passes or ctx ends. Errors name the hosts still missing.
func awaitParts(ctx context.Context, stage string, hosts Hosts, step int) ([]*Part, error) {
	deadline := time.Now().Add(hosts.timeout())
	parts := make([]*Part, hosts.Count)
	tick := time.NewTicker(hosts.poll())
	defer tick.Stop()
	for {
		var missing []int
		for h := 1; h < hosts.Count; h++ {
			if parts[h] != nil {
				continue
			}
			path := filepath.Join(stage, PartFile(h))
			b, err := readCapped(path, MaxManifestSize)
			if errors.Is(err, os.ErrNotExist) {
				missing = append(missing, h)
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("%w: host %d's part: %w", ErrCorrupt, h, err)
			}
			p, err := ParsePart(b)
			if err != nil {
				return nil, fmt.Errorf("host %d's part %s: %w", h, path, err)
			}
			if p.Host != h || p.Step != step {
				return nil, fmt.Errorf("%w: %s: part of host %d, step %d; want host %d, step %d", ErrCorrupt, path, p.Host, p.Step, h, step)
			}
			parts[h] = p
		}
		if len(missing) == 0 {
			return slices.DeleteFunc(parts, func(p *Part) bool { return p == nil }), nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: host(s) %v did not deliver their part of step %d to %s within %v", ErrHostsMissing, missing, step, stage, hosts.timeout())
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("checkpoint: waiting for host(s) %v: %w", missing, ctx.Err())
		case <-tick.C:
		}
	}
}

// verifyEntry checks that dir/e.Name is a regular file of e's size and SHA-256.
func verifyEntry(dir string, e FileEntry) error {
	path := filepath.Join(dir, e.Name)
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if !st.Mode().IsRegular() || st.Size() != e.Size {
		return fmt.Errorf("%w: %s: %d bytes, the part lists %d", ErrCorrupt, path, st.Size(), e.Size)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != e.SHA256 {
		return fmt.Errorf("%w: %s: sha256 %s, the part lists %s", ErrCorrupt, path, got, e.SHA256)
	}
	return nil
}
