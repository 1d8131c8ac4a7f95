package main

import (
	"bufio"
	"bytes"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/gotpu/gotpu/data"
)

// snippet is one classification record: a run of consecutive source lines, the package family
// it comes from, and its file (to prove the split has no file on both sides).
type snippet struct {
	text, class, file string
}

// corpusConfig says how to cut the Go standard library into a classification task.
type corpusConfig struct {
	root          string   // GOROOT/src
	classes       []string // top-level directories under root, e.g. crypto, net
	lines         int      // lines per snippet
	heldOutEvery  int      // 1 in heldOutEvery files (by a hash of the path) is held out
	trainPerClass int      // snippets per class in the training set (balanced)
	evalPerClass  int      // snippets per class in the held-out set (balanced)
	seed          uint64
}

// goRoot is `go env GOROOT`, or the GOROOT this binary was built with.
func goRoot() string {
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		if r := strings.TrimSpace(string(out)); r != "" {
			return r
		}
	}
	//lint:ignore SA1019 last resort when the go command is not on PATH: the GOROOT of the build
	return runtime.GOROOT()
}

// buildCorpus lists each class's non-test Go files, splits them into training and held-out files
// by a hash of their path (so a file's snippets are all on one side: no leakage), cuts them into
// snippets, and samples the same number of snippets per class on each side, in a fixed order
// for a given seed.
func buildCorpus(c corpusConfig) (train, heldOut []snippet, err error) {
	if len(c.classes) < 2 {
		return nil, nil, fmt.Errorf("-classes: want at least 2 package families, got %v", c.classes)
	}
	rng := rand.New(rand.NewPCG(c.seed, 0x9e3779b97f4a7c15))
	for _, class := range c.classes {
		dir := filepath.Join(c.root, class)
		files, err := goFiles(dir)
		if err != nil {
			return nil, nil, err
		}
		var tr, ho []snippet
		for _, f := range files {
			rel, _ := filepath.Rel(c.root, f)
			h := fnv.New32a()
			h.Write([]byte(filepath.ToSlash(rel)))
			held := h.Sum32()%uint32(c.heldOutEvery) == 0
			snips, err := fileSnippets(f, rel, class, c.lines)
			if err != nil {
				return nil, nil, err
			}
			if held {
				ho = append(ho, snips...)
			} else {
				tr = append(tr, snips...)
			}
		}
		if len(tr) < c.trainPerClass || len(ho) < c.evalPerClass {
			return nil, nil, fmt.Errorf("-classes: %s has %d training and %d held-out snippets, fewer than the %d and %d asked for",
				class, len(tr), len(ho), c.trainPerClass, c.evalPerClass)
		}
		rng.Shuffle(len(tr), func(i, j int) { tr[i], tr[j] = tr[j], tr[i] })
		rng.Shuffle(len(ho), func(i, j int) { ho[i], ho[j] = ho[j], ho[i] })
		train = append(train, tr[:c.trainPerClass]...)
		heldOut = append(heldOut, ho[:c.evalPerClass]...)
	}
	// Interleave the classes so that a prefix of either set is balanced too.
	rng.Shuffle(len(train), func(i, j int) { train[i], train[j] = train[j], train[i] })
	rng.Shuffle(len(heldOut), func(i, j int) { heldOut[i], heldOut[j] = heldOut[j], heldOut[i] })
	return train, heldOut, nil
}

// goFiles lists the non-test .go files under dir, outside testdata and vendor directories, sorted.
func goFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("-classes: reading the Go sources under %s: %w", dir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("-classes: no Go sources under %s", dir)
	}
	slices.Sort(files)
	return files, nil
}

// fileSnippets cuts a file into runs of n lines. Everything up to the package clause (the
// licence header, build tags, the package comment and "package tls") is dropped, as is any other
// line starting with "package ": the package name would give the answer away. Runs with less than 80 bytes of non-blank text
// are skipped.
func fileSnippets(path, rel, class string, n int) ([]snippet, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	seenPackage := false
	for sc.Scan() {
		line := sc.Text()
		isClause := strings.HasPrefix(line, "package ")
		seenPackage = seenPackage || isClause
		// Generators (encoding/gob/encgen.go…) hold package clauses in templates: dropped too.
		if seenPackage && !isClause {
			lines = append(lines, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []snippet
	for i := 0; i < len(lines); i += n {
		chunk := strings.Join(lines[i:min(i+n, len(lines))], "\n")
		if len(strings.Join(strings.Fields(chunk), "")) < 80 {
			continue
		}
		out = append(out, snippet{text: chunk, class: class, file: rel})
	}
	return out, nil
}

// labeled converts snippets to the data package's classification records.
func labeled(snips []snippet) []data.LabeledText {
	out := make([]data.LabeledText, len(snips))
	for i, s := range snips {
		out[i] = data.LabeledText{Text: s.text, Label: s.class}
	}
	return out
}

// goRootSrc is the standard library's source directory, $(go env GOROOT)/src.
func goRootSrc() string { return filepath.Join(goRoot(), "src") }
