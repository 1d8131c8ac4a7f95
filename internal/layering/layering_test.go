package layering

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/gotpu/gotpu/"

// allowed maps a package subtree to the subtrees of this module it may import (its own subtree
// always). The longest matching subtree decides. Anything not listed (cmd/, examples/, scripts/)
// may import everything: those are entry points.
var allowed = map[string][]string{
	"internal":     {},
	"hub":          {"internal"},
	"xla":          {"internal"},
	"data":         {"internal", "hub"},
	"checkpoint":   {"internal"},
	"models":       {"xla", "internal", "hub"},
	"trainer/step": {"models", "data", "xla", "internal"},
	"trainer":      {"trainer/step", "checkpoint", "models", "data", "xla", "internal"},
}

// subtree returns the longest key of allowed that contains pkg ("" if none).
func subtree(pkg string) string {
	best := ""
	for k := range allowed {
		if (pkg == k || strings.HasPrefix(pkg, k+"/")) && len(k) > len(best) {
			best = k
		}
	}
	return best
}

func within(pkg, tree string) bool { return pkg == tree || strings.HasPrefix(pkg, tree+"/") }

// TestNoUpwardImports lists every package of the module with its imports (go list) and checks
// each import of a gotpu package against allowed.
func TestNoUpwardImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		tree := subtree(pkg)
		if tree == "" {
			continue
		}
		checked++
		for _, imp := range f[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			dep := strings.TrimPrefix(imp, module)
			ok := within(dep, tree)
			for _, a := range allowed[tree] {
				ok = ok || within(dep, a)
			}
			if !ok {
				t.Errorf("%s imports %s: %s may import only its own subtree and %v", pkg, dep, tree, allowed[tree])
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked only %d packages: the listing is wrong", checked)
	}
	t.Logf("%d packages checked", checked)
}
