package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// chatExpected is the part of a testdata/chat/expected record the CLI reproduces.
type chatExpected struct {
	ID       string  `json:"id"`
	AGP      bool    `json:"add_generation_prompt"`
	Rendered *string `json:"rendered"`
	Error    *struct {
		Message string `json:"message"`
	} `json:"error"`
	IDs   []uint32 `json:"ids"`
	Masks struct {
		Generation []int `json:"generation"`
	} `json:"masks"`
}

func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		out = append(out, slices.Clone(sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestChatTemplateCLI: the command over the golden corpus equals the expected records (text or
// the template's raise message, and ids and assistant masks with --tokenizer), for a family with
// generation blocks, one that raises, and one without a tokenizer; both add_generation_prompt values.
func TestChatTemplateCLI(t *testing.T) {
	chatDir := filepath.Join("..", "..", "testdata", "chat")
	corpus := readLines(t, filepath.Join(chatDir, "corpus-shared.jsonl"))
	var sb strings.Builder
	for _, l := range corpus {
		sb.Write(l)
		sb.WriteByte('\n')
	}
	stdin := sb.String()
	for _, fc := range []struct{ family, tokenizer string }{
		{"qwen3-trl-training", "qwen3"}, {"mistral-7b-v0.1", "mistral-7b"}, {"gemma2", ""},
	} {
		var exps []chatExpected
		for _, l := range readLines(t, filepath.Join(chatDir, "expected", fc.family+".jsonl")) {
			var e chatExpected
			if err := json.Unmarshal(l, &e); err != nil {
				t.Fatal(err)
			}
			exps = append(exps, e)
		}
		for _, agp := range []bool{false, true} {
			args := []string{"chat-template", "--tokenizer_config", filepath.Join(chatDir, "families", fc.family, "tokenizer_config.json"), "--date", "2025-03-14"}
			if agp {
				args = append(args, "--add_generation_prompt")
			}
			if fc.tokenizer != "" {
				args = append(args, "--tokenizer", filepath.Join("..", "..", "testdata", "tokenizers", fc.tokenizer, "tokenizer.json.gz"))
			}
			out, errOut, code := runGotpuStdin(t, stdin, args...)
			if code != 0 {
				t.Fatalf("%s: exit %d: %s", fc.family, code, errOut)
			}
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) != len(corpus) {
				t.Fatalf("%s: %d output lines for %d input lines", fc.family, len(lines), len(corpus))
			}
			n := 0
			for _, e := range exps {
				if e.AGP != agp {
					continue
				}
				var got struct {
					Text           *string  `json:"text"`
					Error          *string  `json:"error"`
					InputIDs       []uint32 `json:"input_ids"`
					AssistantMasks []int    `json:"assistant_masks"`
				}
				if err := json.Unmarshal([]byte(lines[n]), &got); err != nil {
					t.Fatalf("%s line %d: %v: %s", fc.family, n+1, err, lines[n])
				}
				n++
				switch {
				case e.Error != nil:
					if got.Error == nil || *got.Error != e.Error.Message || got.Text != nil {
						t.Errorf("%s %s agp=%v: %s, want error %q", fc.family, e.ID, agp, lines[n-1], e.Error.Message)
					}
					continue
				case got.Text == nil || *got.Text != *e.Rendered:
					t.Errorf("%s %s agp=%v: %s, want text %q", fc.family, e.ID, agp, lines[n-1], *e.Rendered)
					continue
				}
				if fc.tokenizer == "" {
					if got.InputIDs != nil || got.AssistantMasks != nil {
						t.Errorf("%s %s: ids without --tokenizer", fc.family, e.ID)
					}
					continue
				}
				wantMask := e.Masks.Generation
				if len(wantMask) == 0 {
					wantMask = make([]int, len(e.IDs))
				}
				if !slices.Equal(got.InputIDs, e.IDs) || !slices.Equal(got.AssistantMasks, wantMask) {
					t.Errorf("%s %s agp=%v: ids %v masks %v, want %v %v", fc.family, e.ID, agp, got.InputIDs, got.AssistantMasks, e.IDs, wantMask)
				}
			}
			if n != len(corpus) {
				t.Fatalf("%s: %d expected records for %d conversations", fc.family, n, len(corpus))
			}
		}
	}
}

// TestChatTemplateCLIBadLines: bad lines become {"error"} lines naming the line, in order, and
// the command goes on; a missing --tokenizer_config or bad --date is a usage error.
func TestChatTemplateCLIBadLines(t *testing.T) {
	cfg := filepath.Join("..", "..", "testdata", "chat", "families", "qwen3-trl-training", "tokenizer_config.json")
	in := "not json\n" +
		`{"messages": [{"content": "no role"}]}` + "\n" +
		`{"other": 1}` + "\n" +
		`{"messages": [5]}` + "\n" +
		`{"messages": [{"role": "user", "content": "hi"}], "id": 5}` + "\n" +
		`{"messages": [{"role": "user", "content": "\ue000"}]}` + "\n"
	out, errOut, code := runGotpuStdin(t, in, "chat-template", "--tokenizer_config", cfg)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := []string{`{"error":"line 1: `, `{"error":"line 2: message 0: no \"role\""}`, `{"error":"line 3: no \"messages\" list"}`, `{"error":"line 4: message 0: not a JSON object`, `{"text":"<|im_start|>user\nhi<|im_end|>\n"}`,
		// Any code point is content: the engine tracks generation blocks itself, no in-band markers.
		"{\"text\":\"<|im_start|>user\\n\ue000<|im_end|>\\n\"}"}
	if len(lines) != len(want) {
		t.Fatalf("output %q", out)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %s, want prefix %s", i+1, lines[i], w)
		}
	}
	if _, errOut, code := runGotpuStdin(t, "", "chat-template"); code != 2 || !strings.Contains(errOut, "--tokenizer_config") {
		t.Errorf("no config: exit %d: %s", code, errOut)
	}
	if _, errOut, code := runGotpuStdin(t, "", "chat-template", "--tokenizer_config", cfg, "--date", "14/03/2025"); code != 2 || !strings.Contains(errOut, "--date") {
		t.Errorf("bad date: exit %d: %s", code, errOut)
	}
	if _, errOut, code := runGotpuStdin(t, "", "chat-template", "--tokenizer_config", cfg, "--template", "tool_use"); code != 1 || !strings.Contains(errOut, "tool_use") {
		t.Errorf("unknown template: exit %d: %s", code, errOut)
	}
}

// doublingChatConfig writes a tokenizer_config.json whose template, for a conversation whose
// first message is "slow", builds two equal values of 2^40 leaves apart by doubling
// ({% set x = [x, x] %}: a few hundred steps) and compares them: about a second to the render's
// MaxSteps now, hours before (issue 38, finding 2). Other conversations render at once.
func doublingChatConfig(t *testing.T) string {
	t.Helper()
	d := func(name string) string {
		return "{% set ns = namespace(v=[1]) %}{% for i in range(40) %}{% set x = ns.v %}{% set ns.v = [x, x] %}{% endfor %}{% set " + name + " = ns.v %}"
	}
	src := "{% if messages[0].content == 'slow' %}" + d("x") + d("y") + "{{ x == y }}{% endif %}{{ messages[0].content }}"
	b, err := json.Marshal(map[string]string{"chat_template": src})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "tokenizer_config.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestChatTemplateDoublingLimit: the doubling line ends with an error line naming the template
// and the limit, and the lines around it render; the command exits 0. The old command walked the
// value for hours.
func TestChatTemplateDoublingLimit(t *testing.T) {
	cfg := doublingChatConfig(t)
	in := `{"messages": [{"role": "user", "content": "fast"}]}` + "\n" + `{"messages": [{"role": "user", "content": "slow"}]}` + "\n" +
		`{"messages": [{"role": "user", "content": "after"}]}` + "\n"
	out, errOut, code := runGotpuStdin(t, in, "chat-template", "--tokenizer_config", cfg)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || len(lines) != 3 || lines[0] != `{"text":"fast"}` || lines[2] != `{"text":"after"}` ||
		!strings.HasPrefix(lines[1], `{"error":"line 2: chat template `+cfg+` (chat_template): jinja: render exceeds MaxSteps`) {
		t.Fatalf("exit %d, stderr %s, output:\n%s", code, errOut, out)
	}
	t.Log(lines[1])
}

// TestChatTemplateStopsOnSignal: SIGINT during the doubling line's render stops the command
// promptly: it says so, exits 130, and the lines rendered before are written. The old command
// kept walking the value after the first SIGINT (its render ignored the context).
func TestChatTemplateStopsOnSignal(t *testing.T) {
	cfg := doublingChatConfig(t)
	cmd := exec.Command(gotpuBin, "chat-template", "--tokenizer_config", cfg)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout lockedBuffer
	cmd.Stdout = &stdout
	p := start(t, cmd)
	// A first line longer than a pipe's buffer: its write returns once gotpu has read most of
	// it, so gotpu is running with its signal handling in place.
	first := `{"messages": [{"role": "user", "content": "fast"}], "pad": "` + strings.Repeat(" ", 1<<20) + `"}` + "\n"
	if _, err := io.WriteString(stdin, first+`{"messages": [{"role": "user", "content": "slow"}]}`+"\n"); err != nil {
		t.Fatalf("writing stdin: %v; stderr:\n%s", err, p.stderr)
	}
	// Give gotpu the time to start the slow render (it takes about a second to reach its
	// limit; the old one never ended). Should the signal come before or after the render, the
	// command still stops at its next read of stdin, which is left open.
	time.Sleep(200 * time.Millisecond)
	p.signal(t, syscall.SIGINT)
	if code := p.wait(t); code != 130 {
		t.Fatalf("exit status %d, want 130; stderr:\n%s", code, p.stderr)
	}
	stdin.Close()
	for _, want := range []string{"gotpu: SIGINT received: stopping", "gotpu chat-template: stopped by SIGINT"} {
		if !strings.Contains(p.stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, p.stderr)
		}
	}
	if !strings.HasPrefix(stdout.String(), `{"text":"fast"}`+"\n") {
		t.Errorf("stdout %q: the line rendered before the signal is lost", stdout.String())
	}
	t.Logf("stderr: %s; stdout: %q", strings.TrimSpace(p.stderr.String()), stdout.String())
}
