package gocorpus

import (
	"cmp"
	"context"
	"fmt"
	"go/scanner"
	"go/token"
	"hash/fnv"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/data/tokenizer"
)

// The corpora Documents reads, both from the same files of $(go env GOROOT)/src.
const (
	Comments = "comments" // the English text of the standard library's comments
	Code     = "code"     // the Go source files themselves
)

// GoRootSrc is $(go env GOROOT)/src, or the GOROOT this binary was built with.
func GoRootSrc() string {
	//lint:ignore SA1019 the fallback when the go command is not on PATH: the GOROOT of the build
	root := runtime.GOROOT()
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil && strings.TrimSpace(string(out)) != "" {
		root = strings.TrimSpace(string(out))
	}
	return filepath.Join(root, "src")
}

// Documents reads the corpus: one document per non-test Go file under root (testdata and vendor
// skipped), either the file's comments or its source. Files are split by a hash of their path,
// 1 in 20 held out, so no file is on both sides; the training side is taken in hash order (a
// sample across the whole library, not its first directories alphabetically) until budget
// bytes, the held-out side until budget/20 bytes.
func Documents(root, kind string, budget int) (train, heldOut []string, err error) {
	if kind != Comments && kind != Code {
		return nil, nil, fmt.Errorf("-corpus: %q is not %q or %q", kind, Comments, Code)
	}
	type file struct {
		path string
		hash uint32
	}
	var files []file
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			rel, _ := filepath.Rel(root, path)
			h := fnv.New32a()
			h.Write([]byte(filepath.ToSlash(rel)))
			files = append(files, file{path, h.Sum32()})
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("reading the Go sources under %s: %w", root, err)
	}
	slices.SortFunc(files, func(a, b file) int {
		return cmp.Or(cmp.Compare(a.hash, b.hash), strings.Compare(a.path, b.path))
	})
	trainBytes, heldBytes := 0, 0
	for _, f := range files {
		held := f.hash%20 == 0
		if held && heldBytes >= budget/20 || !held && trainBytes >= budget {
			continue
		}
		src, err := os.ReadFile(f.path)
		if err != nil {
			return nil, nil, err
		}
		doc := string(src)
		if kind == Comments {
			if doc, err = CommentText(f.path, src); err != nil {
				return nil, nil, err
			}
		}
		if strings.TrimSpace(doc) == "" {
			continue
		}
		if held {
			heldOut = append(heldOut, doc)
			heldBytes += len(doc)
		} else {
			train = append(train, doc)
			trainBytes += len(doc)
		}
	}
	if len(train) == 0 || len(heldOut) == 0 {
		return nil, nil, fmt.Errorf("no Go sources found under %s", root)
	}
	return train, heldOut, nil
}

// CommentText is the text of a Go file's comments, markers removed, one paragraph per comment
// group. Compiler directives (//go:build, //go:linkname, // +build, //line) and the licence
// header every file repeats are dropped: they would teach the model boilerplate, not English.
// path names the file in a scanning error.
func CommentText(path string, src []byte) (string, error) {
	fset := token.NewFileSet()
	var s scanner.Scanner
	var scanErr error
	s.Init(fset.AddFile(path, -1, len(src)), src, func(pos token.Position, msg string) {
		if scanErr == nil {
			scanErr = fmt.Errorf("%s: %s", pos, msg)
		}
	}, scanner.ScanComments)
	var b strings.Builder
	lastLine, sawCode := -2, false
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok != token.COMMENT {
			// Automatic semicolons are not code: "x := 1 // a" then "// b" is one group.
			sawCode = sawCode || tok != token.SEMICOLON || lit != "\n"
			continue
		}
		line := fset.Position(pos).Line
		text := strings.TrimSpace(stripMarkers(lit))
		if text == "" || isDirective(lit) || isLicence(text) {
			continue
		}
		// A blank line or code between comments starts a new group (go/ast's rule): a paragraph.
		if b.Len() > 0 && (line != lastLine+1 || sawCode) {
			b.WriteString("\n")
		}
		b.WriteString(text)
		b.WriteString("\n")
		lastLine, sawCode = line+strings.Count(lit, "\n"), false
	}
	if scanErr != nil {
		return "", scanErr
	}
	return b.String(), nil
}

func stripMarkers(lit string) string {
	if strings.HasPrefix(lit, "//") {
		return lit[2:]
	}
	return strings.TrimSuffix(strings.TrimPrefix(lit, "/*"), "*/")
}

func isDirective(lit string) bool {
	for _, p := range []string{"//go:", "// +build", "//line ", "//export ", "//extern ", "//sys", "//nolint"} {
		if strings.HasPrefix(lit, p) {
			return true
		}
	}
	return false
}

func isLicence(text string) bool {
	return strings.HasPrefix(text, "Copyright ") && strings.Contains(text, "Authors") ||
		strings.HasPrefix(text, "Use of this source code is governed by") ||
		strings.HasPrefix(text, "license that can be found in the LICENSE file")
}

// Tokenize encodes documents with the tokenizer's special tokens (Mistral's <s> before each),
// on all cores, and concatenates them (run_clm's tokenize_function before group_texts).
func Tokenize(ctx context.Context, tok tokenizer.Tokenizer, docs []string) ([]uint32, error) {
	inputs := make([]tokenizer.Input, len(docs))
	for i, d := range docs {
		inputs[i] = tokenizer.Single(d)
	}
	encs, err := tok.EncodeBatch(ctx, inputs, true)
	if err != nil {
		return nil, fmt.Errorf("tokenizing: %w", err)
	}
	var ids []uint32
	for _, e := range encs {
		ids = append(ids, e.IDs...)
	}
	return ids, nil
}

// Examples maps a corpus's training and held-out ids through vm and cuts each side into blocks of
// blockSize tokens (Blocks), keeping the first evalBlocks held-out blocks: a fixed sample keeps
// evaluation quick. Too little text for a block on either side is an error naming -train_bytes,
// whose value trainBytes is.
func Examples(vm *VocabMap, trainIDs, heldOutIDs []uint32, blockSize, evalBlocks, trainBytes int) (train, eval []data.Example, err error) {
	train = Blocks(vm.Apply(trainIDs), blockSize)
	eval = Blocks(vm.Apply(heldOutIDs), blockSize)
	if len(eval) > evalBlocks {
		eval = eval[:evalBlocks]
	}
	if len(train) == 0 || len(eval) == 0 {
		return nil, nil, fmt.Errorf("-train_bytes %d gives %d training and %d held-out blocks of %d tokens", trainBytes, len(train), len(eval), blockSize)
	}
	return train, eval, nil
}

// Blocks cuts a token stream into examples of n tokens (run_clm's group_texts; the remainder is
// dropped). The examples share ids' memory, each capped to its own n tokens. An n below 1 gives
// no example.
func Blocks(ids []int32, n int) []data.Example {
	if n < 1 {
		return nil
	}
	var out []data.Example
	for i := 0; i+n <= len(ids); i += n {
		out = append(out, data.Example{InputIDs: ids[i : i+n : i+n]})
	}
	return out
}
