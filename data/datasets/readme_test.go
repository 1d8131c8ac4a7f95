package datasets

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseReadmeConfigsForms(t *testing.T) {
	readme := `---
license: mit
configs:
- config_name: plain
  data_files: data/*.csv
- config_name: listed
  default: true
  data_files:
  - part0/*
  - part1/*
- config_name: splits
  data_dir: sub/dir/
  features:
  - name: x
    dtype: int64
  data_files:
  - split: train
    path:
    - train/part1/*
    - train/part2/*
  - split: test
    path: test/*
- config_name: nofiles
---
text
`
	got, err := ParseReadmeConfigs([]byte(readme))
	if err != nil {
		t.Fatal(err)
	}
	want := []ConfigSpec{
		{Name: "plain", DataFiles: []SplitPatterns{{"train", []string{"data/*.csv"}}}},
		{Name: "listed", Default: true, DataFiles: []SplitPatterns{{"train", []string{"part0/*", "part1/*"}}}},
		{Name: "splits", DataDir: "sub/dir", DataFiles: []SplitPatterns{
			{"train", []string{"train/part1/*", "train/part2/*"}}, {"test", []string{"test/*"}},
		}},
		{Name: "nofiles"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

// TestReadmeFrontMatter follows huggingface_hub's REGEX_YAML_BLOCK: where the block is found and
// where it is not.
func TestReadmeFrontMatter(t *testing.T) {
	const body = "configs:\n- config_name: c\n  data_files: x.csv\n"
	for _, c := range []struct {
		name, readme string
		found        bool
	}{
		{"plain", "---\n" + body + "---\n# title\n", true},
		{"CRLF", strings.ReplaceAll("---\n"+body+"---\n", "\n", "\r\n"), true},
		{"leading blank lines", "\n\n  ---\n" + body + "---\n", true},
		{"closing with trailing spaces", "---\n" + body + "---  \ntext", true},
		{"closing at end of file", "---\n" + body + "---", true},
		{"no closing line", "---\n" + body, false},
		{"text before", "# title\n---\n" + body + "---\n", false},
		{"opening with trailing text", "--- x\n" + body + "---\n", false},
		{"closing with trailing text", "---\n" + body + "--- x\n", false},
		{"byte order mark", "\ufeff---\n" + body + "---\n", false},
		{"no metadata", "# just text\n", false},
		{"empty", "", false},
	} {
		got, err := ParseReadmeConfigs([]byte(c.readme))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if found := len(got) == 1; found != c.found {
			t.Errorf("%s: found=%v, want %v (%+v)", c.name, found, c.found, got)
		}
	}
}

// TestReadmeDefaults: `default` is read with Python's truthiness of PyYAML's (YAML 1.1) value.
func TestReadmeDefaults(t *testing.T) {
	for _, c := range []struct {
		value string
		want  bool
	}{
		{"true", true}, {"True", true}, {"yes", true}, {"on", true}, {"1", true}, {`"false"`, true}, {"x", true},
		{"false", false}, {"no", false}, {"Off", false}, {"0", false}, {"0.0", false}, {"~", false}, {"null", false},
		{`""`, false}, {"[]", false}, {"[1]", true},
	} {
		readme := "---\nconfigs:\n- config_name: a\n  default: " + c.value + "\n---\n"
		got, err := ParseReadmeConfigs([]byte(readme))
		if err != nil {
			t.Fatalf("%s: %v", c.value, err)
		}
		if got[0].Default != c.want {
			t.Errorf("default: %s read as %v, want %v", c.value, got[0].Default, c.want)
		}
	}
}

func TestDefaultConfigSelection(t *testing.T) {
	files := []string{"a.csv", "b.csv"}
	cfg := func(name, extra string) string {
		return "- config_name: " + name + "\n  data_files: " + name[:1] + ".csv\n" + extra
	}
	for _, c := range []struct {
		name, configs, want, errWant string
	}{
		{"marked default", cfg("a", "") + cfg("b", "  default: true\n"), "b", ""},
		{"named default", cfg("a", "") + "- config_name: default\n  data_files: b.csv\n", "default", ""},
		{"only one", cfg("a", ""), "a", ""},
		{"none: pick one", cfg("a", "") + cfg("b", ""), "", "config name is missing: pick one of a, b"},
		{"two defaults", cfg("a", "  default: true\n") + cfg("b", "  default: yes\n"), "", `several default configs: "a" and "b"`},
		{"dataset_info names one", cfg("a", "") + cfg("b", "") + "dataset_info:\n  config_name: b\n", "b", ""},
		{"dataset_info names two", cfg("a", "") + cfg("b", "") + "dataset_info:\n- config_name: a\n- config_name: b\n", "", "pick one of"},
	} {
		t.Run(c.name, func(t *testing.T) {
			readme := "---\nconfigs:\n" + c.configs + "---\n"
			r, err := ResolveFiles(files, []byte(readme), "")
			if c.errWant != "" {
				if err == nil || !strings.Contains(err.Error(), c.errWant) {
					t.Fatalf("got %+v, %v; want error %q", r, err, c.errWant)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Config != c.want {
				t.Fatalf("config %q, want %q", r.Config, c.want)
			}
		})
	}
}

// TestReadmeErrors: each malformed card is refused with README.md, the line and the field.
func TestReadmeErrors(t *testing.T) {
	for _, c := range []struct {
		name, yaml, want string
	}{
		{"configs not a list", "configs: {a: 1}", "README.md:2: configs: expected a list"},
		{"config not a mapping", "configs:\n- plain", "README.md:3: configs[0]: expected a mapping"},
		{"missing config_name", "configs:\n- data_files: x.csv", "README.md:3: configs[0].config_name: missing"},
		{"config_name not a string", "configs:\n- config_name: [a]", "README.md:3: configs[0].config_name: expected a non-empty string"},
		{"data_files a mapping", "configs:\n- config_name: a\n  data_files: {train: x.csv}", "README.md:4: configs[0].data_files: expected a string"},
		{"data_files nested list", "configs:\n- config_name: a\n  data_files:\n  - [x.csv]", "README.md:5: configs[0].data_files[0]: expected a string"},
		{"mixed list", "configs:\n- config_name: a\n  data_files:\n  - x.csv\n  - split: train\n    path: y.csv", "configs[0].data_files[0]: each item must be a mapping"},
		{"extra key", "configs:\n- config_name: a\n  data_files:\n  - split: train\n    path: y.csv\n    x: 1", "configs[0].data_files[0]: each item must be a mapping with exactly"},
		{"no path", "configs:\n- config_name: a\n  data_files:\n  - split: train\n    paths: y.csv", "configs[0].data_files[0]: each item must have exactly the keys split and path"},
		{"dashed split", "configs:\n- config_name: a\n  data_files:\n  - split: my-split\n    path: y.csv", `README.md:5: configs[0].data_files[0].split: split name "my-split"`},
		{"duplicate split", "configs:\n- config_name: a\n  data_files:\n  - split: train\n    path: y.csv\n  - split: train\n    path: z.csv", `configs[0].data_files[1].split: split "train" is listed twice`},
		{"path a mapping", "configs:\n- config_name: a\n  data_files:\n  - split: train\n    path: {a: b}", "configs[0].data_files[0].path: expected a pattern"},
		{"duplicate config", "configs:\n- config_name: a\n- config_name: a", `configs[1].config_name: config "a" is defined twice`},
		{"duplicate key", "configs:\n- config_name: a\n  config_name: b", `README.md:4: duplicate key "config_name"`},
		{"merge key", "base: &b {data_files: x.csv}\nconfigs:\n- config_name: a\n  <<: *b", "YAML merge keys are not supported"},
		{"data_dir absolute", "configs:\n- config_name: a\n  data_dir: /etc", "configs[0].data_dir"},
		{"not a mapping", "- a\n- b", "README.md:2: the metadata block must be a mapping"},
		{"bad YAML", "configs: [a\n", "README.md: YAML metadata"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseReadmeConfigs([]byte("---\n" + c.yaml + "\n---\n"))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
	if _, err := ParseReadmeConfigs([]byte("---\nconfigs: []\n---\n\xff\xfe")); err == nil || !strings.Contains(err.Error(), "README.md: not valid UTF-8") {
		t.Errorf("invalid UTF-8: %v", err)
	}
	big := make([]byte, MaxReadmeBytes+1)
	if _, err := ParseReadmeConfigs(big); err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Errorf("oversized README: %v", err)
	}
}

// TestReadmeNoConfigs: configs that are absent, null or empty mean none, as datasets reads them.
func TestReadmeNoConfigs(t *testing.T) {
	for _, y := range []string{"license: mit", "configs:", "configs: []", "configs: ~", ""} {
		got, err := ParseReadmeConfigs([]byte("---\n" + y + "\n---\n"))
		if err != nil || got != nil {
			t.Errorf("%q: %v, %v", y, got, err)
		}
	}
}

// TestReadmeAliases: anchors and aliases (PyYAML resolves them) are followed, and a null
// data_files means the default patterns.
func TestReadmeAliases(t *testing.T) {
	readme := "---\nfiles: &f [a/*.csv, b/*.csv]\nconfigs:\n- config_name: a\n  data_files: *f\n- config_name: b\n  data_files: null\n---\n"
	got, err := ParseReadmeConfigs([]byte(readme))
	if err != nil {
		t.Fatal(err)
	}
	want := []ConfigSpec{{Name: "a", DataFiles: []SplitPatterns{{"train", []string{"a/*.csv", "b/*.csv"}}}}, {Name: "b"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// TestStandaloneYAMLOverridesReadme: .huggingface.yaml's top-level keys replace the card's.
func TestStandaloneYAMLOverridesReadme(t *testing.T) {
	doc, err := readmeYAML([]byte("---\nconfigs:\n- config_name: fromreadme\n  data_files: a.csv\n---\n"))
	if err != nil {
		t.Fatal(err)
	}
	o, err := parseStandalone([]byte("configs:\n- config_name: fromyaml\n  data_files: b.csv\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := resolve([]string{"a.csv", "b.csv"}, doc.merge(o), "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Config != "fromyaml" || len(r.Splits["train"]) != 1 || r.Splits["train"][0] != "b.csv" {
		t.Fatalf("got %+v", r)
	}
	o, err = parseStandalone([]byte("configs:\n- data_files: b.csv\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resolve([]string{"a.csv"}, doc.merge(o), ""); err == nil || !strings.Contains(err.Error(), ".huggingface.yaml:2: configs[0].config_name") {
		t.Fatalf("error in .huggingface.yaml: %v", err)
	}
}
