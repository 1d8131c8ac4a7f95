package gocorpus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data/tokenizer"
)

const testTokenizer = "../../../testdata/tokenizers/mistral-7b/tokenizer.json.gz"

// TestDocuments: both corpora of the real standard library, comments without directives, code
// with package clauses; an unknown kind is an error naming -corpus.
func TestDocuments(t *testing.T) {
	for _, kind := range []string{Comments, Code} {
		train, held, err := Documents(GoRootSrc(), kind, 200<<10)
		if err != nil {
			t.Fatal(err)
		}
		if len(train) < 10 || len(held) == 0 {
			t.Fatalf("%s: %d training and %d held-out documents", kind, len(train), len(held))
		}
		all := "\n" + strings.Join(append(train, held...), "\n")
		// Source files have package clauses; comments lose their directives (a stripped
		// "//go:build linux" would be a line "go:build linux").
		directives := strings.Contains(all, "\ngo:build ") || strings.Contains(all, "\ngo:linkname ")
		if kind == Code && !strings.Contains(all, "\npackage ") || kind == Comments && directives {
			t.Errorf("%s corpus: package clauses %v, directive lines %v", kind, strings.Contains(all, "\npackage "), directives)
		}
	}
	if _, _, err := Documents(GoRootSrc(), "prose", 1); err == nil || !strings.Contains(err.Error(), "-corpus") {
		t.Errorf("unknown corpus: error %v, want one naming -corpus", err)
	}
}

// TestDocumentsSplit: on a tree of its own, Documents holds out exactly the files whose
// slash-separated relative path has an FNV-1a hash divisible by 20, reads both sides in hash
// order, skips tests, testdata, vendor and files without text, and stops each side at its budget.
func TestDocumentsSplit(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	type file struct {
		rel  string
		hash uint32
	}
	var files []file
	for i := range 300 {
		rel := fmt.Sprintf("pkg%d/f%d.go", i%7, i)
		write(rel, fmt.Sprintf("package pkg%d\n\n// Doc %s.\nvar x = 1\n", i%7, rel))
		h := fnv.New32a()
		h.Write([]byte(rel))
		files = append(files, file{rel, h.Sum32()})
	}
	for _, rel := range []string{"a/a_test.go", "a/testdata/t.go", "vendor/v/v.go", "b/vendor/v.go", "a/notes.txt"} {
		write(rel, "package x\n\n// Skipped "+rel+".\n")
	}
	write("a/nocomment.go", "package a\n") // an empty document in the comments corpus: skipped
	slices.SortFunc(files, func(a, b file) int { return cmp.Or(cmp.Compare(a.hash, b.hash), strings.Compare(a.rel, b.rel)) })
	var wantTrain, wantHeld []string
	for _, f := range files {
		doc := "Doc " + f.rel + ".\n"
		if f.hash%20 == 0 {
			wantHeld = append(wantHeld, doc)
		} else {
			wantTrain = append(wantTrain, doc)
		}
	}
	if len(wantHeld) == 0 {
		t.Fatal("no file of the test tree hashes to the held-out side")
	}

	train, held, err := Documents(root, Comments, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(train, wantTrain) || !slices.Equal(held, wantHeld) {
		t.Fatalf("%d training and %d held-out documents:\n%q\n%q\nwant %d and %d:\n%q\n%q",
			len(train), len(held), train, held, len(wantTrain), len(wantHeld), wantTrain, wantHeld)
	}

	// A budget stops each side once it is reached: the last document taken may pass it.
	budget := 20 * len(wantTrain[0]) * 3 / 2 // one and a half held-out documents' worth of budget/20
	train, held, err = Documents(root, Comments, budget)
	if err != nil {
		t.Fatal(err)
	}
	if n := size(train[:len(train)-1]); n >= budget || size(train) < budget || !slices.Equal(train, wantTrain[:len(train)]) {
		t.Errorf("budget %d: %d training documents of %d bytes (%d without the last), want the first ones in hash order just reaching it",
			budget, len(train), size(train), n)
	}
	if len(held) != 2 || !slices.Equal(held, wantHeld[:2]) {
		t.Errorf("budget %d: held-out documents %q, want the first 2 in hash order (budget/20 reached by the second)", budget, held)
	}

	code, _, err := Documents(root, Code, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	if len(code) != len(wantTrain)+1 || !strings.HasPrefix(code[0], "package ") {
		t.Errorf("code corpus: %d training documents, want %d (the comment-less file too), source text", len(code), len(wantTrain)+1)
	}

	if _, _, err := Documents(t.TempDir(), Code, 1<<20); err == nil || !strings.Contains(err.Error(), "no Go sources") {
		t.Errorf("an empty tree: error %v, want no Go sources", err)
	}
}

func size(docs []string) int {
	n := 0
	for _, d := range docs {
		n += len(d)
	}
	return n
}

// TestCommentText: comments lose their markers, directives and the licence header; groups
// become paragraphs.
func TestCommentText(t *testing.T) {
	src := `// Copyright 2024 The Go Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build linux

// Package demo shows
// comment extraction.
package demo

/* A block
comment. */
func f() {} // trailing
`
	got, err := CommentText("demo.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := "Package demo shows\ncomment extraction.\n\nA block\ncomment.\n\ntrailing\n"
	if got != want {
		t.Errorf("CommentText = %q, want %q", got, want)
	}
	if _, err := CommentText("bad.go", []byte("/* never closed")); err == nil || !strings.Contains(err.Error(), "bad.go") {
		t.Errorf("unterminated comment: error %v, want one naming the file", err)
	}
}

// TestTokenizeBlocks: Tokenize puts Mistral's <s> before each document and concatenates them;
// Blocks cuts whole blocks of n, dropping the remainder.
func TestTokenizeBlocks(t *testing.T) {
	tok, err := tokenizer.FromFile(testTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	docs := []string{"Package demo shows comment extraction.", "A block comment."}
	ids, err := Tokenize(context.Background(), tok, docs)
	if err != nil {
		t.Fatal(err)
	}
	var want []uint32
	for _, d := range docs {
		e, err := tok.Encode(d, true)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, e.IDs...)
	}
	if !slices.Equal(ids, want) || ids[0] != 1 || slices.Index(ids[1:], 1) < 0 {
		t.Errorf("Tokenize = %v, want the documents' encodings, each after <s> (1): %v", ids, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Tokenize(ctx, tok, docs); !errors.Is(err, context.Canceled) {
		t.Errorf("Tokenize with a cancelled context: error %v, want context.Canceled", err)
	}

	b := Blocks([]int32{1, 2, 3, 4, 5, 6, 7}, 3)
	if len(b) != 2 || !slices.Equal(b[0].InputIDs, []int32{1, 2, 3}) || !slices.Equal(b[1].InputIDs, []int32{4, 5, 6}) || cap(b[0].InputIDs) != 3 {
		t.Errorf("Blocks(1..7, 3) = %v, want [1 2 3] [4 5 6], each capped", b)
	}
	if b := Blocks([]int32{1, 2}, 0); b != nil {
		t.Errorf("Blocks(_, 0) = %v, want none", b)
	}
}

// TestExamples: both sides mapped and cut, the held-out side capped; too little text is an error
// naming -train_bytes.
func TestExamples(t *testing.T) {
	m, err := NewVocabMap([]uint32{7, 7, 9}, []uint32{0, 1, 2}, 5)
	if err != nil {
		t.Fatal(err)
	}
	train, eval, err := Examples(m, []uint32{1, 7, 9, 8, 1, 7, 7}, []uint32{1, 9, 1, 7, 1, 8, 1}, 2, 2, 100)
	if err != nil {
		t.Fatal(err)
	}
	// Room for one id beside the specials: 7 is 3, everything else the "other" id 4.
	if len(train) != 3 || !slices.Equal(train[1].InputIDs, []int32{4, 4}) || len(eval) != 2 || !slices.Equal(eval[1].InputIDs, []int32{1, 3}) {
		t.Errorf("Examples = %v, %v; want 3 training blocks ([1 3] [4 4] [1 3]) and the first 2 of 3 held-out ones ([1 4] [1 3])", train, eval)
	}
	if _, _, err := Examples(m, []uint32{1, 7, 9}, []uint32{1}, 2, 2, 100); err == nil ||
		err.Error() != "-train_bytes 100 gives 1 training and 0 held-out blocks of 2 tokens" {
		t.Errorf("no held-out block: error %v", err)
	}
}
