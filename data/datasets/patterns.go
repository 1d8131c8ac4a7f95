package datasets

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Split names datasets gives special order to (DEFAULT_SPLITS).
const (
	Train      = "train"
	Validation = "validation"
	Test       = "test"
)

// The default patterns are datasets' (data_files.py, for fsspec >= 2023.12), used when the README
// has no configs (or a config has no data_files).
const (
	// shardedPattern is push_to_hub's layout; {split} is any split name.
	shardedPattern = "data/{split}-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]*.*"
	// nonWordChars may surround a split keyword in a file or directory name.
	nonWordChars = "-._ 0-9"
)

// shardedSplitRE takes the split name back out of a file name that matched shardedPattern, the
// way datasets' string_to_dict does: the pattern's basename becomes a regex whose {split} is a
// greedy ".+" (and whose glob characters are read as regex: "[0-9]*" is zero or more digits).
var shardedSplitRE = regexp.MustCompile(`(.+)-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]*.*`)

// splitKeywords are the words that name each default split (SPLIT_KEYWORDS), in datasets' order.
var splitKeywords = []struct {
	split    string
	keywords []string
}{
	{Train, []string{"train", "training"}},
	{Validation, []string{"validation", "valid", "dev", "val"}},
	{Test, []string{"test", "testing", "eval", "evaluation"}},
}

// Keyword pattern templates: {k} is the keyword, {s} the separator class.
var (
	keywordInDirName = []string{
		"**/{k}/**",
		"**/{k}[{s}]*/**",
		"**/*[{s}]{k}/**",
		"**/*[{s}]{k}[{s}]*/**",
	}
	keywordInFileName = []string{
		"**/{k}[{s}]*",
		"**/*[{s}]{k}[{s}]*",
	}
)

// keywordPatterns expands templates for each default split, in datasets' order.
func keywordPatterns(templates []string) []SplitPatterns {
	out := make([]SplitPatterns, 0, len(splitKeywords))
	for _, sk := range splitKeywords {
		var ps []string
		for _, k := range sk.keywords {
			for _, t := range templates {
				ps = append(ps, strings.NewReplacer("{k}", k, "{s}", nonWordChars).Replace(t))
			}
		}
		out = append(out, SplitPatterns{Split: sk.split, Patterns: ps})
	}
	return out
}

// defaultPatterns returns, for a dataset whose files (relative paths, sorted or not) are given,
// the split patterns datasets would choose when nothing names them (get_data_patterns): the
// sharded push_to_hub layout if any file follows it, else a "logs" split of inspect_ai's .eval
// files (datasets >= 4.4.2 looks for them first), else split keywords in directory names, else
// in file names, else every file as "train". Every file counts here, whatever its extension;
// hidden and "__" paths and metadata files do not. It fails when no file matches at all.
func defaultPatterns(files []string) ([]SplitPatterns, error) {
	// 1. data/{split}-00000-of-00001.ext
	sharded, err := compileGlob(strings.ReplaceAll(shardedPattern, "{split}", "*"))
	if err != nil {
		return nil, fmt.Errorf("datasets: sharded pattern: %w", err)
	}
	var splits []string
	for _, f := range files {
		if !sharded.match(f) {
			continue
		}
		name := f[strings.LastIndexByte(f, '/')+1:]
		m := shardedSplitRE.FindStringSubmatch(name)
		if m == nil {
			continue // cannot happen for a match; kept as a guard
		}
		if !validSplitName(m[1]) {
			return nil, fmt.Errorf("datasets: file %q: split name %q must be word characters separated by dots", f, m[1])
		}
		if !slices.Contains(splits, m[1]) {
			splits = append(splits, m[1])
		}
	}
	if len(splits) > 0 {
		sortSplits(splits)
		out := make([]SplitPatterns, len(splits))
		for i, s := range splits {
			out[i] = SplitPatterns{Split: s, Patterns: []string{strings.ReplaceAll(shardedPattern, "{split}", s)}}
		}
		return out, nil
	}
	// 2. inspect_ai logs; 3. and 4. split keywords in directory names, then in file names;
	// 5. everything is train.
	for _, set := range [][]SplitPatterns{
		{{Split: "logs", Patterns: []string{"**/*.eval"}}},
		keywordPatterns(keywordInDirName),
		keywordPatterns(keywordInFileName),
		{{Split: Train, Patterns: []string{"**"}}},
	} {
		var found []SplitPatterns
		for _, sp := range set {
			ok, err := anyMatch(sp.Patterns, files)
			if err != nil {
				return nil, err
			}
			if ok {
				found = append(found, sp)
			}
		}
		if len(found) > 0 {
			return found, nil
		}
	}
	return nil, errNoDataFiles
}

// errNoDataFiles is datasets' EmptyDatasetError: nothing in the dataset could be data.
var errNoDataFiles = fmt.Errorf("no data files")

// anyMatch reports whether any of patterns resolves to at least one of files.
func anyMatch(patterns, files []string) (bool, error) {
	for _, p := range patterns {
		g, err := compileGlob(p)
		if err != nil {
			return false, fmt.Errorf("datasets: default pattern: %w", err)
		}
		for _, f := range files {
			if g.match(f) {
				return true, nil
			}
		}
	}
	return false, nil
}

// validSplitName is datasets' _split_re, ^\w+(\.\w+)*$, with Python's Unicode \w (letters,
// numbers and "_").
func validSplitName(s string) bool {
	if s == "" {
		return false
	}
	for _, w := range strings.Split(s, ".") {
		if w == "" {
			return false
		}
		for _, r := range w {
			if r != '_' && !unicode.IsLetter(r) && !unicode.IsNumber(r) {
				return false
			}
		}
	}
	return true
}

// sortSplits orders split names train, validation, test first, then the others by name.
func sortSplits(s []string) {
	rank := func(n string) int {
		switch n {
		case Train:
			return 0
		case Validation:
			return 1
		case Test:
			return 2
		}
		return 3
	}
	slices.SortFunc(s, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
}
