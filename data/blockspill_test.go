package data

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sync/errgroup"
)

const spillBlock = 32

// spillCorpus writes 2100 documents (three groups of run_clm's 1000) of varied lengths.
func spillCorpus(t *testing.T) string {
	t.Helper()
	var lines []string
	for i := range 2100 {
		lines = append(lines, fmt.Sprintf("func f%d(x int) int { return x * %d }", i, i*i)+strings.Repeat(" // pad", i%7))
	}
	path := filepath.Join(t.TempDir(), "corpus.txt")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// groupBoth groups the corpus in memory (GroupTexts) and with each of opts, which must spill; a
// negative MaxMemoryTokens means all but the corpus's last group in memory.
func groupBoth(t *testing.T, opts ...GroupOptions) (mem *TokenBlocks, spilled []*TokenBlocks) {
	t.Helper()
	tok := loadTokenizer(t, "gpt2")
	path := spillCorpus(t)
	ctx := context.Background()
	mem, err := GroupTexts(ctx, tok, TextLines(path), spillBlock, GroupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if mem.spill != nil {
		t.Fatal("the default options spilled a small corpus")
	}
	for _, o := range opts {
		if o.MaxMemoryTokens < 0 {
			o.MaxMemoryTokens = mem.Tokens() - 1
		}
		s, err := GroupTexts(ctx, tok, TextLines(path), spillBlock, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if s.spill == nil {
			t.Fatalf("MaxMemoryTokens %d did not spill %d tokens", o.MaxMemoryTokens, mem.Tokens())
		}
		spilled = append(spilled, s)
	}
	return mem, spilled
}

func sameBlocks(t *testing.T, got, want *TokenBlocks) {
	t.Helper()
	if got.Tokens() != want.Tokens() || got.Len() != want.Len() || got.BlockSize != want.BlockSize {
		t.Fatalf("%d tokens in %d blocks of %d, want %d in %d of %d",
			got.Tokens(), got.Len(), got.BlockSize, want.Tokens(), want.Len(), want.BlockSize)
	}
	for i := range want.Len() {
		g, err := got.Get(i)
		if err != nil {
			t.Fatal(err)
		}
		w, _ := want.Get(i)
		if !slices.Equal(g.InputIDs, w.InputIDs) {
			t.Fatalf("block %d: %v, want %v", i, g.InputIDs, w.InputIDs)
		}
	}
}

// TestGroupTextsSpill: blocks spilled from the start (MaxMemoryTokens 1) or only at the last
// group (everything before it in memory, then written out) are the in-memory blocks bit for
// bit; the spill file is never visible in Dir on Linux and is gone after Close everywhere.
func TestGroupTextsSpill(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	mem, all := groupBoth(t, GroupOptions{Dir: dirs[0], MaxMemoryTokens: 1}, GroupOptions{Dir: dirs[1], MaxMemoryTokens: -1})
	for k, spilled := range all {
		dir := dirs[k]
		if mem.Len() < 100 {
			t.Fatalf("only %d blocks: the corpus is too small to test", mem.Len())
		}
		sameBlocks(t, spilled, mem)
		if runtime.GOOS == "linux" {
			if names := dirEntries(t, dir); len(names) != 0 {
				t.Errorf("the open spill file is visible in Dir: %v", names)
			}
		}
		if _, err := spilled.Get(spilled.Len()); err == nil {
			t.Error("Get past the end succeeded")
		}
		if err := spilled.Close(); err != nil {
			t.Fatal(err)
		}
		if err := spilled.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if names := dirEntries(t, dir); len(names) != 0 {
			t.Errorf("Close left %v in Dir", names)
		}
		if _, err := spilled.Get(0); err == nil || !strings.Contains(err.Error(), "block 0") {
			t.Errorf("Get after Close: %v", err)
		}
	}
	if err := mem.Close(); err != nil {
		t.Errorf("Close in memory: %v", err)
	}
	if ex, err := mem.Get(0); err != nil || len(ex.InputIDs) != spillBlock {
		t.Errorf("Close in memory changed the blocks: %v", err)
	}
	if err := (GroupOptions{MaxMemoryTokens: -1}).Validate(); err == nil || !strings.Contains(err.Error(), "MaxMemoryTokens") {
		t.Errorf("negative MaxMemoryTokens: %v", err)
	}
	tok := loadTokenizer(t, "gpt2")
	if _, err := GroupTexts(context.Background(), tok, TextLines(spillCorpus(t)), 8, GroupOptions{Dir: "/nonexistent/dir"}); err == nil || !strings.Contains(err.Error(), "Dir") {
		t.Errorf("missing Dir: %v", err)
	}
}

// TestGroupTextsSpillLoader: a loader over spilled blocks returns the batches one over the
// in-memory blocks does, and a run resumed from its State continues exactly.
func TestGroupTextsSpillLoader(t *testing.T) {
	mem, all := groupBoth(t, GroupOptions{Dir: t.TempDir(), MaxMemoryTokens: 1})
	spilled := all[0]
	epoch := (mem.Len() + 5) / 6
	total, k := epoch+40, epoch-7 // the resumed run crosses the epoch boundary
	want, _ := batchesOf(t, mem, spillBlock, State{Seed: 42}, total)
	got, _ := batchesOf(t, spilled, spillBlock, State{Seed: 42}, total)
	if !reflect.DeepEqual(got, want) {
		t.Fatal("a loader over spilled blocks returns other batches than over the blocks in memory")
	}
	first, saved := batchesOf(t, spilled, spillBlock, State{Seed: 42}, k)
	rest, _ := batchesOf(t, spilled, spillBlock, saved, total-k)
	if !reflect.DeepEqual(append(first, rest...), want) {
		t.Fatalf("resumed at %+v: the continuation differs", saved)
	}
}

// TestGroupTextsSpillConcurrentGet: Get on spilled blocks from many goroutines at once (run
// under -race) returns every block intact.
func TestGroupTextsSpillConcurrentGet(t *testing.T) {
	mem, all := groupBoth(t, GroupOptions{Dir: t.TempDir(), MaxMemoryTokens: 1})
	spilled := all[0]
	n := mem.Len()
	var g errgroup.Group
	for w := range 8 {
		g.Go(func() error {
			for k := range n {
				i := (k*(2*w+1) + w*31) % n
				got, err := spilled.Get(i)
				if err != nil {
					return err
				}
				want, _ := mem.Get(i)
				if !slices.Equal(got.InputIDs, want.InputIDs) {
					return fmt.Errorf("goroutine %d: block %d differs", w, i)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}
