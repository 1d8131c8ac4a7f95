package datasets

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
)

// Resolved is a dataset's config with its splits' data files.
type Resolved struct {
	Repo   string // "org/name" or the local dir
	Commit string // hub commit ("" for a local dir)
	Config string
	Format string // "parquet", "arrow", "csv", "json", "text"
	// Sep is the CSV separator datasets implies from the extension: "\t" for .tsv files, ""
	// (the reader's default, ",") otherwise.
	Sep string
	// Splits maps a split to its files (repo-relative for the Hub, absolute for local dirs), in
	// datasets' order: pattern by pattern as listed, each pattern's matches sorted by path. A file
	// that two patterns of a split match is listed twice, as datasets lists it; a pattern listed
	// twice is resolved once, where it first appears.
	Splits map[string][]string
}

// SplitNames returns the splits: train, validation, test first, then the others by name.
func (r *Resolved) SplitNames() []string {
	names := make([]string, 0, len(r.Splits))
	for s := range r.Splits {
		names = append(names, s)
	}
	sortSplits(names)
	return names
}

// Split returns a copy of the split's files, or an error naming the splits there are.
func (r *Resolved) Split(name string) ([]string, error) {
	files, ok := r.Splits[name]
	if !ok {
		return nil, fmt.Errorf("datasets: %s (config %q): unknown split %q; available splits: %s",
			r.Repo, r.Config, name, strings.Join(r.SplitNames(), ", "))
	}
	return slices.Clone(files), nil
}

// ResolveFiles decides a dataset's config, format and split files as datasets' load_dataset does
// for a Hub repository or a local directory without a loading script. files are the dataset's
// files as paths relative to its root, with "/"; readme is its README.md (nil if it has none);
// config is the requested config name ("" for the default). The Repo and Commit of the result
// are left for the caller.
func ResolveFiles(files []string, readme []byte, config string) (*Resolved, error) {
	doc, err := readmeYAML(readme)
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	return resolve(files, doc, config)
}

// resolve is ResolveFiles on a parsed card (README.md, possibly merged with .huggingface.yaml).
func resolve(files []string, doc *yamlDoc, config string) (*Resolved, error) {
	all, err := cleanFileList(files)
	if err != nil {
		return nil, err
	}
	c, err := parseCard(doc)
	if err != nil {
		return nil, fmt.Errorf("datasets: %w", err)
	}
	spec, err := selectConfig(c, config)
	if err != nil {
		return nil, err
	}
	// Patterns are relative to the config's data_dir.
	rel := all
	if spec.DataDir != "" {
		rel = nil
		for _, f := range all {
			if r, ok := strings.CutPrefix(f, spec.DataDir+"/"); ok {
				rel = append(rel, r)
			}
		}
	}
	where := "the dataset"
	if spec.DataDir != "" {
		where = fmt.Sprintf("data_dir %q", spec.DataDir)
	}
	patterns, fromConfig := spec.DataFiles, spec.DataFiles != nil
	if !fromConfig {
		if patterns, err = defaultPatterns(rel); err != nil {
			if errors.Is(err, errNoDataFiles) {
				return nil, fmt.Errorf("datasets: config %q: %s contains no data files", spec.Name, where)
			}
			return nil, err
		}
	}
	var budget *patternBudget
	if fromConfig {
		budget = &patternBudget{file: doc.docOf("configs").file}
	}
	splits := make(map[string][]string, len(patterns))
	modules := make([]module, len(patterns))
	for i, sp := range patterns {
		got, err := resolveSplit(sp, rel, budget)
		if err != nil {
			return nil, fmt.Errorf("datasets: config %q, split %q: %w", spec.Name, sp.Split, err)
		}
		splits[sp.Split] = got
		modules[i] = inferModule(got)
	}
	m, err := commonModule(patterns, modules)
	if err != nil {
		return nil, fmt.Errorf("datasets: config %q: %w", spec.Name, err)
	}
	if err := checkSupported(m); err != nil {
		return nil, fmt.Errorf("datasets: config %q: %w", spec.Name, err)
	}
	re := moduleFileRE(m.name)
	out := &Resolved{Config: spec.Name, Format: m.name, Sep: m.sep, Splits: make(map[string][]string, len(splits))}
	for _, sp := range patterns {
		kept := make([]string, 0, len(splits[sp.Split]))
		for _, f := range splits[sp.Split] {
			sub := re.FindStringSubmatch(f)
			if sub == nil {
				if fromConfig {
					// datasets would hand this file to the format's reader and fail there.
					return nil, fmt.Errorf("datasets: config %q, split %q: %q is not a %s data file (the config's files are %s)",
						spec.Name, sp.Split, path.Join(spec.DataDir, f), m.name, m)
				}
				continue // the default patterns keep only the format's files
			}
			if err := checkReadable(path.Join(spec.DataDir, f), sub); err != nil {
				return nil, fmt.Errorf("datasets: config %q, split %q: %w", spec.Name, sp.Split, err)
			}
			kept = append(kept, path.Join(spec.DataDir, f))
		}
		if len(kept) == 0 {
			return nil, fmt.Errorf("datasets: config %q, split %q: no %s data files", spec.Name, sp.Split, m.name)
		}
		out.Splits[sp.Split] = kept
	}
	return out, nil
}

// cleanFileList checks a file listing and sorts it (fsspec's glob returns paths sorted).
func cleanFileList(files []string) ([]string, error) {
	out := make([]string, 0, len(files))
	for _, f := range files {
		if f == "" || strings.HasPrefix(f, "/") || strings.HasSuffix(f, "/") || strings.Contains(f, "//") {
			return nil, fmt.Errorf("datasets: file list: %q is not a relative file path", f)
		}
		for _, p := range strings.Split(f, "/") {
			if p == "." || p == ".." {
				return nil, fmt.Errorf("datasets: file list: %q is not a clean relative path", f)
			}
		}
		out = append(out, f)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// MaxPatternChecks bounds the work of resolving one config's data_files: the number of
// (pattern, file) pairs its patterns are tested on, all splits together. A README is input
// anyone may write, and it is read whole (up to MaxReadmeBytes): a split listing one glob tens of
// thousands of times over a repo of thousands of files would list every file once per copy
// (datasets does), tens of millions of entries. A pattern is charged the files it can match (those
// that start with its literal prefix; one for a pattern without magic, looked up by binary
// search) before it is matched, so a README over the limit is refused before the work and the
// memory are spent. Real configs test a few patterns against a listing once: the limit allows
// four full passes over a million files.
const MaxPatternChecks = 1 << 22

// patternBudget counts the pattern checks of the config patterns being resolved; file names the
// card the patterns come from (README.md or .huggingface.yaml), for the error.
type patternBudget struct {
	file string
	used int64
}

// resolveSplit resolves a split's patterns in order against the (sorted) files, keeping the
// files with an extension datasets knows. A pattern without glob characters must find its file;
// a glob may find nothing. A pattern the split repeats (with or without a leading "./") is
// resolved once, where it first appears: datasets would list its files again for each copy and
// so read them twice, which no card means. Files that two different patterns
// match are listed once per pattern, as datasets lists them. budget, nil for the default patterns
// (a fixed few), charges the config's patterns (MaxPatternChecks).
func resolveSplit(sp SplitPatterns, files []string, budget *patternBudget) ([]string, error) {
	type planned struct {
		g       *globPattern
		written string // the pattern as the card wrote it, for errors
		lo, hi  int
	}
	plan := make([]planned, 0, len(sp.Patterns))
	seen := make(map[string]bool, len(sp.Patterns))
	for _, p := range sp.Patterns {
		g, err := parseGlob(p)
		if err != nil {
			return nil, err
		}
		if seen[g.src] {
			continue
		}
		seen[g.src] = true
		lo, hi := g.candidates(files)
		if budget != nil {
			budget.used += int64(hi-lo) + 1
			if budget.used > MaxPatternChecks {
				return nil, fmt.Errorf("%s: data_files: at distinct pattern %d of the split's %d, matching them against the %d files "+
					"takes more than %d pattern-file checks, gotpu's limit (datasets.MaxPatternChecks) on what a dataset card may ask for; "+
					"list each file or glob once", budget.file, len(seen), len(sp.Patterns), len(files), MaxPatternChecks)
			}
		}
		plan = append(plan, planned{g, p, lo, hi})
	}
	var out []string
	for _, pl := range plan {
		if pl.lo < pl.hi {
			if err := pl.g.compile(); err != nil {
				return nil, err
			}
		}
		n := 0
		for _, f := range files[pl.lo:pl.hi] {
			if pl.g.match(f) && allowedDataFile(f) {
				out = append(out, f)
				n++
			}
		}
		if n == 0 && !pl.g.magic {
			return nil, fmt.Errorf("unable to find %q with a supported data file extension", pl.written)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no data files match %s", quoteSome(plan, func(p planned) string { return p.written }))
	}
	return out, nil
}

// quoteSome lists the first few items quoted, and how many more there are: an error names the
// patterns a card gave without repeating a card's worth of them.
func quoteSome[T any](items []T, name func(T) string) string {
	const show = 8
	var b strings.Builder
	b.WriteString("[")
	for i, it := range items[:min(len(items), show)] {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%q", name(it))
	}
	if len(items) > show {
		fmt.Fprintf(&b, " and %d more", len(items)-show)
	}
	b.WriteString("]")
	return b.String()
}

// commonModule is infer_module_for_data_files: every split must have the same format.
func commonModule(patterns []SplitPatterns, modules []module) (module, error) {
	for i := range modules {
		if modules[i] != modules[0] {
			var b strings.Builder
			for j, sp := range patterns {
				if j > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "%s: %s", sp.Split, modules[j])
			}
			return module{}, fmt.Errorf("the splits' data files are not all of one format (%s)", b.String())
		}
	}
	if len(modules) == 0 || modules[0].name == "" {
		return module{}, fmt.Errorf("no supported data files found")
	}
	return modules[0], nil
}

// checkSupported refuses the formats datasets reads and gotpu does not.
func checkSupported(m module) error {
	if m.name == "zip" {
		return fmt.Errorf("the data files are zip archives: archived data files are not supported, extract them")
	}
	if !slices.Contains(supportedFormats, m.name) {
		return fmt.Errorf("datasets would load this dataset with its %q builder, which gotpu does not support (supported: %s)",
			m.name, strings.Join(supportedFormats, ", "))
	}
	return nil
}

// selectConfig picks the requested config, or the default one as datasets does: the one marked
// `default`, else the one named "default", else the only one, else the only one dataset_info
// describes.
func selectConfig(c *card, name string) (ConfigSpec, error) {
	if len(c.configs) == 0 {
		if name != "" && name != "default" {
			return ConfigSpec{}, fmt.Errorf("datasets: config %q not found: README.md defines no configs, so the only config is \"default\"", name)
		}
		return ConfigSpec{Name: "default"}, nil
	}
	names := make([]string, len(c.configs))
	for i, s := range c.configs {
		names[i] = s.Name
	}
	if name != "" {
		for _, s := range c.configs {
			if s.Name == name {
				return s, nil
			}
		}
		return ConfigSpec{}, fmt.Errorf("datasets: config %q not found; available configs: %s", name, strings.Join(names, ", "))
	}
	var def *ConfigSpec
	for i, s := range c.configs {
		if len(c.configs) == 1 || s.Name == "default" || s.Default {
			if def != nil {
				return ConfigSpec{}, fmt.Errorf("datasets: README.md: configs: several default configs: %q and %q", def.Name, s.Name)
			}
			def = &c.configs[i]
		}
	}
	if def != nil {
		return *def, nil
	}
	if len(c.infoConfigs) == 1 {
		if i := slices.Index(names, c.infoConfigs[0]); i >= 0 {
			return c.configs[i], nil
		}
	}
	return ConfigSpec{}, fmt.Errorf("datasets: config name is missing: pick one of %s (--dataset_config_name)", strings.Join(names, ", "))
}
