package trainer

import (
	"errors"
	"flag"
	"fmt"
	"os"
)

// LoadArgumentsWithFlags returns the arguments of a command line: the argument file at path
// (none when path is ""), with the flags set on fs layered over it (MergeFlags; flagged and
// flaggedMD are the arguments fs's flags were registered on). Flags override the file, problems
// included: a file's refused or invalid setting that a flag replaces (`--args X.json --fp16
// false` over "fp16": true) is not reported, while the file's other problems are, naming the
// file, as LoadTrainingArguments reports them.
func LoadArgumentsWithFlags(path string, flagged *TrainingArguments, flaggedMD *ModelDataArguments,
	fs *flag.FlagSet) (*TrainingArguments, *ModelDataArguments, error) {
	a := DefaultTrainingArguments()
	var md ModelDataArguments
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("trainer: reading training arguments: %w", err)
		}
		if err := a.ApplyJSON(data, path, &md); err != nil {
			var ae *ArgumentsError
			if !errors.As(err, &ae) {
				return nil, nil, err
			}
			// Fields that failed kept their defaults, and the flags replace the ones they set.
			kept := ae.Fields[:0:0]
			for _, f := range ae.Fields {
				if !isFlagSet(fs, f.Field) && !(f.Field == "eval_strategy" && isFlagSet(fs, "evaluation_strategy")) &&
					!(f.Field == "evaluation_strategy" && isFlagSet(fs, "eval_strategy")) {
					kept = append(kept, f)
				}
			}
			if len(kept) > 0 {
				return nil, nil, &ArgumentsError{Source: ae.Source, Hint: ae.Hint, Fields: kept}
			}
		}
	}
	a.MergeFlags(flagged, fs)
	md.MergeFlags(flaggedMD, fs)
	return &a, &md, nil
}
