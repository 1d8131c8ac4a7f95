package regex

import (
	"sort"
	"unicode"
)

// charClass is a set of runes kept as sorted, non-overlapping, non-adjacent
// closed ranges, plus a bitmap for ASCII so that the common case is one test.
type charClass struct {
	ranges []rng
	ascii  [2]uint64
}

type rng struct{ lo, hi rune }

// set is the mutable form used while parsing; it is normalised by finish.
type set []rng

func (s set) add(lo, hi rune) set {
	if lo > hi {
		return s
	}
	return append(s, rng{lo, hi})
}

func (s set) addTable(t *unicode.RangeTable) set {
	for _, r := range t.R16 {
		s = addStrided(s, rune(r.Lo), rune(r.Hi), rune(r.Stride))
	}
	for _, r := range t.R32 {
		s = addStrided(s, rune(r.Lo), rune(r.Hi), rune(r.Stride))
	}
	return s
}

func addStrided(s set, lo, hi, stride rune) set {
	if stride == 1 {
		return s.add(lo, hi)
	}
	for r := lo; r <= hi; r += stride {
		s = s.add(r, r)
	}
	return s
}

// normalize sorts and merges overlapping or adjacent ranges.
func (s set) normalize() set {
	if len(s) < 2 {
		return s
	}
	sort.Slice(s, func(i, j int) bool { return s[i].lo < s[j].lo })
	out := s[:1]
	for _, r := range s[1:] {
		last := &out[len(out)-1]
		if r.lo <= last.hi+1 {
			if r.hi > last.hi {
				last.hi = r.hi
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

func (s set) negate() set {
	s = s.normalize()
	var out set
	next := rune(0)
	for _, r := range s {
		if r.lo > next {
			out = append(out, rng{next, r.lo - 1})
		}
		next = r.hi + 1
	}
	if next <= unicode.MaxRune {
		out = append(out, rng{next, unicode.MaxRune})
	}
	return out
}

func (s set) intersect(t set) set {
	a, b := s.normalize(), t.normalize()
	var out set
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		lo, hi := max(a[i].lo, b[j].lo), min(a[i].hi, b[j].hi)
		if lo <= hi {
			out = append(out, rng{lo, hi})
		}
		if a[i].hi < b[j].hi {
			i++
		} else {
			j++
		}
	}
	return out
}

// foldCase closes the set under simple case folding, which is what
// Oniguruma's (?i) does for single characters. Only runes that have case
// mappings can gain new members, so only the intersection with
// unicode.CaseRanges (plus the orbit table) is walked.
func (s set) foldCase() set {
	s = s.normalize()
	var extra set
	for _, cr := range unicode.CaseRanges {
		lo, hi := rune(cr.Lo), rune(cr.Hi)
		for _, r := range s {
			a, b := max(lo, r.lo), min(hi, r.hi)
			for c := a; c <= b; c++ {
				for f := unicode.SimpleFold(c); f != c; f = unicode.SimpleFold(f) {
					extra = extra.add(f, f)
				}
			}
		}
	}
	// A few orbits (k/K/Kelvin sign, s/S/long s, ...) involve runes that
	// CaseRanges lists only on one side; SimpleFold above already walks the
	// whole orbit from any member that is listed, so they are covered.
	return append(s, extra...).normalize()
}

func (s set) finish() *charClass {
	s = s.normalize()
	c := &charClass{ranges: []rng(s)}
	for _, r := range s {
		for x := r.lo; x <= r.hi && x < 128; x++ {
			c.ascii[x>>6] |= 1 << (uint(x) & 63)
		}
	}
	return c
}

func (c *charClass) matches(r rune) bool {
	if r < 128 {
		return c.ascii[r>>6]&(1<<(uint(r)&63)) != 0
	}
	rs := c.ranges
	// Binary search for the first range with hi >= r.
	lo, hi := 0, len(rs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if rs[m].hi < r {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(rs) && rs[lo].lo <= r
}

// single reports whether the class is exactly one rune.
func (c *charClass) single() (rune, bool) {
	if len(c.ranges) == 1 && c.ranges[0].lo == c.ranges[0].hi {
		return c.ranges[0].lo, true
	}
	return 0, false
}
