package data

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// peakHeap runs fn with the collector set to keep the heap near what is live (GOGC=10) and
// returns the highest HeapAlloc over the start that a sampler saw every millisecond.
func peakHeap(fn func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				var s runtime.MemStats
				runtime.ReadMemStats(&s)
				if s.HeapAlloc > base && s.HeapAlloc-base > peak {
					peak = s.HeapAlloc - base
				}
			}
		}
	}()
	fn()
	close(done)
	wg.Wait()
	return peak
}

// TestGroupTextsLongDocuments (issue 38, finding 10 in `gotpu train`): a group of 1000 documents
// of 1 MiB each (a Parquet file of repeated long strings) was tokenized in one call, holding every
// encoding of the group at once: gigabytes, an out-of-memory death under `ulimit -v 2097152`. The
// tokenizer now gets a chunk of text at a time and full blocks are kept as they fill: 16 such
// documents are grouped with the heap a few encodings high, and the blocks are run_clm's.
func TestGroupTextsLongDocuments(t *testing.T) {
	if testing.Short() {
		t.Skip("tokenizes 16 MiB")
	}
	tok := loadTokenizer(t, "gpt2")
	long := strings.Repeat("a", 1<<20-1) + "z" // 262,145 GPT-2 tokens
	path := filepath.Join(t.TempDir(), "long.txt")
	if err := os.WriteFile(path, []byte(strings.Repeat(long+"\n", 16)), 0o644); err != nil {
		t.Fatal(err)
	}
	const block = 1024
	var blocks *TokenBlocks
	var err error
	peak := peakHeap(func() {
		blocks, err = GroupTexts(context.Background(), tok, TextLines(path), block, GroupOptions{Dir: t.TempDir()})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer blocks.Close()
	t.Logf("16 documents of 1 MiB: %d tokens, peak heap %d MiB over the start", blocks.Tokens(), peak>>20)
	e, err := tok.Encode(long, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := 16 * len(e.IDs) / block * block; blocks.Tokens() != want {
		t.Errorf("%d tokens, want %d (16 documents of %d, one group cut to a multiple of %d)", blocks.Tokens(), want, len(e.IDs), block)
	}
	if peak > 128<<20 {
		t.Errorf("peak heap %d MiB over the start: more than 128 MiB for encodings of 1 MiB documents", peak>>20)
	}
}

// TestJSONLinesBounded (issue 38, finding 5 in `gotpu train`): a JSON line of 2^20 keys (12 MB)
// was decoded into a map before its text field was looked up, a map entry and a key copy per
// key; a line nested 5,000 deep went to encoding/json's limit of 10,000. Both are refused before
// decoding, naming the file, the line and the limit, allocating about nothing.
func TestJSONLinesBounded(t *testing.T) {
	var keys strings.Builder
	keys.WriteString(`{"text": "x"`)
	for i := range 1 << 20 {
		keys.WriteString(`,"k` + strconv.Itoa(i) + `":0`)
	}
	keys.WriteString("}\n")
	deep := `{"text": "x", "meta": ` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + "}\n"
	for _, c := range []struct {
		name, line, limit string
	}{{"keys", keys.String(), "more than 65536 keys"}, {"deep", deep, "deeper than 1000 levels"}} {
		path := filepath.Join(t.TempDir(), c.name+".jsonl")
		if err := os.WriteFile(path, []byte(`{"text": "ok", "label": 1}`+"\n"+c.line), 0o644); err != nil {
			t.Fatal(err)
		}
		var errText, errLabeled error
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		for _, err := range JSONLTextField(path, "text") {
			if err != nil {
				errText = err
			}
		}
		_, errLabeled = ReadLabeledJSONL(path, "text", "", "label")
		runtime.ReadMemStats(&ms1)
		alloc := ms1.TotalAlloc - ms0.TotalAlloc
		t.Logf("%s: %d-byte line: %.1f MiB allocated: %v", c.name, len(c.line), float64(alloc)/(1<<20), errText)
		for _, err := range []error{errText, errLabeled} {
			if err == nil || !strings.Contains(err.Error(), path+":2: ") || !strings.Contains(err.Error(), c.limit) {
				t.Errorf("%s: %v, want an error naming %s:2 and %q", c.name, err, path, c.limit)
			}
		}
		if alloc > uint64(6*len(c.line))+8<<20 {
			t.Errorf("%s: %.1f MiB allocated reading a %d-byte line twice", c.name, float64(alloc)/(1<<20), len(c.line))
		}
	}
}
