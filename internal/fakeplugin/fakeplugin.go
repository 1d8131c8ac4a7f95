package fakeplugin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Kind selects what kind of fake to build.
type Kind int

const (
	// ExportsAPI is a shared library exporting GetPjrtApi, which returns NULL: discovery accepts
	// it, loading it fails.
	ExportsAPI Kind = iota
	// NoAPI is a shared library without GetPjrtApi.
	NoAPI
	// NotELF is a text file with a plugin's name.
	NotELF
)

// Build writes a fake plugin of the given kind to dir/name and returns its path.
func Build(dir, name string, kind Kind) (string, error) {
	path := filepath.Join(dir, name)
	if kind == NotELF {
		return path, os.WriteFile(path, []byte("this is not a shared library\n"), 0o644)
	}
	src := "void *GetPjrtApi(void) { return 0; }\n"
	if kind == NoAPI {
		src = "int not_a_pjrt_plugin(void) { return 42; }\n"
	}
	cfile := filepath.Join(dir, name+".c")
	if err := os.WriteFile(cfile, []byte(src), 0o644); err != nil {
		return "", err
	}
	defer os.Remove(cfile)
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	out, err := exec.Command(cc, "-shared", "-fPIC", "-o", path, cfile).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("fakeplugin: %s: %w: %s", cc, err, out)
	}
	return path, nil
}
