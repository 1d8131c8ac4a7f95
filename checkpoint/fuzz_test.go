package checkpoint

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzParseManifest checks that ParseManifest never panics and that what it accepts re-encodes
// to a manifest it accepts again, unchanged.
//
//	go test -fuzz=FuzzParseManifest -fuzztime=30s ./checkpoint/
func FuzzParseManifest(f *testing.F) {
	good := Manifest{Format: Format, Version: Version, Step: 3, Files: []FileEntry{
		{Name: "model.safetensors", Size: 12, SHA256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
	}}
	b, _ := good.Marshal()
	f.Add(b)
	f.Add([]byte("null"))
	f.Add([]byte(`{"format":"gotpu-checkpoint","version":1,"step":0,"files":[]}`))
	f.Add([]byte(`{"format":"gotpu-checkpoint","version":1,"step":0,"files":[{"name":"../x","size":0,"sha256":""}]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := ParseManifest(in)
		if err != nil {
			return
		}
		out, err := m.Marshal()
		if err != nil {
			t.Fatalf("accepted manifest does not re-encode: %v", err)
		}
		m2, err := ParseManifest(out)
		if err != nil {
			t.Fatalf("re-encoded manifest rejected: %v", err)
		}
		out2, _ := m2.Marshal()
		if !bytes.Equal(out, out2) {
			t.Fatalf("not stable:\n%s\n%s", out, out2)
		}
	})
}

func FuzzParsePart(f *testing.F) {
	f.Add([]byte(`{"format":"gotpu-checkpoint-part","version":1,"step":3,"host":1,"files":[{"name":"a","size":1,"sha256":"` + strings.Repeat("0", 64) + `"}]}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"format":"gotpu-checkpoint-part","version":1,"step":3,"host":0,"files":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePart(b)
		if err != nil {
			return
		}
		if p.Host < 1 || p.Step < 0 {
			t.Fatalf("accepted %+v", p)
		}
		for _, e := range p.Files {
			if ValidateName(e.Name) != nil {
				t.Fatalf("accepted name %q", e.Name)
			}
		}
	})
}
