package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/build"
	"go/doc"
	"go/parser"
	"go/token"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"
)

// systemPrompt opens every conversation: the assistant's job in one line.
const systemPrompt = "You answer questions about the Go standard library in one sentence."

// qa is one question about an exported function and the first sentence of its documentation.
type qa struct {
	question, answer string
}

// message is one turn of a conversation, in the messages format chat templates read.
type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// conversations builds the fine-tuning data from the Go standard library under root
// ($(go env GOROOT)/src): for every public package, each exported function with a doc comment
// gives a question ("What does strings.TrimSpace do?") and its answer (the comment's first
// sentence, go/doc's Synopsis). Consecutive questions of one package make a conversation of
// turnsPer user/assistant pairs after a system prompt. Packages are split by the FNV-1a hash of
// their import path, one in ten held out, so no package is on both sides; the result is the same
// for a given GOROOT on every run. Internal, vendor, testdata and cmd trees are skipped.
func conversations(root string, turnsPer int) (train, heldOut [][]message, err error) {
	if turnsPer < 1 {
		return nil, nil, fmt.Errorf("-turns: %d must be at least 1", turnsPer)
	}
	var dirs []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		switch d.Name() {
		case "testdata", "vendor", "internal":
			return filepath.SkipDir
		}
		if rel, _ := filepath.Rel(root, path); rel == "cmd" || strings.HasPrefix(rel, "cmd"+string(filepath.Separator)) {
			return filepath.SkipDir
		}
		dirs = append(dirs, path)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("reading the Go standard library at %s: %w", root, err)
	}
	slices.Sort(dirs)
	for _, dir := range dirs {
		importPath, _ := filepath.Rel(root, dir)
		importPath = filepath.ToSlash(importPath)
		pairs, err := packageQA(dir, importPath)
		if err != nil {
			return nil, nil, err
		}
		h := fnv.New32a()
		h.Write([]byte(importPath))
		side := &train
		if h.Sum32()%10 == 0 {
			side = &heldOut
		}
		for i := 0; i+turnsPer <= len(pairs); i += turnsPer {
			conv := []message{{Role: "system", Content: systemPrompt}}
			for _, p := range pairs[i : i+turnsPer] {
				conv = append(conv, message{Role: "user", Content: p.question}, message{Role: "assistant", Content: p.answer})
			}
			*side = append(*side, conv)
		}
	}
	if len(train) == 0 || len(heldOut) == 0 {
		return nil, nil, fmt.Errorf("%s: no documented functions found (is it a GOROOT/src?)", root)
	}
	return train, heldOut, nil
}

// packageQA reads the exported, documented functions of the package in dir (test files left
// out), in name order, as questions and answers. A directory without Go files gives nothing.
// Only the files a linux/amd64 build compiles are read, whatever the machine: a function with a
// file per platform (syscall.Exec) has one documentation, and the data is the same everywhere.
func packageQA(dir, importPath string) ([]qa, error) {
	bctx := build.Default
	bctx.GOOS, bctx.GOARCH, bctx.CgoEnabled = "linux", "amd64", true
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		if ok, err := bctx.MatchFile(dir, n); err != nil || !ok {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		if f.Name.Name == "main" || strings.HasSuffix(f.Name.Name, "_test") {
			continue
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, nil
	}
	// Files of several packages in one directory (build-tagged alternatives, documentation
	// packages) are kept to the majority package.
	name := files[0].Name.Name
	files = slices.DeleteFunc(files, func(f *ast.File) bool { return f.Name.Name != name })
	pkg, err := doc.NewFromFiles(fset, files, importPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	var funcs []*doc.Func
	funcs = append(funcs, pkg.Funcs...)
	for _, t := range pkg.Types {
		funcs = append(funcs, t.Funcs...)
	}
	slices.SortStableFunc(funcs, func(a, b *doc.Func) int { return strings.Compare(a.Name, b.Name) })
	var out []qa
	seen := map[string]bool{}
	for _, f := range funcs {
		answer := pkg.Synopsis(f.Doc)
		if answer == "" || seen[f.Name] || utf8.RuneCountInString(answer) > 200 {
			continue
		}
		seen[f.Name] = true
		out = append(out, qa{question: fmt.Sprintf("What does %s.%s do?", pkg.Name, f.Name), answer: answer})
	}
	return out, nil
}

// writeConversations writes conversations as JSON lines {"messages": [...]}, the conversational
// format TRL's SFTTrainer and `gotpu train` read.
func writeConversations(path string, convs [][]message) error {
	var b strings.Builder
	for _, c := range convs {
		line, err := json.Marshal(struct {
			Messages []message `json:"messages"`
		}{c})
		if err != nil {
			return err
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
