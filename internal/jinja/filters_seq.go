package jinja

import (
	"sort"
	"strconv"
	"strings"
)

// Filters over sequences: sorting, selecting, mapping, grouping, joining.

func fBatch(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	a, err := bindArgs("batch", args, kw, "linecount", "fill_with")
	if err != nil {
		return Value{}, err
	}
	n, err := argInt("batch", a[0], 0)
	if err != nil {
		return Value{}, err
	}
	if n <= 0 {
		return Value{}, engineErr("ValueError", "batch size must be positive")
	}
	items, err := r.iterate(v)
	if err != nil {
		return Value{}, err
	}
	if err := r.bud.allocMul(int64(len(items))+n, 2*valueSize); err != nil {
		return Value{}, err
	}
	var out []Value
	for i := 0; i < len(items); i += int(n) {
		end := min(i+int(n), len(items))
		chunk := append([]Value{}, items[i:end]...)
		if has(a[1]) && a[1].k != KindNone {
			for len(chunk) < int(n) {
				chunk = append(chunk, a[1])
			}
		}
		out = append(out, List(chunk...))
	}
	return genList(out, "generator"), nil
}

// sortKey is the key sort, dictsort, min, max, unique and groupby compare: lower-cased strings
// unless case sensitive (charged: each item's key is a new string).
func (r *renderer) sortKey(v Value, caseSensitive bool) (Value, error) {
	if !caseSensitive && v.k == KindString {
		return r.caseMapped(v.s, pyLower, strings.ToLower)
	}
	return v, nil
}

// sortValues sorts stably by keys (Python's sorted); mixed types that do not order fail. Each
// comparison charges its steps (compare); the first error ends the sort.
func (r *renderer) sortValues(items, keys []Value, reverse bool) error {
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	var err error
	sort.SliceStable(idx, func(i, j int) bool {
		if err != nil {
			return false
		}
		a, b := keys[idx[i]], keys[idx[j]]
		if reverse {
			a, b = b, a
		}
		c, e := compare(&r.bud, a, b)
		switch {
		case e == nil:
		case unorderable(e):
			err = typeErr("'<' not supported between instances of '%s' and '%s'", typeName(a), typeName(b))
		default:
			err = e
		}
		return c < 0
	})
	if err != nil {
		return err
	}
	sorted := make([]Value, len(items))
	for i, k := range idx {
		sorted[i] = items[k]
	}
	copy(items, sorted)
	return nil
}

// sortCharge is what sorting one item costs against MaxBytes besides its key: the index and
// the sorted copy sortValues makes.
const sortCharge = 8 + valueSize

func fDictsort(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	a, err := bindArgs("dictsort", args, kw, "case_sensitive", "by", "reverse")
	if err != nil {
		return Value{}, err
	}
	if v.k != KindDict {
		return Value{}, engineErr("TypeError", "dictsort needs a mapping")
	}
	pos := 0
	if has(a[1]) {
		switch a[1].s {
		case "key":
		case "value":
			pos = 1
		default:
			return Value{}, &Error{Type: "FilterArgumentError", Msg: "You can only sort by either \"key\" or \"value\"", Python: true}
		}
	}
	d := v.dict()
	if err := r.bud.allocMul(int64(d.Len()), 4*valueSize+sortCharge); err != nil {
		return Value{}, err
	}
	items := make([]Value, d.Len())
	keys := make([]Value, d.Len())
	for i, k := range d.keys {
		items[i] = Tuple(k, d.vals[i])
		if keys[i], err = r.sortKey(items[i].list()[pos], has(a[0]) && a[0].Truth()); err != nil {
			return Value{}, err
		}
	}
	if err := r.sortValues(items, keys, has(a[2]) && a[2].Truth()); err != nil {
		return Value{}, err
	}
	return List(items...), nil
}

// attrGetter is Jinja2's make_attrgetter: a dotted path of items (digit parts are ints).
func (r *renderer) attrGetter(attr Value, def Value) func(Value) (Value, error) {
	var parts []Value
	if attr.k == KindString {
		for _, p := range strings.Split(attr.s, ".") {
			if n, err := strconv.Atoi(p); err == nil {
				parts = append(parts, Int(int64(n)))
			} else {
				parts = append(parts, String(p))
			}
		}
	} else {
		parts = []Value{attr}
	}
	return func(item Value) (Value, error) {
		for _, p := range parts {
			var err error
			if item, err = r.getitem(item, p); err != nil {
				return Value{}, err
			}
			if has(def) && def.k != KindNone && item.k == KindUndefined {
				item = def
			}
		}
		return item, nil
	}
}

func fGroupby(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	a, err := bindArgs("groupby", args, kw, "attribute", "default", "case_sensitive")
	if err != nil {
		return Value{}, err
	}
	items, err := r.iterate(v)
	if err != nil {
		return Value{}, err
	}
	get := r.attrGetter(a[0], a[1])
	cs := has(a[2]) && a[2].Truth()
	// the sorted items and their keys; the groups' lists and tuples, at most one per item
	if err := r.bud.allocMul(int64(len(items)), 5*valueSize+sortCharge); err != nil {
		return Value{}, err
	}
	keys := make([]Value, len(items))
	sorted := append([]Value{}, items...)
	for i, it := range sorted {
		k, err := get(it)
		if err != nil {
			return Value{}, err
		}
		if keys[i], err = r.sortKey(k, cs); err != nil {
			return Value{}, err
		}
	}
	if err := r.sortValues(sorted, append([]Value{}, keys...), false); err != nil {
		return Value{}, err
	}
	var out []Value
	var cur []Value
	var curKey, curGrouper Value
	for i, it := range sorted {
		g, err := get(it)
		if err != nil {
			return Value{}, err
		}
		k, err := r.sortKey(g, cs)
		if err != nil {
			return Value{}, err
		}
		if i > 0 {
			eq, err := equal(&r.bud, k, curKey)
			if err != nil {
				return Value{}, err
			}
			if !eq {
				out = append(out, groupTuple(curGrouper, cur))
				cur = nil
			}
		}
		if len(cur) == 0 {
			curKey, curGrouper = k, g
		}
		cur = append(cur, it)
	}
	if len(cur) > 0 {
		out = append(out, groupTuple(curGrouper, cur))
	}
	return List(out...), nil
}

func groupTuple(grouper Value, items []Value) Value {
	return Value{k: KindTuple, p: &listObj{items: []Value{grouper, List(items...)}, fields: []string{"grouper", "list"}}}
}

func fJoin(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	a, err := bindArgs("join", args, kw, "d", "attribute")
	if err != nil {
		return Value{}, err
	}
	sep := ""
	if has(a[0]) {
		if sep, err = r.str(a[0]); err != nil {
			return Value{}, err
		}
	}
	items, err := r.iterate(v)
	if err != nil {
		return Value{}, err
	}
	var get func(Value) (Value, error)
	if has(a[1]) && a[1].k != KindNone {
		get = r.attrGetter(a[1], Value{})
	}
	b := &bounded{bud: &r.bud}
	for i, it := range items {
		if err := r.bud.step(1); err != nil {
			return Value{}, err
		}
		if get != nil {
			if it, err = get(it); err != nil {
				return Value{}, err
			}
		}
		if i > 0 {
			b.WriteString(sep)
		}
		if it.k == KindUndefined {
			if _, err := r.str(it); err != nil {
				return Value{}, err
			}
		}
		writeStr(b, it)
		if b.err != nil {
			return Value{}, b.err
		}
	}
	out, err := b.result()
	return String(out), err
}

func fList(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	items, err := r.iterate(v)
	if err != nil {
		return Value{}, err
	}
	return r.copyList(items)
}

func fMap(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	items, err := r.iterate(v)
	if err != nil {
		return Value{}, err
	}
	var fn func(Value) (Value, error)
	if attr, ok := kwarg(kw, "attribute"); ok && len(args) == 0 {
		def, _ := kwarg(kw, "default")
		for _, k := range kw {
			if k.Name != "attribute" && k.Name != "default" {
				return Value{}, &Error{Type: "FilterArgumentError", Msg: "Unexpected keyword argument " + repr(String(k.Name)), Python: true}
			}
		}
		fn = r.attrGetter(attr, def)
	} else {
		if len(args) == 0 || args[0].k != KindString {
			return Value{}, &Error{Type: "FilterArgumentError", Msg: "map requires a filter argument", Python: true}
		}
		f, ok := filters[args[0].s]
		if !ok {
			return Value{}, &Error{Type: "TemplateRuntimeError", Msg: "No filter named " + repr(args[0]) + ".", Python: true}
		}
		rest := args[1:]
		fn = func(x Value) (Value, error) {
			if err := r.bud.step(1); err != nil {
				return Value{}, err
			}
			return f(r, x, rest, kw)
		}
	}
	if err := r.bud.allocMul(int64(len(items)), valueSize); err != nil {
		return Value{}, err
	}
	out := make([]Value, len(items))
	for i, it := range items {
		if err := r.bud.step(1); err != nil {
			return Value{}, err
		}
		if out[i], err = fn(it); err != nil {
			return Value{}, err
		}
	}
	return genList(out, "generator"), nil
}

func kwarg(kw []Kwarg, name string) (Value, bool) {
	for _, k := range kw {
		if k.Name == name {
			return k.Value, true
		}
	}
	return Value{}, false
}

func fMinMax(isMax bool) filterFunc {
	return func(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
		a, err := bindArgs("max", args, kw, "case_sensitive", "attribute")
		if err != nil {
			return Value{}, err
		}
		items, err := r.iterate(v)
		if err != nil {
			return Value{}, err
		}
		if len(items) == 0 {
			return undefHint("No aggregated item, sequence was empty."), nil
		}
		get := func(x Value) (Value, error) { return x, nil }
		if has(a[1]) && a[1].k != KindNone {
			get = r.attrGetter(a[1], Value{})
		}
		cs := has(a[0]) && a[0].Truth()
		best := items[0]
		bk, err := get(best)
		if err != nil {
			return Value{}, err
		}
		if bk, err = r.sortKey(bk, cs); err != nil {
			return Value{}, err
		}
		for _, it := range items[1:] {
			k, err := get(it)
			if err != nil {
				return Value{}, err
			}
			if k, err = r.sortKey(k, cs); err != nil {
				return Value{}, err
			}
			c, err := compare(&r.bud, k, bk)
			if unorderable(err) {
				return Value{}, typeErr("'>' not supported between instances of '%s' and '%s'", typeName(k), typeName(bk))
			}
			if err != nil {
				return Value{}, err
			}
			if (isMax && c > 0) || (!isMax && c < 0) {
				best, bk = it, k
			}
		}
		return best, nil
	}
}

func fSelect(keep, byAttr bool) filterFunc {
	return func(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
		items, err := r.iterate(v)
		if err != nil {
			return Value{}, err
		}
		get := func(x Value) (Value, error) { return x, nil }
		if byAttr {
			if len(args) == 0 {
				return Value{}, typeErr("missing attribute argument")
			}
			get = r.attrGetter(args[0], Value{})
			args = args[1:]
		}
		test := func(x Value) (bool, error) { return x.Truth(), nil }
		if len(args) > 0 {
			name, ok := args[0].AsString()
			t, found := tests[name]
			if !ok || !found {
				return Value{}, &Error{Type: "TemplateRuntimeError", Msg: "No test named " + repr(args[0]) + ".", Python: true}
			}
			targs := append([]Value{}, args[1:]...)
			for _, k := range kw {
				targs = append(targs, k.Value)
			}
			test = func(x Value) (bool, error) {
				if err := r.bud.step(1); err != nil {
					return false, err
				}
				return t(r, x, targs)
			}
		}
		var out []Value
		for _, it := range items {
			if err := r.bud.step(1); err != nil {
				return Value{}, err
			}
			x, err := get(it)
			if err != nil {
				return Value{}, err
			}
			ok, err := test(x)
			if err != nil {
				return Value{}, err
			}
			if ok == keep {
				if err := r.bud.alloc(2 * valueSize); err != nil { // the item, and room to grow
					return Value{}, err
				}
				out = append(out, it)
			}
		}
		return genList(out, "generator"), nil
	}
}

func fSlice(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	a, err := bindArgs("slice", args, kw, "slices", "fill_with")
	if err != nil {
		return Value{}, err
	}
	n, err := argInt("slice", a[0], 0)
	if err != nil {
		return Value{}, err
	}
	if n <= 0 || n > 1<<20 {
		return Value{}, engineErr("ValueError", "slice count must be positive")
	}
	seq, err := r.iterate(v)
	if err != nil {
		return Value{}, err
	}
	if err := r.bud.allocMul(int64(len(seq))+2*n, valueSize); err != nil {
		return Value{}, err
	}
	per, extra := len(seq)/int(n), len(seq)%int(n)
	offset := 0
	var out []Value
	for i := 0; i < int(n); i++ {
		start := offset + i*per
		if i < extra {
			offset++
		}
		end := offset + (i+1)*per
		tmp := append([]Value{}, seq[start:end]...)
		if has(a[1]) && a[1].k != KindNone && i >= extra {
			tmp = append(tmp, a[1])
		}
		out = append(out, List(tmp...))
	}
	return genList(out, "generator"), nil
}

func fSort(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	a, err := bindArgs("sort", args, kw, "reverse", "case_sensitive", "attribute")
	if err != nil {
		return Value{}, err
	}
	items, err := r.iterate(v)
	if err != nil {
		return Value{}, err
	}
	if err := r.bud.allocMul(int64(len(items)), 2*valueSize+sortCharge); err != nil {
		return Value{}, err
	}
	out := append([]Value{}, items...)
	keys := make([]Value, len(out))
	get := func(x Value) (Value, error) { return x, nil }
	if has(a[2]) && a[2].k != KindNone {
		get = r.attrGetter(a[2], Value{})
	}
	for i, it := range out {
		k, err := get(it)
		if err != nil {
			return Value{}, err
		}
		if keys[i], err = r.sortKey(k, has(a[1]) && a[1].Truth()); err != nil {
			return Value{}, err
		}
	}
	if err := r.sortValues(out, keys, has(a[0]) && a[0].Truth()); err != nil {
		return Value{}, err
	}
	return List(out...), nil
}

func fSum(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	a, err := bindArgs("sum", args, kw, "attribute", "start")
	if err != nil {
		return Value{}, err
	}
	items, err := r.iterate(v)
	if err != nil {
		return Value{}, err
	}
	total := Int(0)
	if has(a[1]) {
		total = a[1]
	}
	get := func(x Value) (Value, error) { return x, nil }
	if has(a[0]) && a[0].k != KindNone {
		get = r.attrGetter(a[0], Value{})
	}
	for _, it := range items {
		if err := r.bud.step(1); err != nil {
			return Value{}, err
		}
		x, err := get(it)
		if err != nil {
			return Value{}, err
		}
		if total, err = r.binop("+", total, x); err != nil {
			return Value{}, err
		}
	}
	return total, nil
}

func fUnique(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	a, err := bindArgs("unique", args, kw, "case_sensitive", "attribute")
	if err != nil {
		return Value{}, err
	}
	items, err := r.iterate(v)
	if err != nil {
		return Value{}, err
	}
	get := func(x Value) (Value, error) { return x, nil }
	if has(a[1]) && a[1].k != KindNone {
		get = r.attrGetter(a[1], Value{})
	}
	seen := NewDict()
	var out []Value
	for _, it := range items {
		k, err := get(it)
		if err != nil {
			return Value{}, err
		}
		if k, err = r.sortKey(k, has(a[0]) && a[0].Truth()); err != nil {
			return Value{}, err
		}
		i, err := seen.find(&r.bud, k)
		if err != nil {
			return Value{}, err
		}
		if i >= 0 {
			continue
		}
		// the key and its index entry, the item and room to grow
		if err := r.bud.allocMul(2, 2*valueSize); err != nil {
			return Value{}, err
		}
		if err := seen.set(&r.bud, k, None()); err != nil {
			return Value{}, err
		}
		out = append(out, it)
	}
	return genList(out, "generator"), nil
}
