package docs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// The binaries the runbook talks about, built once by TestMain.
var (
	binDir  string
	gotpu   string
	repo    = ".." // the repository root, relative to this package
	runbook = "tpu-vm.md"
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gotpu-docs-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir, gotpu = dir, filepath.Join(dir, "gotpu")
	// One go build for all three: the examples are run through their binaries, not `go run`, so
	// that each check costs a process start, not a link.
	build := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
		"./cmd/gotpu", "./examples/gpt2-go-code", "./examples/devices")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building gotpu and the examples: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is a finished process.
type result struct {
	stdout, stderr string
	code           int
}

// run runs bin with args and a clean environment (HOME=home, PATH, plus extra) and a deadline, so
// nothing from the developer's machine (TPU_LIBRARY_PATH…) leaks into what the runbook quotes.
func run(t *testing.T, home string, extra []string, bin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}, extra...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return result{stdout.String(), stderr.String(), 0}
	case errors.As(err, &exit):
		return result{stdout.String(), stderr.String(), exit.ExitCode()}
	default:
		t.Fatalf("running %s %q: %v", bin, args, err)
		return result{}
	}
}

// flagSpec is one flag of a command, read from its --help output.
type flagSpec struct {
	isBool bool
	usage  string
}

var helpFlagRe = regexp.MustCompile(`^  --?([A-Za-z0-9_]+)(?: (\S+))?$`)

// parseHelp reads the flags from the usage text of Go's flag package or of internal/cli (one
// "  -name type" or "  --name type" line per flag, the usage on the next line).
func parseHelp(help string) map[string]flagSpec {
	specs := map[string]flagSpec{}
	lines := strings.Split(help, "\n")
	for i, l := range lines {
		m := helpFlagRe.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		usage := ""
		if i+1 < len(lines) {
			usage = strings.TrimSpace(lines[i+1])
		}
		specs[m[1]] = flagSpec{isBool: m[2] == "", usage: usage}
	}
	return specs
}

// flagName is the flag a command-line word names ("--learning-rate=3e-4" → learning_rate), or ""
// for a word that is not a flag.
func flagName(w string) (name string, hasValue bool) {
	if !strings.HasPrefix(w, "-") || w == "-" || w == "--" {
		return "", false
	}
	name, _, hasValue = strings.Cut(strings.TrimLeft(w, "-"), "=")
	return strings.ReplaceAll(name, "-", "_"), hasValue
}

// TestRunbookCommandsParse: every gotpu and example command in the runbook's sh blocks parses.
//
// A gotpu command is run as written plus --help: gotpu parses every flag and value first (an
// unknown flag or a malformed number exits 2), then prints its usage and exits 0; a stray
// positional word would stop the parse and is refused with exit 2 before any work. Flags that
// gotpu only accepts to refuse or ignore (HF fields it does not implement) are errors too: the
// runbook must not suggest them. An example is checked the same way with -h after every word has
// been matched to a flag it declares, since an example would run on a positional word.
func TestRunbookCommandsParse(t *testing.T) {
	d := readDoc(t, runbook)
	home := t.TempDir()
	helps := map[string]map[string]flagSpec{}
	help := func(bin string, args ...string) map[string]flagSpec {
		key := bin + " " + strings.Join(args, " ")
		if h, ok := helps[key]; ok {
			return h
		}
		r := run(t, home, nil, bin, args...)
		if r.code != 0 {
			t.Fatalf("%s %q: exit %d\n%s", bin, args, r.code, r.stderr)
		}
		helps[key] = parseHelp(r.stderr)
		return helps[key]
	}
	seen := map[string]bool{}
	counted := 0
	for _, b := range d.blocks {
		if b.lang != "sh" {
			continue
		}
		cmds, err := shellCommands(b.text)
		if err != nil {
			t.Fatalf("%s:%d: %v", runbook, b.line, err)
		}
		for _, c := range cmds {
			// Skip "sudo" and leading NAME=value assignments to reach the program.
			for len(c) > 0 && (c[0] == "sudo" || (strings.Contains(c[0], "=") && !strings.HasPrefix(c[0], "-"))) {
				c = c[1:]
			}
			where := fmt.Sprintf("%s:%d: %s", runbook, b.line, strings.Join(c, " "))
			switch {
			case len(c) >= 2 && filepath.Base(c[0]) == "gotpu":
				counted++
				if seen[where] {
					continue
				}
				seen[where] = true
				specs := help(gotpu, c[1], "--help")
				for _, w := range c[2:] {
					name, _ := flagName(w)
					if s, ok := specs[name]; ok && (strings.HasPrefix(s.usage, "not supported by gotpu") ||
						strings.HasPrefix(s.usage, "accepted and ignored")) {
						t.Errorf("%s: --%s: %s", where, name, s.usage)
					}
				}
				r := run(t, home, nil, gotpu, append(c[1:], "--help")...)
				if r.code != 0 || !strings.HasPrefix(r.stderr, "Usage: gotpu "+c[1]) {
					t.Errorf("%s: does not parse (exit %d):\n%s", where, r.code, firstLines(r.stderr, 3))
				}
			case len(c) >= 3 && c[0] == "go" && c[1] == "run":
				counted++
				pkg := strings.TrimPrefix(c[2], "./")
				if !strings.HasPrefix(pkg, "examples/") || strings.Count(pkg, "/") != 1 {
					t.Errorf("%s: only ./examples/<name> is checked; %q is not an example", where, c[2])
					continue
				}
				bin := filepath.Join(binDir, filepath.Base(pkg))
				specs := help(bin, "-h")
				args := c[3:]
				ok := true
				for i := 0; i < len(args); i++ {
					name, hasValue := flagName(args[i])
					s, known := specs[name]
					if !known {
						t.Errorf("%s: %q is not a flag of %s", where, args[i], pkg)
						ok = false
						continue
					}
					if !s.isBool && !hasValue {
						i++
					}
				}
				if !ok {
					continue
				}
				r := run(t, home, nil, bin, append(slices.Clone(args), "-h")...)
				if r.code != 0 || !strings.HasPrefix(r.stderr, "Usage of ") {
					t.Errorf("%s: does not parse (exit %d):\n%s", where, r.code, firstLines(r.stderr, 3))
				}
			}
		}
	}
	// The runbook has gotpu devices, train and both examples; finding none means the reading broke.
	if counted < 8 {
		t.Fatalf("found only %d gotpu / go run commands in %s", counted, runbook)
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// TestRunbookPaths: repository paths, relative links and #anchors in the runbook resolve.
func TestRunbookPaths(t *testing.T) {
	d := readDoc(t, runbook)
	roots := repoRoots(t)
	checkPath := func(where, p string) {
		p = strings.TrimPrefix(strings.TrimSuffix(p, "/"), "./")
		first, _, _ := strings.Cut(p, "/")
		if !roots[first] || strings.ContainsAny(p, "<>*…") {
			return
		}
		if _, err := os.Stat(filepath.Join(repo, filepath.FromSlash(p))); err != nil {
			t.Errorf("%s: %s does not exist in the repository", where, p)
		}
	}
	n := 0
	for _, s := range codeSpans(d.prose) {
		for _, w := range strings.Fields(s.text) {
			n++
			checkPath(fmt.Sprintf("%s:%d", runbook, s.n), w)
		}
	}
	for _, b := range d.blocks {
		if b.lang != "sh" {
			continue
		}
		cmds, err := shellCommands(b.text)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cmds {
			for _, w := range c {
				checkPath(fmt.Sprintf("%s:%d", runbook, b.line), w)
			}
		}
	}
	anchors := map[string]bool{}
	for _, l := range d.prose {
		if strings.HasPrefix(l.text, "#") {
			anchors[headingSlug(strings.TrimLeft(l.text, "#"))] = true
		}
	}
	for _, l := range d.prose {
		for _, m := range linkRe.FindAllStringSubmatch(l.text, -1) {
			target := m[1]
			switch {
			case strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://"):
			case strings.HasPrefix(target, "#"):
				if !anchors[target[1:]] {
					t.Errorf("%s:%d: link to %s: no such heading", runbook, l.n, target)
				}
			default:
				if _, err := os.Stat(filepath.FromSlash(target)); err != nil {
					t.Errorf("%s:%d: link to %s: %v", runbook, l.n, target, err)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no inline code found: the Markdown reading broke")
	}
}

// repoRoots are the repository's top-level directories that hold Go code or test data (not
// build outputs such as bin/ or out/).
func repoRoots(t *testing.T) map[string]bool {
	t.Helper()
	des, err := os.ReadDir(repo)
	if err != nil {
		t.Fatal(err)
	}
	roots := map[string]bool{"testdata": true}
	for _, de := range des {
		if !de.IsDir() || strings.HasPrefix(de.Name(), ".") {
			continue
		}
		found := errors.New("found")
		err := filepath.WalkDir(filepath.Join(repo, de.Name()), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".go") {
				return found
			}
			return err
		})
		roots[de.Name()] = roots[de.Name()] || errors.Is(err, found)
	}
	return roots
}

var (
	envNameRe = regexp.MustCompile(`\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b`)
	assignRe  = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=`)
)

// TestRunbookEnvVars: the variables the runbook names for plugin discovery are exactly those
// package xla reads, and its prose names no other ALL_CAPS variable except those gotpu's code
// reads elsewhere (the compilation cache's) and the shell variables its own sh blocks assign
// (TPU_NAME, ZONE).
func TestRunbookEnvVars(t *testing.T) {
	read := xlaEnvVars(t)
	if len(read) == 0 {
		t.Fatal("found no environment variables read in xla/: the source reading broke")
	}
	readAnywhere := moduleEnvVars(t)
	for v := range read {
		if !readAnywhere[v] {
			t.Fatalf("moduleEnvVars misses %s, which xla/ reads: the source reading broke", v)
		}
	}
	d := readDoc(t, runbook)
	shellVars := map[string]bool{}
	for _, b := range d.blocks {
		if b.lang != "sh" {
			continue
		}
		cmds, err := shellCommands(b.text)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cmds {
			for _, w := range c {
				if m := assignRe.FindStringSubmatch(w); m != nil {
					shellVars[m[1]] = true
				}
			}
		}
	}
	named := map[string]bool{}
	for _, s := range codeSpans(d.section(t, "How gotpu finds libtpu")) {
		for _, v := range envNameRe.FindAllString(s.text, -1) {
			named[v] = true
		}
	}
	if !reflect.DeepEqual(named, read) {
		t.Errorf("%s, section \"How gotpu finds libtpu\", names %v; xla/ reads %v", runbook, keys(named), keys(read))
	}
	for _, s := range codeSpans(d.prose) {
		for _, v := range envNameRe.FindAllString(s.text, -1) {
			if !readAnywhere[v] && !shellVars[v] {
				t.Errorf("%s:%d: `%s` names %s, which gotpu does not read and no sh block assigns", runbook, s.n, s.text, v)
			}
		}
	}
}

// moduleEnvVars collects the names passed to any function called Getenv, LookupEnv or getenv
// (os's, the search environment's, a getenv parameter) as a string literal or a string constant
// declared in the module, in every non-test Go file of the module.
func moduleEnvVars(t *testing.T) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	consts, args := envCalls(t, fset, goFiles(t, repo, true), true)
	out := map[string]bool{}
	for _, a := range args {
		switch a := a.(type) {
		case *ast.BasicLit:
			if a.Kind == token.STRING {
				out[constant.StringVal(constant.MakeFromLiteral(a.Value, a.Kind, 0))] = true
			}
		case *ast.Ident:
			if v, ok := consts[a.Name]; ok {
				out[v] = true
			}
		case *ast.SelectorExpr: // pkg.Const
			if v, ok := consts[a.Sel.Name]; ok {
				out[v] = true
			}
		}
	}
	return out
}

// xlaEnvVars collects the names passed to os.Getenv / os.LookupEnv or to the search
// environment's getenv in package xla's non-test sources, resolving named string constants.
func xlaEnvVars(t *testing.T) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	consts, args := envCalls(t, fset, goFiles(t, filepath.Join(repo, "xla"), false), false)
	out := map[string]bool{}
	for _, a := range args {
		switch a := a.(type) {
		case *ast.BasicLit:
			out[constant.StringVal(constant.MakeFromLiteral(a.Value, a.Kind, 0))] = true
		case *ast.Ident:
			v, ok := consts[a.Name]
			if !ok {
				t.Fatalf("%s: getenv(%s): not a string constant of package xla", fset.Position(a.Pos()), a.Name)
			}
			out[v] = true
		default:
			t.Fatalf("%s: getenv(%s): not a literal or constant", fset.Position(a.Pos()), types.ExprString(a))
		}
	}
	return out
}

// goFiles lists the non-test Go files in dir, and with recursive in its subdirectories too
// (testdata, node_modules and hidden directories left out).
func goFiles(t *testing.T, dir string, recursive bool) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != dir && (!recursive || d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// envCalls parses files and returns the string constants they declare and the argument of every
// one-argument call of a function named Getenv, LookupEnv or getenv, called through a selector
// (os.Getenv, env.getenv) and, with bare, also by its name alone (a getenv parameter).
func envCalls(t *testing.T, fset *token.FileSet, files []string, bare bool) (map[string]string, []ast.Expr) {
	t.Helper()
	consts := map[string]string{}
	var args []ast.Expr
	for _, p := range files {
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, name := range n.Names {
					if i < len(n.Values) {
						if lit, ok := n.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[name.Name] = constant.StringVal(constant.MakeFromLiteral(lit.Value, lit.Kind, 0))
						}
					}
				}
			case *ast.CallExpr:
				var name string
				switch fn := n.Fun.(type) {
				case *ast.SelectorExpr:
					name = fn.Sel.Name
				case *ast.Ident:
					if bare {
						name = fn.Name
					}
				}
				if len(n.Args) == 1 && (name == "getenv" || name == "Getenv" || name == "LookupEnv") {
					args = append(args, n.Args[0])
				}
			}
			return true
		})
	}
	return consts, args
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestRunbookFences: every code block is sh, text or json, so no command escapes the checks in a
// block of another language.
func TestRunbookFences(t *testing.T) {
	for _, b := range readDoc(t, runbook).blocks {
		if b.lang != "sh" && b.lang != "text" && b.lang != "json" {
			t.Errorf("%s:%d: code block language %q; use sh (checked commands), text or json", runbook, b.line, b.lang)
		}
	}
}

// TestReadmeListsDocs: README.md links every document in this directory, and every link resolves.
func TestReadmeListsDocs(t *testing.T) {
	raw, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, m := range linkRe.FindAllStringSubmatch(string(raw), -1) {
		linked[m[1]] = true
		if !strings.Contains(m[1], "://") {
			if _, err := os.Stat(filepath.FromSlash(m[1])); err != nil {
				t.Errorf("README.md links %s: %v", m[1], err)
			}
		}
	}
	mds, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, md := range mds {
		if md != "README.md" && !linked[md] {
			t.Errorf("README.md does not list %s", md)
		}
	}
}
