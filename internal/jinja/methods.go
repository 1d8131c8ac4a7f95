package jinja

import (
	"strings"
	"unicode"
)

// method is an attribute of a Python object that is a method, bound to its receiver.
type method struct {
	recv Value
	name string
}

var strMethods = setOf("capitalize", "casefold", "center", "count", "endswith", "find", "format", "index",
	"isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier", "islower", "isnumeric",
	"isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip", "partition",
	"removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit",
	"rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title", "upper", "zfill",
	"encode", "expandtabs", "format_map", "maketrans", "translate")
var dictMethods = setOf("items", "keys", "values", "get", "copy", "fromkeys")
var dictUnsafe = setOf("clear", "pop", "popitem", "setdefault", "update")
var listMethods = setOf("index", "count", "copy")
var listUnsafe = setOf("append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort")

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// pyAttr looks up a Python attribute of obj (ok false: it has none). Attributes that the
// immutable sandbox refuses are Undefined values that raise SecurityError when used.
func (r *renderer) pyAttr(obj Value, name string) (Value, bool, error) {
	if strings.HasPrefix(name, "__") && strings.HasSuffix(name, "__") && len(name) > 4 {
		return securityErr(obj, name), true, nil
	}
	meth := func() (Value, bool, error) {
		return Value{k: KindCallable, p: &method{recv: obj, name: name}}, true, nil
	}
	switch obj.k {
	case KindString:
		if strMethods[name] {
			return meth()
		}
	case KindDict:
		if dictMethods[name] {
			return meth()
		}
		if dictUnsafe[name] {
			return securityErr(obj, name), true, nil
		}
	case KindList:
		if listMethods[name] {
			return meth()
		}
		if listUnsafe[name] {
			return securityErr(obj, name), true, nil
		}
	case KindTuple:
		if name == "index" || name == "count" {
			return meth()
		}
		l := obj.p.(*listObj)
		for i, f := range l.fields {
			if f == name {
				return l.items[i], true, nil
			}
		}
	case KindNamespace:
		if v, ok := obj.p.(*namespace).d.GetString(name); ok {
			return v, true, nil
		}
	case KindInt, KindBool:
		switch name {
		case "real", "numerator":
			return Int(obj.n), true, nil
		case "imag":
			return Int(0), true, nil
		case "denominator":
			return Int(1), true, nil
		}
	case KindFloat:
		switch name {
		case "real":
			return obj, true, nil
		case "imag":
			return Float(0), true, nil
		case "is_integer":
			return meth()
		}
	case KindCallable:
		switch f := obj.p.(type) {
		case *loopObj:
			if v, ok := f.attr(name); ok {
				return v, true, nil
			}
		case *macro:
			switch name {
			case "name":
				return String(f.name), true, nil
			case "arguments":
				items := make([]Value, len(f.def.params))
				for i, p := range f.def.params {
					items[i] = String(p.name)
				}
				return Tuple(items...), true, nil
			case "catch_kwargs":
				return Bool(f.def.usesKW), true, nil
			case "catch_varargs":
				return Bool(f.def.usesVA), true, nil
			case "caller":
				return Bool(f.def.usesCaller), true, nil
			}
		}
	case KindObject:
		if c, ok := obj.p.(*cycler); ok {
			switch name {
			case "current":
				return c.items[c.pos], true, nil
			case "next", "reset":
				return meth()
			}
		}
	}
	return Value{}, false, nil
}

// bindArgs matches positional and keyword arguments to names; unset ones are missing.
func bindArgs(fname string, args []Value, kw []Kwarg, names ...string) ([]Value, error) {
	if len(args) > len(names) {
		return nil, typeErr("%s() takes at most %d arguments (%d given)", fname, len(names), len(args))
	}
	out := make([]Value, len(names))
	copy(out, args)
	for _, k := range kw {
		found := false
		for i, n := range names {
			if n == k.Name {
				if i < len(args) {
					return nil, typeErr("%s() got multiple values for argument '%s'", fname, k.Name)
				}
				out[i] = k.Value
				found = true
				break
			}
		}
		if !found {
			return nil, typeErr("%s() got an unexpected keyword argument '%s'", fname, k.Name)
		}
	}
	return out, nil
}

// has reports whether a bound argument was given.
func has(v Value) bool { return !(v.k == KindUndefined && v.p == nil) }

func argInt(fname string, v Value, def int64) (int64, error) {
	if !has(v) || v.k == KindNone {
		return def, nil
	}
	if !v.isIntLike() {
		return 0, typeErr("'%s' object cannot be interpreted as an integer", typeName(v))
	}
	return v.n, nil
}

func argStr(fname string, v Value) (string, error) {
	if v.k != KindString {
		return "", typeErr("%s() argument must be str, not %s", fname, typeName(v))
	}
	return v.s, nil
}

// strSpan resolves optional start/end code point arguments into a byte range of s; without
// them it is all of s, found without counting s's code points.
func (r *renderer) strSpan(s string, start, end Value) (int, int, error) {
	if (!has(start) || start.k == KindNone) && (!has(end) || end.k == KindNone) {
		return 0, len(s), nil
	}
	if err := r.bud.scan(len(s)); err != nil {
		return 0, 0, err
	}
	n := int64(runeLen(s))
	var sp, ep *int64
	if has(start) && start.k != KindNone {
		if !start.isIntLike() {
			return 0, 0, typeErr("slice indices must be integers or None or have an __index__ method")
		}
		x := start.n
		sp = &x
	}
	if has(end) && end.k != KindNone {
		if !end.isIntLike() {
			return 0, 0, typeErr("slice indices must be integers or None or have an __index__ method")
		}
		x := end.n
		ep = &x
	}
	a, b, _, _ := sliceIndices(n, sp, ep, nil)
	if b < a {
		b = a
	}
	return runeToByteIndex(s, int(a)), runeToByteIndex(s, int(b)), nil
}

func (r *renderer) callMethod(m *method, args []Value, kw []Kwarg) (Value, error) {
	recv := m.recv
	switch recv.k {
	case KindString:
		return r.strMethod(recv, m.name, args, kw)
	case KindDict:
		d := recv.dict()
		switch m.name {
		case "items":
			if err := r.bud.allocMul(int64(d.Len()), 3*valueSize); err != nil {
				return Value{}, err
			}
			items := make([]Value, d.Len())
			for i, k := range d.keys {
				items[i] = Tuple(k, d.vals[i])
			}
			return List(items...), nil
		case "keys":
			return r.copyList(d.keys)
		case "values":
			return r.copyList(d.vals)
		case "get":
			if len(kw) > 0 {
				return Value{}, typeErr("dict.get() takes no keyword arguments")
			}
			a, err := bindArgs("get", args, nil, "key", "default")
			if err != nil {
				return Value{}, err
			}
			if !has(a[0]) {
				return Value{}, typeErr("get expected at least 1 argument, got 0")
			}
			if v, ok, err := d.get(&r.bud, a[0]); ok || err != nil {
				return v, err
			}
			if has(a[1]) {
				return a[1], nil
			}
			return None(), nil
		case "copy":
			if err := r.bud.allocMul(int64(d.Len()), 2*valueSize); err != nil {
				return Value{}, err
			}
			nd := NewDict()
			for i, k := range d.keys {
				if err := nd.set(&r.bud, k, d.vals[i]); err != nil {
					return Value{}, err
				}
			}
			return DictValue(nd), nil
		}
	case KindList, KindTuple:
		items := recv.list()
		switch m.name {
		case "index":
			if len(args) < 1 {
				return Value{}, typeErr("index expected at least 1 argument, got 0")
			}
			for i, x := range items {
				if eq, err := equal(&r.bud, x, args[0]); eq || err != nil {
					return Int(int64(i)), err
				}
			}
			if recv.k == KindTuple {
				return Value{}, valueErr("tuple.index(x): x not in tuple")
			}
			return Value{}, valueErr("%s is not in list", repr(args[0]))
		case "count":
			if len(args) != 1 {
				return Value{}, typeErr("count() takes exactly one argument (%d given)", len(args))
			}
			n := 0
			for _, x := range items {
				eq, err := equal(&r.bud, x, args[0])
				if err != nil {
					return Value{}, err
				}
				if eq {
					n++
				}
			}
			return Int(int64(n)), nil
		case "copy":
			return r.copyList(items)
		}
	case KindFloat:
		if m.name == "is_integer" {
			f := recv.f()
			return Bool(f == float64(int64(f))), nil
		}
	case KindCallable:
		if l, ok := recv.p.(*loopObj); ok {
			switch m.name {
			case "cycle":
				if len(args) == 0 {
					return Value{}, typeErr("no items for cycling given")
				}
				return args[l.i%len(args)], nil
			case "changed":
				cur := Tuple(args...)
				if l.last != nil {
					eq, err := equal(&r.bud, *l.last, cur)
					if err != nil {
						return Value{}, err
					}
					if eq {
						return Bool(false), nil
					}
				}
				l.last = &cur
				return Bool(true), nil
			}
		}
	case KindObject:
		if c, ok := recv.p.(*cycler); ok {
			switch m.name {
			case "next":
				v := c.items[c.pos]
				c.pos = (c.pos + 1) % len(c.items)
				return v, nil
			case "reset":
				c.pos = 0
				return None(), nil
			}
		}
	}
	return Value{}, engineErr("TypeError", "%s.%s() is not supported by this engine", typeName(recv), m.name)
}

func (r *renderer) copyList(items []Value) (Value, error) {
	if err := r.bud.allocMul(int64(len(items)), valueSize); err != nil {
		return Value{}, err
	}
	return List(append([]Value{}, items...)...), nil
}

func (r *renderer) strMethod(recv Value, name string, args []Value, kw []Kwarg) (Value, error) {
	s := recv.s
	switch name {
	case "strip", "lstrip", "rstrip":
		a, err := bindArgs(name, args, kw, "chars")
		if err != nil {
			return Value{}, err
		}
		var chars *string
		if has(a[0]) && a[0].k != KindNone {
			c, err := argStr(name, a[0])
			if err != nil {
				return Value{}, err
			}
			chars = &c
		}
		return String(pyStrip(s, chars, name != "rstrip", name != "lstrip")), nil
	case "split", "rsplit":
		a, err := bindArgs(name, args, kw, "sep", "maxsplit")
		if err != nil {
			return Value{}, err
		}
		maxsplit, err := argInt(name, a[1], -1)
		if err != nil {
			return Value{}, err
		}
		if maxsplit < 0 || maxsplit > int64(len(s)) {
			maxsplit = -1 // no more splits than bytes; and an int either way
		}
		if !has(a[0]) || a[0].k == KindNone {
			if name == "split" {
				return r.pieces(len(s), splitWS(s, int(maxsplit)), false)
			}
			return r.pieces(len(s), rsplitWS(s, int(maxsplit)), true)
		}
		sep, err := argStr(name, a[0])
		if err != nil {
			return Value{}, err
		}
		if sep == "" {
			return Value{}, valueErr("empty separator")
		}
		return r.splitSep(s, sep, int(maxsplit), name == "rsplit")
	case "splitlines":
		a, err := bindArgs(name, args, kw, "keepends")
		if err != nil {
			return Value{}, err
		}
		return r.pieces(len(s), splitLines(s, has(a[0]) && a[0].Truth()), false)
	case "startswith", "endswith":
		a, err := bindArgs(name, args, kw, "prefix", "start", "end")
		if err != nil {
			return Value{}, err
		}
		if !has(a[0]) {
			return Value{}, typeErr("%s() takes at least 1 argument (0 given)", name)
		}
		i, j, err := r.strSpan(s, a[1], a[2])
		if err != nil {
			return Value{}, err
		}
		sub := s[i:j]
		cands := []Value{a[0]}
		if a[0].k == KindTuple {
			cands = a[0].list()
		} else if a[0].k != KindString {
			return Value{}, typeErr("%s first arg must be str or a tuple of str, not %s", name, typeName(a[0]))
		}
		for _, c := range cands {
			if c.k != KindString {
				return Value{}, typeErr("tuple for %s must only contain str, not %s", name, typeName(c))
			}
			if (name == "startswith" && strings.HasPrefix(sub, c.s)) || (name == "endswith" && strings.HasSuffix(sub, c.s)) {
				return Bool(true), nil
			}
		}
		return Bool(false), nil
	case "replace":
		a, err := bindArgs(name, args, kw, "old", "new", "count")
		if err != nil {
			return Value{}, err
		}
		if !has(a[1]) {
			return Value{}, typeErr("replace expected at least 2 arguments, got %d", len(args))
		}
		old, err := argStr(name, a[0])
		if err != nil {
			return Value{}, err
		}
		nw, err := argStr(name, a[1])
		if err != nil {
			return Value{}, err
		}
		count, err := argInt(name, a[2], -1)
		if err != nil {
			return Value{}, err
		}
		out, err := r.pyReplace(s, old, nw, int(count))
		return String(out), err
	case "upper":
		return r.caseMapped(s, pyUpper, strings.ToUpper)
	case "lower", "casefold":
		return r.caseMapped(s, pyLower, strings.ToLower)
	case "title":
		return r.caseMapped(s, pyTitle, nil)
	case "capitalize":
		return r.caseMapped(s, pyCapitalize, nil)
	case "swapcase":
		return r.caseMapped(s, pySwapcase, nil)
	case "find", "rfind", "index", "rindex", "count":
		a, err := bindArgs(name, args, kw, "sub", "start", "end")
		if err != nil {
			return Value{}, err
		}
		sub, err := argStr(name, a[0])
		if err != nil {
			return Value{}, err
		}
		i, j, err := r.strSpan(s, a[1], a[2])
		if err != nil {
			return Value{}, err
		}
		hay := s[i:j]
		if err := r.bud.scan(len(hay)); err != nil {
			return Value{}, err
		}
		if name == "count" {
			if sub == "" {
				return Int(int64(runeLen(hay) + 1)), nil
			}
			return Int(int64(strings.Count(hay, sub))), nil
		}
		var k int
		if name == "find" || name == "index" {
			k = strings.Index(hay, sub)
		} else {
			k = strings.LastIndex(hay, sub)
		}
		if k < 0 {
			if name == "index" || name == "rindex" {
				return Value{}, valueErr("substring not found")
			}
			return Int(-1), nil
		}
		return Int(int64(byteToRuneIndex(s, i+k))), nil
	case "join":
		if len(args) != 1 {
			return Value{}, typeErr("str.join() takes exactly one argument (%d given)", len(args))
		}
		items, err := r.iterate(args[0])
		if err != nil {
			return Value{}, typeErr("can only join an iterable")
		}
		total := int64(len(s)) * int64(max(len(items)-1, 0))
		for i, it := range items {
			if it.k != KindString {
				return Value{}, typeErr("sequence item %d: expected str instance, %s found", i, typeName(it))
			}
			total += int64(len(it.s))
		}
		if err := r.bud.step(int64(len(items))); err != nil {
			return Value{}, err
		}
		if err := r.bud.alloc(total); err != nil {
			return Value{}, err
		}
		var b strings.Builder
		b.Grow(int(total))
		for i, it := range items {
			if i > 0 {
				b.WriteString(s)
			}
			b.WriteString(it.s)
		}
		return String(b.String()), nil
	case "format":
		return r.strFormat(s, args, kw)
	case "zfill":
		if len(args) != 1 || !args[0].isIntLike() {
			return Value{}, typeErr("zfill() takes exactly one integer argument")
		}
		w := args[0].n
		n := int64(runeLen(s))
		if w <= n {
			return String(s), nil
		}
		if err := r.bud.alloc(int64(len(s)) + w - n); err != nil {
			return Value{}, err
		}
		var b strings.Builder
		b.Grow(len(s) + int(w-n))
		if s != "" && (s[0] == '+' || s[0] == '-') {
			b.WriteByte(s[0])
			s = s[1:]
		}
		for range w - n {
			b.WriteByte('0')
		}
		b.WriteString(s)
		return String(b.String()), nil
	case "center", "ljust", "rjust":
		a, err := bindArgs(name, args, kw, "width", "fillchar")
		if err != nil {
			return Value{}, err
		}
		w, err := argInt(name, a[0], 0)
		if err != nil {
			return Value{}, err
		}
		fill := " "
		if has(a[1]) {
			if fill, err = argStr(name, a[1]); err != nil {
				return Value{}, err
			}
			if runeLen(fill) != 1 {
				return Value{}, typeErr("The fill character must be exactly one character long")
			}
		}
		if err := r.bud.alloc(padSize(s, w, fill)); err != nil {
			return Value{}, err
		}
		return String(pyPad(s, int(w), fill, name[0])), nil
	case "partition", "rpartition":
		if len(args) != 1 || args[0].k != KindString {
			return Value{}, typeErr("%s() takes exactly one str argument", name)
		}
		sep := args[0].s
		if sep == "" {
			return Value{}, valueErr("empty separator")
		}
		var k int
		if name == "partition" {
			k = strings.Index(s, sep)
		} else {
			k = strings.LastIndex(s, sep)
		}
		if k < 0 {
			if name == "partition" {
				return Tuple(String(s), String(""), String("")), nil
			}
			return Tuple(String(""), String(""), String(s)), nil
		}
		return Tuple(String(s[:k]), String(sep), String(s[k+len(sep):])), nil
	case "removeprefix":
		if len(args) == 1 && args[0].k == KindString {
			return String(strings.TrimPrefix(s, args[0].s)), nil
		}
	case "removesuffix":
		if len(args) == 1 && args[0].k == KindString {
			return String(strings.TrimSuffix(s, args[0].s)), nil
		}
	case "isdecimal":
		return Bool(allRunes(s, unicode.IsDigit)), nil
	case "isdigit":
		return Bool(allRunes(s, pyIsDigit)), nil
	case "isnumeric":
		return Bool(allRunes(s, unicode.IsNumber)), nil
	case "isalpha":
		return Bool(allRunes(s, unicode.IsLetter)), nil
	case "isalnum":
		return Bool(allRunes(s, func(c rune) bool { return unicode.IsLetter(c) || unicode.IsNumber(c) })), nil
	case "isspace":
		return Bool(allRunes(s, pyIsSpace)), nil
	case "islower":
		return Bool(pyIsLower(s)), nil
	case "isupper":
		return Bool(pyIsUpper(s)), nil
	case "isascii":
		return Bool(isASCII(s)), nil
	case "isprintable":
		return Bool(s == "" || allRunes(s, func(c rune) bool { return c >= 0x20 && c != 0x7f && (c < 0x7f || pyPrintable(c)) })), nil
	case "istitle":
		return Bool(pyIsTitle(s)), nil
	case "isidentifier":
		ok := s != ""
		for i, c := range s {
			if !(c == '_' || unicode.IsLetter(c) || (i > 0 && (unicode.IsDigit(c) || unicode.Is(unicode.Mn, c)))) {
				ok = false
			}
		}
		return Bool(ok), nil
	}
	return Value{}, engineErr("TypeError", "str.%s() with these arguments is not supported by this engine", name)
}
