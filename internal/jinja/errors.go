package jinja

import "fmt"

// SyntaxError is a template that does not parse: the line (1-based) of the offending token and
// what is wrong.
type SyntaxError struct {
	Name string // ParseOptions.Name, may be empty
	Line int
	Msg  string
	// Python reports whether Msg is claimed to be Python Jinja2's message word for word (the
	// golden tests compare it then); false for this engine's own refusals (nesting depth,
	// unsupported tags, 64-bit literals).
	Python bool
}

func (e *SyntaxError) Error() string {
	if e.Name != "" {
		return fmt.Sprintf("%s: line %d: %s", e.Name, e.Line, e.Msg)
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

// Error is a runtime error of a render: Type is the Python exception's class name
// (UndefinedError, TypeError, SecurityError, ValueError, TemplateRuntimeError, ...) and Msg its
// message. Python reports whether Type and Msg are claimed to be exactly what Python Jinja2
// 3.1.6 says (the golden tests compare them then); otherwise only the failure is claimed.
type Error struct {
	Line   int // 0 when not known
	Type   string
	Msg    string
	Python bool
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s: %s", e.Line, e.Type, e.Msg)
	}
	return e.Type + ": " + e.Msg
}

// PythonMessage is the error as Python prints it: "Type: message".
func (e *Error) PythonMessage() string { return e.Type + ": " + e.Msg }

// LimitError is a render stopped by one of its Limits.
type LimitError struct {
	Limit string // "MaxOutputBytes", "MaxBytes", "MaxSteps" or "MaxDepth"
	Value int64  // the limit's value
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("jinja: render exceeds %s (%d)", e.Limit, e.Value)
}

func typeErr(format string, a ...any) *Error {
	return &Error{Type: "TypeError", Msg: fmt.Sprintf(format, a...), Python: true}
}

func valueErr(format string, a ...any) *Error {
	return &Error{Type: "ValueError", Msg: fmt.Sprintf(format, a...), Python: true}
}

// engineErr is an error whose message is this engine's own wording.
func engineErr(typ, format string, a ...any) *Error {
	return &Error{Type: typ, Msg: fmt.Sprintf(format, a...)}
}

func securityErr(obj Value, attr string) Value {
	return Value{k: KindUndefined, p: &undefined{
		hint: fmt.Sprintf("access to attribute %s of %s object is unsafe.", repr(String(attr)), repr(String(typeName(obj)))),
		exc:  "SecurityError",
	}}
}
