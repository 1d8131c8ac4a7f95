package tokenizer

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gpt2JSON is testdata's GPT-2 tokenizer.json, decompressed.
func gpt2JSON(t *testing.T) []byte {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", "tokenizers", "gpt2", "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReadFilesSave: ReadFiles takes a directory's tokenizer files (tokenizer.json, the config,
// special tokens map and chat template; nothing else), or a tokenizer.json path with its
// directory's, and Save writes them byte for byte; a compressed tokenizer.json.gz is saved
// decompressed, as tokenizer.json; WithChatTemplate adds chat_template.jinja without touching
// the source; a tokenizer.json that does not load is refused, naming the file.
func TestReadFilesSave(t *testing.T) {
	tj := gpt2JSON(t)
	src := t.TempDir()
	want := map[string][]byte{
		"tokenizer.json":          tj,
		"tokenizer_config.json":   []byte(`{"eos_token": "<|endoftext|>", "chat_template": "{{ messages }}"}`),
		"special_tokens_map.json": []byte(`{"eos_token": "<|endoftext|>"}`),
	}
	for name, b := range want {
		if err := os.WriteFile(filepath.Join(src, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(src, "model.safetensors"), []byte("not a tokenizer file"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, from := range []string{src, filepath.Join(src, "tokenizer.json")} {
		f, err := ReadFiles(from)
		if err != nil {
			t.Fatal(err)
		}
		out := t.TempDir()
		if err := f.Save(out); err != nil {
			t.Fatal(err)
		}
		ents, _ := os.ReadDir(out)
		if len(ents) != len(want) {
			t.Errorf("ReadFiles(%s) saved %d files, want %d", from, len(ents), len(want))
		}
		for name, b := range want {
			got, err := os.ReadFile(filepath.Join(out, name))
			if err != nil || !bytes.Equal(got, b) {
				t.Errorf("ReadFiles(%s): saved %s differs from the source (%v)", from, name, err)
			}
		}
	}

	f, _ := ReadFiles(src)
	g := f.WithChatTemplate("{{ bos_token }}")
	if _, ok := f.Get(ChatTemplateFile); ok {
		t.Error("WithChatTemplate changed the receiver")
	}
	if b, ok := g.Get(ChatTemplateFile); !ok || string(b) != "{{ bos_token }}" {
		t.Errorf("chat_template.jinja %q, %v", b, ok)
	}

	gz := t.TempDir()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(tj)
	zw.Close()
	if err := os.WriteFile(filepath.Join(gz, "tokenizer.json.gz"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := ReadFiles(gz)
	if err != nil {
		t.Fatal(err)
	}
	if l := f.List(); len(l) != 1 || l[0].Name != "tokenizer.json" || !bytes.Equal(l[0].Data, tj) {
		t.Errorf("tokenizer.json.gz: %d files, first %q", len(l), l[0].Name)
	}

	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "tokenizer.json"), []byte(`{"model": {"type": "BPE", "vocab": 3}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{bad, t.TempDir(), filepath.Join(bad, "missing.json")} {
		_, err := ReadFiles(p)
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("ReadFiles(%s): %v, want an error naming it", p, err)
		}
		t.Log(err)
	}
}
