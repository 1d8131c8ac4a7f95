package cli

import (
	"flag"
	"sort"
	"strings"
)

// suggestion returns "; did you mean --x?" (or "--x or --y") for an unknown flag name close to
// flags fs defines, else "". Close means a small edit distance (a typo) or a prefix of a longer
// name (argparse's abbreviations, which HfArgumentParser accepts and gotpu does not).
func suggestion(fs *flag.FlagSet, name string) string {
	type cand struct {
		name string
		dist int
	}
	var cands []cand
	limit := 1
	if len(name) >= 5 {
		limit = 2
	}
	if len(name) >= 12 {
		limit = 3
	}
	fs.VisitAll(func(f *flag.Flag) {
		d := editDistance(name, f.Name)
		if d > limit && len(name) >= 4 && strings.HasPrefix(f.Name, name) {
			d = limit // an abbreviation: rank it with the furthest typos
		}
		if d <= limit {
			cands = append(cands, cand{f.Name, d})
		}
	})
	if len(cands) == 0 {
		return ""
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].dist != cands[j].dist {
			return cands[i].dist < cands[j].dist
		}
		return cands[i].name < cands[j].name
	})
	if len(cands) > 3 {
		cands = cands[:3]
	}
	names := make([]string, len(cands))
	for i, c := range cands {
		names[i] = "--" + c.name
	}
	switch len(names) {
	case 1:
		return "; did you mean " + names[0] + "?"
	default:
		return "; did you mean " + strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1] + "?"
	}
}

// editDistance is the Damerau–Levenshtein (optimal string alignment) distance between a and b,
// case-insensitively: a swapped pair of letters is one typo, as a user makes it.
func editDistance(a, b string) int {
	a, b = strings.ToLower(a), strings.ToLower(b)
	// Three rows suffice: the transposition looks two rows back.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// SuggestCommand returns `; did you mean "x"?` for an unknown command name within one typo (two
// for longer names) of one of names, else "".
func SuggestCommand(name string, names []string) string {
	limit := 1
	if len(name) >= 5 {
		limit = 2
	}
	best, bestDist := "", limit+1
	for _, n := range names {
		if d := editDistance(name, n); d < bestDist || (d == bestDist && n < best) {
			best, bestDist = n, d
		}
	}
	if best == "" {
		return ""
	}
	return `; did you mean "` + best + `"?`
}
