package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ErrUsage marks errors in the command line itself; commands exit with status 2 for them.
var ErrUsage = errors.New("usage error")

// usageError is a usage error whose text is only its message: the command prefixes it with
// "gotpu <cmd>: ", and a second "usage error:" there would only repeat what the exit status and
// the "Run 'gotpu <cmd> --help'" line already say.
type usageError struct {
	msg string
	err error // wrapped, or nil
}

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == ErrUsage }
func (e *usageError) Unwrap() error        { return e.err }

// UsageError wraps a message as a usage error.
func UsageError(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
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
// Flags stop at the first argument that is not one (or after "--"); the rest are fs.Args().
// Errors are usage errors (errors.Is(err, ErrUsage)) that name the flag as the user typed it,
// with a did-you-mean for a misspelt one; -h and --help return an error wrapping flag.ErrHelp.
func Parse(fs *flag.FlagSet, args []string) error {
	return parse(fs, args, true)
}

// ParseFlagsOnly is Parse for commands that take no positional arguments. There, a word right
// after a boolean flag can only be a value meant for it, so `--bf16 maybe` is reported as a bad
// boolean rather than as a stray argument. Any other positional argument is left in fs.Args()
// for the command to refuse.
func ParseFlagsOnly(fs *flag.FlagSet, args []string) error {
	return parse(fs, args, false)
}

func parse(fs *flag.FlagSet, args []string, positional bool) error {
	fs.SetOutput(io.Discard) // Errors are returned, and usage is printed by the caller.
	rest := []string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = args[i+1:]
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" || isNumber(a) {
			rest = args[i:]
			break
		}
		typed, value, hasValue := strings.Cut(a, "=")
		name := strings.ReplaceAll(strings.TrimLeft(typed, "-"), "-", "_")
		if name == "" || strings.HasPrefix(typed, "---") {
			return UsageError("bad flag syntax %q: flags are written --name value or --name=value", a)
		}
		f := fs.Lookup(name)
		if f == nil {
			if name == "h" || name == "help" {
				return &usageError{msg: "help requested", err: flag.ErrHelp}
			}
			return UsageError("unknown flag %s%s", typed, suggestion(fs, name))
		}
		bf, isBool := f.Value.(boolFlag)
		isBool = isBool && bf.IsBoolFlag()
		switch {
		case isBool && hasValue:
			if v, ok := boolWord(value); ok {
				value = v
			}
		case isBool && i+1 < len(args):
			if v, ok := boolWord(args[i+1]); ok {
				value = v
				i++
			} else if next := args[i+1]; !positional && !strings.HasPrefix(next, "-") {
				return UsageError("invalid value %q for %s: not a boolean (true/false, yes/no, 1/0)", next, typed)
			} else {
				value = "true"
			}
		case isBool:
			value = "true"
		case !hasValue:
			if i+1 >= len(args) {
				return UsageError("%s needs a value", typed)
			}
			value = args[i+1]
			i++
		}
		if err := fs.Set(name, value); err != nil {
			if isBool {
				return UsageError("invalid value %q for %s: not a boolean (true/false, yes/no, 1/0)", value, typed)
			}
			return UsageError("invalid value %q for %s: %s", value, typed, setError(f, value, err))
		}
	}
	// Parse records the positional arguments (fs.Args); "--" keeps it from reading them as flags.
	if err := fs.Parse(append([]string{"--"}, rest...)); err != nil {
		return UsageError("%v", err)
	}
	return nil
}

// setError is a flag value's parse error without the value it repeats ("\"x\" is not a number"
// becomes "not a number"); the flag package's bare "parse error" names the type expected.
func setError(f *flag.Flag, value string, err error) string {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, strconv.Quote(value)+" is "); ok {
		return rest
	}
	if msg == "parse error" {
		if typ, _ := flag.UnquoteUsage(f); typ != "" {
			return "not a valid " + typ
		}
		return "not a valid value"
	}
	return msg
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
