package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// ErrUsage marks errors in the command line itself; commands exit with status 2 for them.
var ErrUsage = errors.New("usage error")

// UsageError wraps a message as a usage error.
func UsageError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, args...))
}

// boolFlag is the interface the flag package uses to recognise boolean flags.
type boolFlag interface {
	flag.Value
	IsBoolFlag() bool
}

// Parse parses args into fs with Hugging Face conventions:
//   - `--name value` and `--name=value` (one or two dashes);
//   - dashes inside names are underscores (`--learning-rate` is `--learning_rate`);
//   - a boolean flag may be followed by a separate True/False/true/false/1/0/yes/no value
//     (`--bf16 True`), as HfArgumentParser allows.
//
// The flag set should use flag.ContinueOnError; errors are returned wrapped in ErrUsage.
func Parse(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard) // Errors are returned, and usage is printed by the caller.
	norm := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			norm = append(norm, args[i:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" || isNumber(a) {
			norm = append(norm, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		name = strings.ReplaceAll(name, "-", "_")
		f := fs.Lookup(name)
		if bf, ok := flagValue(f).(boolFlag); ok && bf.IsBoolFlag() && !hasValue && i+1 < len(args) {
			if v, ok := boolWord(args[i+1]); ok {
				norm = append(norm, "--"+name+"="+v)
				i++
				continue
			}
		}
		if hasValue {
			norm = append(norm, "--"+name+"="+value)
		} else {
			norm = append(norm, "--"+name)
		}
	}
	if err := fs.Parse(norm); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrUsage, fs.Name(), err)
	}
	return nil
}

func flagValue(f *flag.Flag) flag.Value {
	if f == nil {
		return nil
	}
	return f.Value
}

func boolWord(s string) (string, bool) {
	switch strings.ToLower(s) {
	case "true", "1", "yes", "y", "t":
		return "true", true
	case "false", "0", "no", "n", "f":
		return "false", true
	}
	return "", false
}

// isNumber reports whether a leading-dash argument is a negative number (a value, not a flag).
func isNumber(s string) bool {
	var f float64
	_, err := fmt.Sscan(s, &f)
	return err == nil
}

// PrintDefaults writes fs's flags in the `--name value` form gotpu documents.
func PrintDefaults(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		typ, usage := flag.UnquoteUsage(f)
		if typ != "" {
			typ = " " + typ
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			def = fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "  --%s%s\n    \t%s%s\n", f.Name, typ, usage, def)
	})
}
