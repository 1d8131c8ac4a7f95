package peft

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"unicode/utf8"
)

// compileFullmatch compiles a target_modules or exclude_modules string (field names it in errors)
// as PEFT matches it: Python's re.fullmatch on the module name, which is the expression anchored
// at both ends. Validate and Targets both compile through here, so that what was validated is
// exactly what is matched with: the anchoring adds a level of nesting, and an expression nested
// just under RE2's depth limit compiles bare but not anchored. The bare expression must compile
// too: an unbalanced ")" would otherwise close the anchoring group and change what matches
// (Python's re refuses it). The compiled program is bounded (MaxRegexProgram) before it is built,
// since a few bytes of counted repetition make a program that is slow to build and to match.
// Errors quote the expression shortened, never all of it.
func compileFullmatch(field, expr string) (*regexp.Regexp, error) {
	shown := shortExpr(expr)
	if len(expr) > MaxRegexBytes {
		return nil, fmt.Errorf("LoraConfig.%s: regular expression %s is above gotpu's limit of %d bytes", field, shown, MaxRegexBytes)
	}
	if _, err := syntax.Parse(expr, syntax.Perl); err != nil {
		return nil, fmt.Errorf("LoraConfig.%s: regular expression %s: %w", field, shown, shortSyntaxError(err))
	}
	anchored := `^(?:` + expr + `)$`
	tree, err := syntax.Parse(anchored, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("LoraConfig.%s: regular expression %s, anchored to match whole module names (re.fullmatch): %w", field, shown, shortSyntaxError(err))
	}
	if n := programSize(tree, MaxRegexProgram); n > MaxRegexProgram {
		return nil, fmt.Errorf("LoraConfig.%s: regular expression %s compiles to more than gotpu's limit of %d instructions", field, shown, MaxRegexProgram)
	}
	re, err := regexp.Compile(anchored)
	if err != nil { // parsed above, and small: not expected
		return nil, fmt.Errorf("LoraConfig.%s: regular expression %s: %w", field, shown, shortSyntaxError(err))
	}
	return re, nil
}

// programSize estimates, from above, the instructions syntax.Compile makes of re once
// simplified (counted repetitions expanded), without building anything; it stops counting past
// limit, so that nested repetitions cannot overflow it.
func programSize(re *syntax.Regexp, limit int) int {
	sat := func(n int) int { return min(n, limit+1) }
	switch re.Op {
	case syntax.OpLiteral:
		return sat(len(re.Rune) + 1)
	case syntax.OpCapture:
		return sat(2 + programSize(re.Sub[0], limit))
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		return sat(1 + programSize(re.Sub[0], limit))
	case syntax.OpRepeat:
		sub := programSize(re.Sub[0], limit)
		copies := re.Max
		if copies < 0 { // x{n,}: n copies and a star
			copies = re.Min + 1
		}
		if sub > limit || copies > limit {
			return limit + 1
		}
		return sat(copies*(sub+1) + 1)
	case syntax.OpConcat, syntax.OpAlternate:
		n := len(re.Sub) + 1
		for _, s := range re.Sub {
			n = sat(n + programSize(s, limit))
		}
		return n
	}
	return 1 // an empty match, an anchor, a character class, any character
}

// maxShownExpr is how much of an expression an error quotes.
const maxShownExpr = 60

// shortExpr quotes expr for an error, cut to maxShownExpr bytes, with its length when longer.
func shortExpr(expr string) string {
	if len(expr) <= maxShownExpr {
		return fmt.Sprintf("%q", expr)
	}
	return fmt.Sprintf("%q… (%d bytes)", clip(expr), len(expr))
}

// clip is s cut to at most maxShownExpr bytes, on a character boundary.
func clip(s string) string {
	if len(s) <= maxShownExpr {
		return s
	}
	cut := maxShownExpr
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// shortSyntaxError is err with the expression it quotes shortened: RE2 quotes the whole
// expression for some errors (nesting depth), which may be as long as MaxRegexBytes.
func shortSyntaxError(err error) error {
	var se *syntax.Error
	if errors.As(err, &se) && len(se.Expr) > maxShownExpr {
		return &syntax.Error{Code: se.Code, Expr: fmt.Sprintf("%s… (%d bytes)", clip(se.Expr), len(se.Expr))}
	}
	return err
}
