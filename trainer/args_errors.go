package trainer

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors, matched with errors.Is through FieldError.
var (
	// ErrInvalidArgument: a value HF would reject, or that makes no sense (negative learning
	// rate, unknown scheduler, wrong JSON type).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrUnsupportedArgument: a Hugging Face setting gotpu does not implement, set to a value
	// other than HF's default (fp16: true, push_to_hub: true, an FSDP config…).
	ErrUnsupportedArgument = errors.New("unsupported argument")
	// ErrUnknownArgument: a key that is neither a TrainingArguments field nor a model/data
	// argument (a TRL config key, a typo).
	ErrUnknownArgument = errors.New("unknown argument")
)

// FieldError is one problem with one argument. Its message names the field as
// trainer.<Struct>.<field>, with HF's field name.
type FieldError struct {
	Struct string // "TrainingArguments" or "ModelDataArguments"
	Field  string // HF's name of the field (or the unknown key)
	Msg    string // what is wrong, and what to do instead where there is an alternative
	Kind   error  // ErrInvalidArgument, ErrUnsupportedArgument or ErrUnknownArgument
}

func (e *FieldError) Error() string {
	return "trainer." + e.Struct + "." + e.Field + ": " + e.Msg
}

// Unwrap returns the error kind, so errors.Is(err, ErrUnsupportedArgument) works.
func (e *FieldError) Unwrap() error { return e.Kind }

// ArgumentsError reports every problem found in one set of arguments at once, so a user fixes
// an argument file in one pass.
type ArgumentsError struct {
	Source string // the file the arguments came from, or "" (struct, flags)
	Hint   string // an overall diagnosis, such as the config class a file seems to come from
	Fields []*FieldError
}

func (e *ArgumentsError) Error() string {
	var b strings.Builder
	if e.Source != "" {
		b.WriteString(e.Source)
		b.WriteString(": ")
	}
	if len(e.Fields) == 1 && e.Hint == "" {
		b.WriteString(e.Fields[0].Error())
		return b.String()
	}
	fmt.Fprintf(&b, "%d problems with the training arguments", len(e.Fields))
	if e.Hint != "" {
		b.WriteString(" (")
		b.WriteString(e.Hint)
		b.WriteString(")")
	}
	b.WriteString(":")
	for _, f := range e.Fields {
		b.WriteString("\n\t")
		b.WriteString(f.Error())
	}
	return b.String()
}

// Unwrap returns the field errors.
func (e *ArgumentsError) Unwrap() []error {
	errs := make([]error, len(e.Fields))
	for i, f := range e.Fields {
		errs[i] = f
	}
	return errs
}

// FieldNames returns the names of the offending fields in order.
func (e *ArgumentsError) FieldNames() []string {
	names := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		names[i] = f.Field
	}
	return names
}

// errorList accumulates FieldErrors.
type errorList struct {
	fields []*FieldError
}

func (l *errorList) add(structName, field string, kind error, format string, args ...any) {
	l.fields = append(l.fields, &FieldError{Struct: structName, Field: field, Msg: fmt.Sprintf(format, args...), Kind: kind})
}

func (l *errorList) invalid(field, format string, args ...any) {
	l.add("TrainingArguments", field, ErrInvalidArgument, format, args...)
}

// err returns nil or an *ArgumentsError.
func (l *errorList) err(source, hint string) error {
	if len(l.fields) == 0 {
		return nil
	}
	return &ArgumentsError{Source: source, Hint: hint, Fields: l.fields}
}
