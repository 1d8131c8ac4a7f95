package cli

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
)

// HelpGroup is one section of a command's --help.
type HelpGroup struct {
	Title string
	// Note, when set, is printed after the title, in parentheses.
	Note string
	// Names are the flags of the section, in order; names fs does not define are skipped, and a
	// flag already printed in an earlier section is not repeated.
	Names []string
	// Compact lists the names in a wrapped paragraph instead of one flag per line: for long
	// lists whose meaning the Note gives (HF fields gotpu accepts only at their defaults…).
	Compact bool
}

// helpWidth is where a compact paragraph wraps.
const helpWidth = 100

// PrintGroups writes fs's flags in sections, one line per flag (`--name TYPE  meaning (default
// X)`), aliases (flags sharing one value, registered after the flag they alias) on their
// flag's line. Flags no section names are listed under "Other flags" when rest is "", so that
// nothing is undocumented; otherwise rest is printed in their place (a command that accepts
// flags it ignores says so in one line).
func PrintGroups(w io.Writer, fs *flag.FlagSet, groups []HelpGroup, rest string) {
	aliases := aliasesOf(fs)
	done := map[string]bool{}
	for _, as := range aliases {
		for _, a := range as {
			done[a] = true // printed with the flag they alias
		}
	}
	for _, g := range groups {
		var names []string
		for _, n := range g.Names {
			if fs.Lookup(n) != nil && !done[n] {
				names = append(names, n)
				done[n] = true
			}
		}
		if len(names) == 0 {
			continue
		}
		printGroup(w, fs, g.Title, g.Note, names, g.Compact, aliases)
	}
	var others []string
	fs.VisitAll(func(f *flag.Flag) {
		if !done[f.Name] {
			others = append(others, f.Name)
		}
	})
	switch {
	case rest != "":
		fmt.Fprintf(w, "\n%s\n", rest)
	case len(others) > 0:
		printGroup(w, fs, "Other flags", "", others, false, aliases)
	}
}

// PrintDefaults writes all of fs's flags, one line each, in the `--name value` form gotpu
// documents.
func PrintDefaults(w io.Writer, fs *flag.FlagSet) {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	aliases := aliasesOf(fs)
	for _, as := range aliases {
		names = slices.DeleteFunc(names, func(n string) bool { return slices.Contains(as, n) })
	}
	printFlags(w, fs, names, aliases)
}

func printGroup(w io.Writer, fs *flag.FlagSet, title, note string, names []string, compact bool, aliases map[string][]string) {
	if note != "" {
		title += " (" + note + ")"
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	if !compact {
		printFlags(w, fs, names, aliases)
		return
	}
	line := " "
	for i, n := range names {
		word := " " + n // the section's note says these are flags; dashes would only widen it
		if i < len(names)-1 {
			word += ","
		}
		if len(line)+len(word) > helpWidth {
			fmt.Fprintln(w, line)
			line = " "
		}
		line += word
	}
	fmt.Fprintln(w, line)
}

func printFlags(w io.Writer, fs *flag.FlagSet, names []string, aliases map[string][]string) {
	heads := make([]string, len(names))
	width := 0
	for i, n := range names {
		f := fs.Lookup(n)
		typ, _ := flag.UnquoteUsage(f)
		if t, ok := f.Value.(interface{ FlagType() string }); ok && typ == "value" {
			typ = t.FlagType() // a flag.Value of its own names its type ("" for a boolean)
		}
		h := "--" + n
		for _, a := range aliases[n] {
			h += ", --" + a
		}
		if typ != "" {
			h += " " + typ
		}
		heads[i] = h
		width = max(width, len(h))
	}
	width = min(width, 34) // a longer head pushes only its own meaning to the right
	for i, n := range names {
		f := fs.Lookup(n)
		_, usage := flag.UnquoteUsage(f)
		def := ""
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" {
			def = fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintln(w, strings.TrimRight(fmt.Sprintf("  %-*s  %s%s", width, heads[i], usage, def), " "))
	}
}

// aliasesOf maps each flag to the later-registered flags that share its value (fs.Var(
// fs.Lookup("x").Value, "y", …)), in name order.
func aliasesOf(fs *flag.FlagSet) map[string][]string {
	byValue := map[flag.Value]string{}
	out := map[string][]string{}
	var all []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { all = append(all, f) })
	// VisitAll goes in name order; the alias is whichever name sorts later, unless its usage
	// says it is the alias ("alias of", "old name of").
	for _, f := range all {
		t := reflect.TypeOf(f.Value)
		// Only pointers to distinct variables tell flags apart (pointers to zero-size values may
		// be equal, and other values are copies).
		if t == nil || t.Kind() != reflect.Pointer || t.Elem().Size() == 0 {
			continue
		}
		first, ok := byValue[f.Value]
		if !ok {
			byValue[f.Value] = f.Name
			continue
		}
		main, alias := first, f.Name
		if isAliasUsage(fs.Lookup(main).Usage) && !isAliasUsage(f.Usage) {
			main, alias = alias, main
			byValue[f.Value] = main
			out[main] = append(out[first], alias)
			delete(out, first)
			continue
		}
		out[main] = append(out[main], alias)
	}
	return out
}

func isAliasUsage(u string) bool {
	return strings.HasPrefix(u, "alias of") || strings.HasPrefix(u, "old name of")
}
