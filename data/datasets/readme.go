package datasets

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// MaxReadmeBytes bounds the README.md (and .huggingface.yaml) read for a dataset: its YAML is
// parsed whole, and real dataset cards are a few KiB to a few hundred KiB.
const MaxReadmeBytes = 1 << 20

// maxYAMLDepth bounds the nesting the card checks walk; real cards nest a handful of levels.
const maxYAMLDepth = 256

// ConfigSpec is one entry of the README's `configs:` list.
type ConfigSpec struct {
	Name    string
	Default bool // `default: true` (Python truthiness, as datasets reads it)
	// DataFiles are the config's split patterns; nil when the config has no data_files, in which
	// case the default patterns apply under DataDir.
	DataFiles []SplitPatterns
	// DataDir (`data_dir`) is the directory, relative to the dataset's root, that the patterns
	// are relative to ("" for the root).
	DataDir string
}

// SplitPatterns are the glob patterns of one split, in the order written.
type SplitPatterns struct {
	Split    string
	Patterns []string
}

// yamlBlockRE is huggingface_hub's REGEX_YAML_BLOCK (repocard.py), which datasets reads cards
// with: optional leading whitespace, a "---" line, the YAML, a "---" line. The whitespace class
// is Python's \s for str patterns.
var yamlBlockRE = regexp.MustCompile(`^([\t-\r\x1c-\x1f\x{85}\p{Z}]*---(?:\r\n|\r|\n))([\S\s]*?)((?:\r\n|\r|\n)---[ \t]*(\r\n|\n|$))`)

// card is what the resolver takes from a dataset card.
type card struct {
	configs []ConfigSpec
	// infoConfigs are the config names of `dataset_info`: datasets falls back to the only one as
	// the default config when the configs name none.
	infoConfigs []string
}

// yamlDoc is one parsed YAML mapping with the name of its file and the line its text starts at,
// so errors can point at the line in that file.
type yamlDoc struct {
	file   string
	line0  int // line of the file that is the YAML's line 1, minus one
	fields map[string]*yaml.Node
	order  []string
	// from names, after merge, the document a top-level field came from (absent: this one).
	from map[string]*yamlDoc
}

// docOf is the document top-level field k came from, for errors.
func (d *yamlDoc) docOf(k string) *yamlDoc {
	if o := d.from[k]; o != nil {
		return o
	}
	return d
}

// ParseReadmeConfigs reads the `configs:` of a dataset card (README.md): the YAML block between
// "---" lines at its top. A README without that block, or without configs, has none (nil). Errors
// name README.md, the line and the field.
func ParseReadmeConfigs(readme []byte) ([]ConfigSpec, error) {
	doc, err := readmeYAML(readme)
	if err != nil {
		return nil, err
	}
	c, err := parseCard(doc)
	if err != nil {
		return nil, err
	}
	return c.configs, nil
}

// readmeYAML extracts and parses the README's YAML block; a README without one gives an empty doc.
func readmeYAML(readme []byte) (*yamlDoc, error) {
	const file = "README.md"
	if len(readme) > MaxReadmeBytes {
		return nil, fmt.Errorf("%s: %d bytes exceeds the %d-byte limit", file, len(readme), MaxReadmeBytes)
	}
	if !utf8.Valid(readme) {
		return nil, fmt.Errorf("%s: not valid UTF-8", file)
	}
	m := yamlBlockRE.FindSubmatchIndex(readme)
	if m == nil {
		return &yamlDoc{file: file, fields: map[string]*yaml.Node{}}, nil
	}
	line0 := lineCount(readme[:m[4]])
	return parseYAMLMapping(file, line0, readme[m[4]:m[5]])
}

// lineCount counts line breaks as Python's splitlines does for \r\n, \r and \n.
func lineCount(b []byte) int {
	n := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\n':
			n++
		case '\r':
			n++
			if i+1 < len(b) && b[i+1] == '\n' {
				i++
			}
		}
	}
	return n
}

// parseYAMLMapping parses src as one YAML document that must be a mapping (or empty) and checks
// that no mapping in it repeats a key (datasets' loader refuses duplicate keys).
func parseYAMLMapping(file string, line0 int, src []byte) (*yamlDoc, error) {
	doc := &yamlDoc{file: file, line0: line0, fields: map[string]*yaml.Node{}}
	var root yaml.Node
	if err := yaml.Unmarshal(src, &root); err != nil {
		return nil, fmt.Errorf("%s: YAML metadata: %w", file, err)
	}
	if len(root.Content) == 0 {
		return doc, nil // an empty document: no metadata
	}
	top := root.Content[0]
	if isNull(top) {
		return doc, nil
	}
	if top.Kind != yaml.MappingNode {
		return nil, doc.errAt(top, "", "the metadata block must be a mapping")
	}
	if err := doc.checkDuplicates(top, 0); err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(top.Content); i += 2 {
		k := top.Content[i].Value
		doc.fields[k] = top.Content[i+1]
		doc.order = append(doc.order, k)
	}
	return doc, nil
}

// errAt builds an error naming the file, the line of n and the field path.
func (d *yamlDoc) errAt(n *yaml.Node, field, msg string) error {
	where := d.file
	if n != nil && n.Line > 0 {
		where += ":" + strconv.Itoa(d.line0+n.Line)
	}
	if field != "" {
		return fmt.Errorf("%s: %s: %s", where, field, msg)
	}
	return fmt.Errorf("%s: %s", where, msg)
}

// checkDuplicates walks the tree (not through aliases, which could expand without bound).
func (d *yamlDoc) checkDuplicates(n *yaml.Node, depth int) error {
	if depth > maxYAMLDepth {
		return d.errAt(n, "", fmt.Sprintf("nesting deeper than %d levels", maxYAMLDepth))
	}
	if n.Kind == yaml.MappingNode {
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind == yaml.ScalarNode {
				if seen[k.Value] {
					return d.errAt(k, "", fmt.Sprintf("duplicate key %q", k.Value))
				}
				seen[k.Value] = true
			}
		}
	}
	if n.Kind == yaml.AliasNode {
		return nil
	}
	for _, c := range n.Content {
		if err := d.checkDuplicates(c, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// merge applies a standalone .huggingface.yaml over the card the way datasets does
// (dict.update): each of its top-level keys replaces the card's.
func (d *yamlDoc) merge(o *yamlDoc) *yamlDoc {
	if o == nil || len(o.fields) == 0 {
		return d
	}
	out := &yamlDoc{file: d.file, line0: d.line0, fields: map[string]*yaml.Node{}, from: map[string]*yamlDoc{}}
	for _, k := range d.order {
		out.fields[k] = d.fields[k]
		out.order = append(out.order, k)
	}
	for _, k := range o.order {
		if _, ok := out.fields[k]; !ok {
			out.order = append(out.order, k)
		}
		out.fields[k] = o.fields[k]
		out.from[k] = o
	}
	return out
}

// deref follows aliases (bounded: an alias of an alias of ... is refused past a few hops).
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 8; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		return deref(n.Content[0])
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = deref(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// pyYAMLBools are the plain scalars PyYAML (YAML 1.1, which datasets parses cards with) reads as
// booleans; YAML 1.2 parsers read only true/false so.
var pyYAMLBools = map[string]bool{
	"yes": true, "Yes": true, "YES": true, "true": true, "True": true, "TRUE": true, "on": true, "On": true, "ON": true,
	"no": false, "No": false, "NO": false, "false": false, "False": false, "FALSE": false, "off": false, "Off": false, "OFF": false,
}

// truthy is Python's bool() of the value PyYAML would build from n.
func truthy(n *yaml.Node) bool {
	n = deref(n)
	switch {
	case n == nil || isNull(n):
		return false
	case n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode:
		return len(n.Content) > 0
	case n.Kind != yaml.ScalarNode:
		return true
	}
	if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return n.Value != ""
	}
	if b, ok := pyYAMLBools[n.Value]; ok {
		return b
	}
	switch n.ShortTag() {
	case "!!int", "!!float":
		v := strings.ReplaceAll(n.Value, "_", "")
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f != 0
		}
		if i, err := strconv.ParseInt(v, 0, 64); err == nil {
			return i != 0
		}
		return true
	}
	return n.Value != ""
}

// scalarString is the text of a scalar node; ok is false for anything else (and for null).
func scalarString(n *yaml.Node) (string, bool) {
	n = deref(n)
	if n == nil || n.Kind != yaml.ScalarNode || isNull(n) {
		return "", false
	}
	return n.Value, true
}

// errDataFilesForm is datasets' message for a data_files value it cannot read.
var errDataFilesForm = errors.New("expected a string, a list of strings, or a list of {split: NAME, path: PATTERN or [PATTERNS]}")
