package datasets

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// parseCard reads the fields the resolver needs from a card: `configs` (datasets'
// MetadataConfigs.from_dataset_card_data with its data_files checks) and the config names of
// `dataset_info`. Every other field (features, license, ...) is ignored.
func parseCard(d *yamlDoc) (*card, error) {
	c := &card{}
	if n, ok := d.fields["configs"]; ok && truthy(n) {
		src := d.docOf("configs")
		n = deref(n)
		if n.Kind != yaml.SequenceNode {
			return nil, src.errAt(n, "configs", "expected a list of configs")
		}
		for i, item := range n.Content {
			spec, err := parseConfig(src, deref(item), fmt.Sprintf("configs[%d]", i))
			if err != nil {
				return nil, err
			}
			if slices.ContainsFunc(c.configs, func(o ConfigSpec) bool { return o.Name == spec.Name }) {
				return nil, src.errAt(item, fmt.Sprintf("configs[%d].config_name", i), fmt.Sprintf("config %q is defined twice", spec.Name))
			}
			c.configs = append(c.configs, spec)
		}
	}
	// dataset_info is one mapping or a list of them, each for config_name (default "default").
	if n := deref(d.fields["dataset_info"]); n != nil {
		var infos []*yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			infos = []*yaml.Node{n}
		case yaml.SequenceNode:
			infos = n.Content
		}
		for _, info := range infos {
			if info = deref(info); info == nil || info.Kind != yaml.MappingNode {
				continue
			}
			name := "default"
			if v := mappingValue(info, "config_name"); v != nil {
				if s, ok := scalarString(v); ok {
					name = s
				}
			}
			if !slices.Contains(c.infoConfigs, name) {
				c.infoConfigs = append(c.infoConfigs, name)
			}
		}
	}
	return c, nil
}

// mappingValue is the value of key in mapping m, or nil.
func mappingValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// parseConfig reads one entry of configs. Keys other than config_name, default, data_files and
// data_dir are builder parameters (features, sep, ...) that this resolver does not need.
func parseConfig(d *yamlDoc, n *yaml.Node, field string) (ConfigSpec, error) {
	var spec ConfigSpec
	if n == nil || n.Kind != yaml.MappingNode {
		return spec, d.errAt(n, field, "expected a mapping with config_name and data_files")
	}
	named := false
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		f := field + "." + k.Value
		switch k.Value {
		case "config_name":
			s, ok := scalarString(v)
			if !ok || s == "" {
				return spec, d.errAt(v, f, "expected a non-empty string")
			}
			spec.Name, named = s, true
		case "default":
			spec.Default = truthy(v)
		case "data_files":
			if isNull(v) {
				continue // as if absent: the default patterns apply
			}
			dfs, err := parseDataFiles(d, deref(v), f)
			if err != nil {
				return spec, err
			}
			spec.DataFiles = dfs
		case "data_dir":
			if isNull(v) {
				continue
			}
			s, ok := scalarString(v)
			if !ok {
				return spec, d.errAt(v, f, "expected a string")
			}
			dir, err := cleanDataDir(s)
			if err != nil {
				return spec, d.errAt(v, f, err.Error())
			}
			spec.DataDir = dir
		case "<<":
			return spec, d.errAt(k, f, "YAML merge keys are not supported in configs")
		}
	}
	if !named {
		return spec, d.errAt(n, field+".config_name", "missing: each config must name itself with config_name")
	}
	return spec, nil
}

// cleanDataDir checks a data_dir: a directory inside the dataset, written with "/".
func cleanDataDir(s string) (string, error) {
	if strings.HasPrefix(s, "/") || strings.Contains(s, "://") || strings.Contains(s, `\`) {
		return "", fmt.Errorf("%q must be a path relative to the dataset's root", s)
	}
	for _, p := range strings.Split(s, "/") {
		if p == ".." {
			return "", fmt.Errorf("%q leaves the dataset", s)
		}
	}
	if c := path.Clean(s); c != "." {
		return c, nil
	}
	return "", nil
}

// parseDataFiles reads a config's data_files in its three forms: a pattern (split "train"), a list
// of patterns (split "train"), or a list of {split, path} where path is a pattern or a list.
func parseDataFiles(d *yamlDoc, n *yaml.Node, field string) ([]SplitPatterns, error) {
	if s, ok := scalarString(n); ok {
		return []SplitPatterns{{Split: Train, Patterns: []string{s}}}, nil
	}
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil, d.errAt(n, field, errDataFilesForm.Error())
	}
	items := make([]*yaml.Node, len(n.Content))
	dicts := 0
	for i, it := range n.Content {
		items[i] = deref(it)
		if items[i] != nil && items[i].Kind == yaml.MappingNode {
			dicts++
		}
	}
	if dicts == 0 { // a list of patterns
		pats := make([]string, 0, len(items))
		for i, it := range items {
			s, ok := scalarString(it)
			if !ok {
				return nil, d.errAt(it, fmt.Sprintf("%s[%d]", field, i), errDataFilesForm.Error())
			}
			pats = append(pats, s)
		}
		return []SplitPatterns{{Split: Train, Patterns: pats}}, nil
	}
	var out []SplitPatterns
	for i, it := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		if it == nil || it.Kind != yaml.MappingNode || len(it.Content) != 4 {
			return nil, d.errAt(it, f, "each item must be a mapping with exactly the keys split and path ("+errDataFilesForm.Error()+")")
		}
		sv, pv := mappingValue(it, "split"), mappingValue(it, "path")
		if sv == nil || pv == nil {
			return nil, d.errAt(it, f, "each item must have exactly the keys split and path")
		}
		split, ok := scalarString(sv)
		if !ok || !validSplitName(split) {
			return nil, d.errAt(sv, f+".split", fmt.Sprintf("split name %q must be word characters separated by dots (no dashes)", sv.Value))
		}
		if slices.ContainsFunc(out, func(o SplitPatterns) bool { return o.Split == split }) {
			return nil, d.errAt(sv, f+".split", fmt.Sprintf("split %q is listed twice", split))
		}
		sp := SplitPatterns{Split: split}
		pv = deref(pv)
		if s, ok := scalarString(pv); ok {
			sp.Patterns = []string{s}
		} else if pv != nil && pv.Kind == yaml.SequenceNode {
			for j, e := range pv.Content {
				s, ok := scalarString(e)
				if !ok {
					return nil, d.errAt(e, fmt.Sprintf("%s.path[%d]", f, j), "expected a pattern string")
				}
				sp.Patterns = append(sp.Patterns, s)
			}
		} else {
			return nil, d.errAt(pv, f+".path", "expected a pattern or a list of patterns")
		}
		out = append(out, sp)
	}
	return out, nil
}
