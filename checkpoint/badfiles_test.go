package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rechecksum rewrites dir's manifest and marker after a file was changed, as a buggy or
// malicious writer would: the checksums pass and the stricter checks must catch the file.
func rechecksum(t *testing.T, dir string) {
	t.Helper()
	mb, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseManifest(mb)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range m.Files {
		b, err := os.ReadFile(filepath.Join(dir, f.Name))
		if err != nil {
			continue
		}
		sum := sha256.Sum256(b)
		m.Files[i].Size, m.Files[i].SHA256 = int64(len(b)), hex.EncodeToString(sum[:])
	}
	mb, err = m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	writeManifest(t, dir, mb)
}

// writeManifest writes raw manifest bytes with a matching marker.
func writeManifest(t *testing.T, dir string, mb []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), mb, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, CommitFile), commitMarker(mb), 0o644); err != nil {
		t.Fatal(err)
	}
}

func editManifest(t *testing.T, dir string, f func(string) string) {
	t.Helper()
	mb, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	writeManifest(t, dir, []byte(f(string(mb))))
}

func TestBadFiles(t *testing.T) {
	st := func(js string, data []byte) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "model.safetensors"), safetensorsFile(js, data), 0o644)
			rechecksum(t, dir)
		}
	}
	flip := func(name string, at int) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			p := filepath.Join(dir, name)
			b, _ := os.ReadFile(p)
			b[at%len(b)] ^= 0x10
			os.WriteFile(p, b, 0o644)
		}
	}
	bigHeader := make([]byte, 8)
	bigHeader[3] = 0x10 // 2^28 > the reader's cap
	cases := []struct {
		name    string
		corrupt func(t *testing.T, dir string)
		want    string // the file the error must name
		is      error
	}{
		{"truncated model", func(t *testing.T, dir string) {
			os.Truncate(filepath.Join(dir, "model.safetensors"), 10)
		}, "model.safetensors", ErrCorrupt},
		{"truncated trainer_state", func(t *testing.T, dir string) {
			os.Truncate(filepath.Join(dir, "trainer_state.json"), 3)
		}, "trainer_state.json", ErrCorrupt},
		{"bit flip in model data", flip("model.safetensors", -1+70), "model.safetensors", ErrCorrupt},
		{"bit flip in model header", flip("model.safetensors", 12), "model.safetensors", ErrCorrupt},
		{"bit flip in trainer_state", flip("trainer_state.json", 2), "trainer_state.json", ErrCorrupt},
		{"model file missing", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "model.safetensors"))
		}, "model.safetensors", ErrCorrupt},
		{"model replaced by a directory", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "model.safetensors"))
			os.Mkdir(filepath.Join(dir, "model.safetensors"), 0o755)
		}, "model.safetensors", ErrCorrupt},
		{"trainer_state.json missing", func(t *testing.T, dir string) {
			editManifest(t, dir, func(s string) string {
				i := strings.Index(s, `    {
      "name": "trainer_state.json"`)
				j := strings.Index(s[i:], "},") + i + 2
				return s[:i] + strings.TrimLeft(s[j:], "\n")
			})
			os.Remove(filepath.Join(dir, "trainer_state.json"))
		}, "trainer_state.json", ErrCorrupt},
		{"manifest missing", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, ManifestFile))
		}, ManifestFile, ErrCorrupt},
		{"commit marker missing", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, CommitFile))
		}, CommitFile, ErrNotCommitted},
		{"manifest edited after commit", func(t *testing.T, dir string) {
			p := filepath.Join(dir, ManifestFile)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, append(b, ' '), 0o644)
		}, CommitFile, ErrCorrupt},
		{"manifest null", func(t *testing.T, dir string) { writeManifest(t, dir, []byte("null")) }, ManifestFile, ErrCorrupt},
		{"manifest unknown field", func(t *testing.T, dir string) {
			editManifest(t, dir, func(s string) string { return strings.Replace(s, `"step"`, `"extra": 1, "step"`, 1) })
		}, ManifestFile, ErrCorrupt},
		{"manifest duplicate file", func(t *testing.T, dir string) {
			editManifest(t, dir, func(s string) string {
				return strings.Replace(s, `"name": "scheduler.json"`, `"name": "trainer_state.json"`, 1)
			})
		}, ManifestFile, ErrCorrupt},
		{"manifest path traversal", func(t *testing.T, dir string) {
			editManifest(t, dir, func(s string) string {
				return strings.Replace(s, `"name": "scheduler.json"`, `"name": "../../etc/passwd"`, 1)
			})
		}, ManifestFile, ErrCorrupt},
		{"manifest bad checksum digits", func(t *testing.T, dir string) {
			editManifest(t, dir, func(s string) string { return strings.Replace(s, `"sha256": "`, `"sha256": "zz`, 1) })
		}, ManifestFile, ErrCorrupt},
		{"manifest negative size", func(t *testing.T, dir string) {
			editManifest(t, dir, func(s string) string { return strings.Replace(s, `"size": `, `"size": -`, 1) })
		}, ManifestFile, ErrCorrupt},
		{"manifest future version", func(t *testing.T, dir string) {
			editManifest(t, dir, func(s string) string { return strings.Replace(s, `"version": 1`, `"version": 2`, 1) })
		}, ManifestFile, ErrCorrupt},
		{"manifest trailing data", func(t *testing.T, dir string) {
			editManifest(t, dir, func(s string) string { return s + "{}" })
		}, ManifestFile, ErrCorrupt},
		{"manifest not utf8", func(t *testing.T, dir string) {
			editManifest(t, dir, func(s string) string { return strings.Replace(s, "scheduler", "sch\xffeduler", 1) })
		}, ManifestFile, ErrCorrupt},
		{"safetensors header too large", func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, "model.safetensors"), append(bigHeader, "{}"...), 0o644)
			rechecksum(t, dir)
		}, "model.safetensors", ErrCorrupt},
		{"safetensors null header", st(`null`, nil), "model.safetensors", ErrCorrupt},
		{"safetensors overlapping offsets", st(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, []byte{1, 2}), "model.safetensors", ErrCorrupt},
		{"safetensors gapped offsets", st(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, []byte{1, 2}), "model.safetensors", ErrCorrupt},
		{"safetensors duplicate names", st(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, []byte{1, 2}), "model.safetensors", ErrCorrupt},
		{"safetensors invalid utf8 name", st("{\"a\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", []byte{1}), "model.safetensors", ErrCorrupt},
		{"safetensors shape vs offsets", st(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, make([]byte, 4)), "model.safetensors", ErrCorrupt},
		{"safetensors unknown dtype", st(`{"a":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}}`, make([]byte, 16)), "model.safetensors", ErrCorrupt},
		{"safetensors data past end", st(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, []byte{1}), "model.safetensors", ErrCorrupt},
	}
	if len(cases) < 20 {
		t.Fatalf("only %d cases", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			dir, err := Commit(out, sample(7))
			if err != nil {
				t.Fatal(err)
			}
			c.corrupt(t, dir)
			_, err = Open(dir, "model.safetensors", "trainer_state.json")
			if err == nil {
				t.Fatal("a corrupted checkpoint opened")
			}
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q: want it to wrap %v and name %s", err, c.is, c.want)
			}
			t.Log(err)
		})
	}
}
