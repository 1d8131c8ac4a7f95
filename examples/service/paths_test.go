package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/hub"
)

// TestPathErrorsRevealNothing: a path field naming a file outside the allowed directories (that
// exists or not, directly, through "..", or through a symlink inside them) and one naming a
// missing file inside them all get the same 400 message, which names the field but neither says
// whether the file exists nor prints the service's directories. The fields that also take a Hub
// repo id add, to a name spelled like one, the hint that this needs -hub: that depends on the
// spelling alone.
func TestPathErrorsRevealNothing(t *testing.T) {
	tmp := t.TempDir()
	rootDir, outDir, dataDir := filepath.Join(tmp, "root"), filepath.Join(tmp, "outside"), filepath.Join(tmp, "data")
	for _, d := range []string{rootDir, outDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeTokenJSONL(t, filepath.Join(rootDir, "tokens.jsonl"), 2, 8, 100)
	secret := filepath.Join(outDir, "secret.jsonl")
	writeTokenJSONL(t, secret, 2, 8, 100)
	if err := os.Symlink(secret, filepath.Join(rootDir, "link-to-secret.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outDir, "missing.jsonl"), filepath.Join(rootDir, "link-to-missing.jsonl")); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, openRuntime(t), Config{DataDir: dataDir, InputRoots: []string{rootDir}, BaseDir: rootDir})

	paths := []string{
		secret,                                  // exists, outside
		filepath.Join(outDir, "missing.jsonl"),  // missing, outside
		"../outside/secret.jsonl",               // exists, outside, relative
		"../outside/missing.jsonl",              // missing, outside, relative
		filepath.Join(rootDir, "missing.jsonl"), // missing, inside
		"missing.jsonl",                         // missing, inside, relative
		"link-to-secret.jsonl",                  // inside, a link to an existing file outside
		"link-to-missing.jsonl",                 // inside, a link to a missing file outside
		"/etc/passwd",                           // exists, outside
		filepath.Join(rootDir, "..", "outside"), // an existing directory outside
	}
	for _, field := range []string{"train_file", "validation_file", "model_name_or_path", "config_name", "tokenizer_name", "resume_from_checkpoint", "adapter_name_or_path"} {
		var first string
		for _, p := range paths {
			body := map[string]any{"model_type": "gpt2", "train_file": "tokens.jsonl", field: p}
			if field == "model_name_or_path" || field == "config_name" {
				delete(body, "model_type")
			}
			b, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			code, ans := call(t, "POST", ts.url+"/jobs", string(b))
			var eb errorBody
			if err := json.Unmarshal(ans, &eb); err != nil || code != http.StatusBadRequest {
				t.Fatalf("%s %q: %d %s", field, p, code, ans)
			}
			// The path as the request gave it may be echoed; nothing else about the host.
			text := strings.ReplaceAll(eb.Error, fmt.Sprintf("%q", p), "<path>")
			for _, leak := range []string{tmp, "no such file", "outside", "not a directory", "exist"} {
				if strings.Contains(text, leak) {
					t.Fatalf("%s %q: the error says %q: %s", field, p, leak, eb.Error)
				}
			}
			var msg string
			for _, f := range eb.Fields {
				if f.Field == field {
					msg = strings.ReplaceAll(f.Message, fmt.Sprintf("%q", p), "<path>")
				}
			}
			if msg == "" || !strings.HasPrefix(msg, field+": ") {
				t.Fatalf("%s %q: no message for the field in %s", field, p, ans)
			}
			takesRepoIDs := field == "model_name_or_path" || field == "config_name" || field == "tokenizer_name" || field == "adapter_name_or_path"
			msg, hinted := strings.CutSuffix(msg, "; "+needsHubHint)
			if hinted != (takesRepoIDs && hub.LooksLikeRepoID(p)) {
				t.Fatalf("%s %q: the -hub hint given: %v: %s", field, p, hinted, msg)
			}
			if first == "" {
				first = msg
				t.Logf("%s: %s", field, msg)
			} else if msg != first {
				t.Fatalf("%s: %q gets\n  %s\nbut %q got\n  %s", field, p, msg, paths[0], first)
			}
		}
	}
}
