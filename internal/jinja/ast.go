package jinja

// Statements and expressions of a parsed template. Nodes are immutable after parsing, so a
// Template may be rendered concurrently.

type stmt interface {
	exec(r *renderer) error
}

type expr interface {
	eval(r *renderer) (Value, error)
	lineNo() int
}

type pos struct{ line int }

func (p pos) lineNo() int { return p.line }

// target is an assignment target: a name, a namespace attribute (ns.attr) or a tuple of targets.
type target struct {
	name  string
	attr  string // with name: ns.attr
	items []target
	tuple bool
}

type (
	textNode   struct{ s string }
	outputNode struct {
		pos
		e expr
	}
	ifNode struct {
		conds  []expr
		bodies [][]stmt
		els    []stmt
	}
	forNode struct {
		pos
		tgt       target
		iter      expr
		cond      expr
		body, els []stmt
		recursive bool
	}
	setNode struct {
		pos
		tgt target
		e   expr
	}
	setBlockNode struct {
		pos
		tgt     target
		filters []*filterExpr // applied innermost first
		body    []stmt
	}
	macroNode struct {
		pos
		m *macroDef
	}
	callBlockNode struct {
		pos
		caller *macroDef // the body as the caller macro
		call   *callExpr
	}
	filterBlockNode struct {
		pos
		filters []*filterExpr
		body    []stmt
	}
	loopCtlNode struct {
		pos
		brk bool
	}
	generationNode struct {
		pos
		body []stmt
	}
	withNode struct {
		pos
		tgts []target
		vals []expr
		body []stmt
	}
)

type param struct {
	name string
	def  expr // nil: no default
}

// macroDef is a macro's (or a call block's caller's) code.
type macroDef struct {
	name                       string
	params                     []param
	body                       []stmt
	usesCaller, usesVA, usesKW bool
	line                       int
}

type (
	constExpr struct {
		pos
		v Value
	}
	nameExpr struct {
		pos
		name string
	}
	listExpr struct {
		pos
		items []expr
		tuple bool
	}
	dictExpr struct {
		pos
		keys, vals []expr
	}
	getattrExpr struct {
		pos
		obj  expr
		name string
	}
	getitemExpr struct {
		pos
		obj, key expr
	}
	sliceExpr struct {
		pos
		start, stop, step expr // nil: omitted
	}
	callExpr struct {
		pos
		fn     expr
		args   []expr
		kwargs []kwExpr
	}
	filterExpr struct {
		pos
		obj    expr // nil in filter blocks and {% set x | f %}
		name   string
		args   []expr
		kwargs []kwExpr
	}
	testExpr struct {
		pos
		obj    expr
		name   string
		args   []expr
		kwargs []kwExpr
	}
	binExpr struct {
		pos
		op   string // + - * / // % **
		l, r expr
	}
	logicExpr struct {
		pos
		and  bool
		l, r expr
	}
	unaryExpr struct {
		pos
		op string // not - +
		e  expr
	}
	compareExpr struct {
		pos
		first expr
		ops   []string // == != < <= > >= in notin
		rest  []expr
	}
	concatExpr struct {
		pos
		items []expr
	}
	condExpr struct {
		pos
		test, then, els expr // els nil: undefined
	}
)

type kwExpr struct {
	name string
	e    expr
}
