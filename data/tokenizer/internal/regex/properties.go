package regex

import (
	"strings"
	"unicode"
)

// Unicode property names as Oniguruma accepts them in \p{...} and POSIX
// brackets. Oniguruma compares names ignoring case, spaces, '-' and '_'.

var categoryAliases = map[string]string{
	"letter": "L", "casedletter": "LC", "uppercaseletter": "Lu", "lowercaseletter": "Ll",
	"titlecaseletter": "Lt", "modifierletter": "Lm", "otherletter": "Lo",
	"mark": "M", "combiningmark": "M", "nonspacingmark": "Mn", "spacingmark": "Mc", "enclosingmark": "Me",
	"number": "N", "decimalnumber": "Nd", "letternumber": "Nl", "othernumber": "No",
	"punctuation": "P", "connectorpunctuation": "Pc", "dashpunctuation": "Pd", "openpunctuation": "Ps",
	"closepunctuation": "Pe", "initialpunctuation": "Pi", "finalpunctuation": "Pf", "otherpunctuation": "Po",
	"symbol": "S", "mathsymbol": "Sm", "currencysymbol": "Sc", "modifiersymbol": "Sk", "othersymbol": "So",
	"separator": "Z", "spaceseparator": "Zs", "lineseparator": "Zl", "paragraphseparator": "Zp",
	"other": "C", "control": "Cc", "format": "Cf", "surrogate": "Cs", "privateuse": "Co", "unassigned": "Cn",
}

func normName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case ' ', '_', '-':
			continue
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// assigned is every rune that has a general category other than Cn.
func assigned() set {
	var s set
	for _, t := range []*unicode.RangeTable{unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z,
		unicode.Cc, unicode.Cf, unicode.Cs, unicode.Co} {
		s = s.addTable(t)
	}
	return s
}

func category(name string) (set, bool) {
	switch name {
	case "Cn":
		return assigned().negate(), true
	case "C":
		return set(nil).addTable(unicode.C).append(assigned().negate()), true
	case "LC":
		return set(nil).addTable(unicode.Lu).addTable(unicode.Ll).addTable(unicode.Lt), true
	}
	t, ok := unicode.Categories[name]
	if !ok {
		return nil, false
	}
	return set(nil).addTable(t), true
}

func (s set) append(t set) set { return append(s, t...) }

// Classes behind the Perl-style escapes, with Oniguruma's Unicode meanings.
func spaceSet() set {
	return set(nil).add(0x09, 0x0D).add(0x85, 0x85).addTable(unicode.Z)
}
func digitSet() set { return set(nil).addTable(unicode.Nd) }
func wordSet() set {
	return set(nil).addTable(unicode.L).addTable(unicode.M).addTable(unicode.Nd).addTable(unicode.Pc)
}
func hexSet() set { return set(nil).add('0', '9').add('a', 'f').add('A', 'F') }

// lookupProperty resolves a \p{name} or [:name:] property.
func lookupProperty(name string) (set, bool) {
	n := normName(name)
	switch n {
	case "any":
		return set(nil).add(0, unicode.MaxRune), true
	case "assigned":
		return assigned(), true
	case "ascii":
		return set(nil).add(0, 0x7F), true
	case "alnum":
		return set(nil).addTable(unicode.L).addTable(unicode.M).addTable(unicode.Nd), true
	case "alpha":
		return set(nil).addTable(unicode.L).addTable(unicode.M), true
	case "blank":
		return set(nil).addTable(unicode.Zs).add('\t', '\t'), true
	case "cntrl":
		s, _ := category("C")
		return s, true
	case "digit":
		return digitSet(), true
	case "graph":
		ex := spaceSet().append(set(nil).addTable(unicode.Cc).addTable(unicode.Cs)).append(assigned().negate())
		return ex.negate(), true
	case "print":
		ex := spaceSet().append(set(nil).addTable(unicode.Cc).addTable(unicode.Cs)).append(assigned().negate())
		return ex.negate().addTable(unicode.Zs), true
	case "lower":
		return set(nil).addTable(unicode.Ll), true
	case "upper":
		return set(nil).addTable(unicode.Lu), true
	case "punct":
		s := set(nil).addTable(unicode.P)
		for _, r := range "$+<=>^`|~" {
			s = s.add(r, r)
		}
		return s, true
	case "space", "whitespace":
		return spaceSet(), true
	case "xdigit":
		return hexSet(), true
	case "word":
		return wordSet(), true
	case "alphabetic":
		return set(nil).addTable(unicode.L).addTable(unicode.Nl).addTable(unicode.Other_Alphabetic), true
	case "lowercase":
		return set(nil).addTable(unicode.Ll).addTable(unicode.Other_Lowercase), true
	case "uppercase":
		return set(nil).addTable(unicode.Lu).addTable(unicode.Other_Uppercase), true
	}
	if c, ok := categoryAliases[n]; ok {
		return category(c)
	}
	for c := range unicode.Categories {
		if normName(c) == n {
			return category(c)
		}
	}
	switch n {
	case "c", "cn", "lc":
		return category(strings.ToUpper(n[:1]) + n[1:])
	}
	for sc, t := range unicode.Scripts {
		if normName(sc) == n {
			return set(nil).addTable(t), true
		}
	}
	for p, t := range unicode.Properties {
		if normName(p) == n {
			return set(nil).addTable(t), true
		}
	}
	return nil, false
}
