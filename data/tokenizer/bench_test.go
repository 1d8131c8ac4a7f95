package tokenizer

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Encode throughput. The text is $GOTPU_BENCH_TEXT when set, otherwise a
// deterministic selection of Go sources from GOROOT (available wherever Go
// is) followed by the shared corpus, at least 1 MiB. With
// $GOTPU_BENCH_DUMP set, the text used is written there, so that another
// implementation (bench/node_bench.mjs) can be measured on the same bytes;
// bench/compare.sh does both. Documents are the text cut at blank lines.
//
//	go test -run '^$' -bench 'Encode/.*/sequential' -cpu 1 ./data/tokenizer/
//	go test -run '^$' -bench 'Encode/.*/batch' ./data/tokenizer/

const benchMinBytes = 1 << 20

var (
	benchOnce sync.Once
	benchData string
	benchErr  error
)

func goroot() string {
	if r := os.Getenv("GOROOT"); r != "" {
		return r
	}
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		return strings.TrimSpace(string(out))
	}
	//lint:ignore SA1019 last resort, when the go command is not on PATH: the GOROOT of the build
	return runtime.GOROOT()
}

func benchText(b *testing.B) string {
	benchOnce.Do(func() {
		if p := os.Getenv("GOTPU_BENCH_TEXT"); p != "" {
			data, err := os.ReadFile(p)
			benchData, benchErr = string(data), err
			return
		}
		var sb strings.Builder
		root := filepath.Join(goroot(), "src")
		// WalkDir visits in lexical order, so the selection is deterministic
		// for a given Go release.
		benchErr = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || d.Name() == "vendor") {
				return filepath.SkipDir
			}
			if sb.Len() >= benchMinBytes {
				return filepath.SkipAll
			}
			if !d.IsDir() && strings.HasSuffix(p, ".go") {
				data, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				sb.Write(data)
				sb.WriteString("\n\n")
			}
			return nil
		})
		for _, s := range corpusTexts(b) {
			sb.WriteString(s)
			sb.WriteString("\n\n")
		}
		benchData = sb.String()
		if benchErr == nil && len(benchData) < benchMinBytes {
			benchErr = os.ErrNotExist
		}
		if p := os.Getenv("GOTPU_BENCH_DUMP"); p != "" && benchErr == nil {
			benchErr = os.WriteFile(p, []byte(benchData), 0o644)
		}
	})
	if benchErr != nil {
		b.Fatalf("benchmark text: %v", benchErr)
	}
	return benchData
}

// benchDocs cuts the text into documents at blank lines (node_bench.mjs
// does the same).
func benchDocs(text string) []string {
	var docs []string
	for _, d := range strings.Split(text, "\n\n") {
		if d != "" {
			docs = append(docs, d)
		}
	}
	return docs
}

func BenchmarkEncode(b *testing.B) {
	text := benchText(b)
	docs := benchDocs(text)
	inputs := make([]Input, len(docs))
	for i, d := range docs {
		inputs[i] = Single(d)
	}
	for _, name := range []string{"gpt2", "mistral-7b"} {
		tok := loadTestTokenizer(b, name)
		b.Run(name+"/sequential", func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			tokens := 0
			start := time.Now()
			for i := 0; i < b.N; i++ {
				for _, d := range docs {
					e, err := tok.Encode(d, false)
					if err != nil {
						b.Fatal(err)
					}
					tokens += e.Len()
				}
			}
			b.ReportMetric(float64(tokens)/time.Since(start).Seconds(), "tokens/s")
			b.ReportMetric(float64(tokens)/float64(b.N), "tokens/op")
		})
		b.Run(name+"/batch", func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			tokens := 0
			start := time.Now()
			for i := 0; i < b.N; i++ {
				encs, err := tok.EncodeBatch(context.Background(), inputs, false)
				if err != nil {
					b.Fatal(err)
				}
				for _, e := range encs {
					tokens += e.Len()
				}
			}
			b.ReportMetric(float64(tokens)/time.Since(start).Seconds(), "tokens/s")
			b.ReportMetric(float64(tokens)/float64(b.N), "tokens/op")
		})
	}
}

func BenchmarkLoad(b *testing.B) {
	for _, name := range []string{"gpt2", "qwen3"} {
		data := readMaybeGz(b, filepath.Join(tokDir, name, "tokenizer.json.gz"))
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				if _, err := FromBytes(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
