package checkpoint

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gotpu/gotpu/internal/safetensors"
)

// memSource is a TensorSource over host bytes standing in for device buffers: Stage copies
// tensor i out of data[i]. It records the calls and can fail at one tensor.
type memSource struct {
	infos []TensorInfo
	data  [][]byte
	// failAt is the name of the tensor whose Stage fails ("" never).
	failAt string
	calls  []int
	// donated is set once the caller may reuse the buffers; a Stage after it is a bug.
	donated   atomic.Bool
	lateStage atomic.Int32
}

func (s *memSource) Tensors() []TensorInfo { return s.infos }

func (s *memSource) Stage(ctx context.Context, i int, dst []byte) error {
	if s.donated.Load() {
		s.lateStage.Add(1)
	}
	s.calls = append(s.calls, i)
	if s.infos[i].Name == s.failAt {
		return errors.New("injected device read failure")
	}
	if len(dst) != len(s.data[i]) {
		return fmt.Errorf("dst of %d bytes for a tensor of %d", len(dst), len(s.data[i]))
	}
	copy(dst, s.data[i])
	return nil
}

func (s *memSource) add(name string, dtype safetensors.DType, shape ...int) {
	t := safetensors.Tensor{DType: dtype, Shape: shape}
	b := make([]byte, t.Size())
	for j := range b {
		b[j] = byte(len(s.infos)*31 + j*7 + 1)
	}
	s.infos = append(s.infos, TensorInfo{Name: name, DType: string(dtype), Shape: shape})
	s.data = append(s.data, b)
}

// specs are the same tensors with their data, for safetensors.Write.
func (s *memSource) specs() []safetensors.Tensor {
	out := make([]safetensors.Tensor, len(s.infos))
	for i, t := range s.infos {
		out[i] = safetensors.Tensor{Name: t.Name, DType: safetensors.DType(t.DType), Shape: t.Shape, Data: s.data[i]}
	}
	return out
}

// mixedSource has several dtypes, unsorted names, a scalar and an empty tensor.
func mixedSource() *memSource {
	s := &memSource{}
	s.add("model.layers.1.mlp.weight", safetensors.F32, 3, 5)
	s.add("model.embed_tokens.weight", safetensors.BF16, 7, 4)
	s.add("adamw_m/lm_head.weight", safetensors.F32, 4, 2)
	s.add("step", safetensors.I64)
	s.add("mask", safetensors.BOOL, 9)
	s.add("empty", safetensors.F16, 0, 3)
	s.add("rng", safetensors.U8, 16)
	s.add("名前 \"quoted\"\n", safetensors.F64, 2)
	return s
}

// TestSafetensorsFileBytes: the staged file is byte for byte what internal/safetensors writes for
// the same tensors and metadata, and every tensor is staged exactly once.
func TestSafetensorsFileBytes(t *testing.T) {
	for _, md := range []map[string]string{nil, {}, {"format": "pt", "step": "7"}} {
		src := mixedSource()
		f, err := SafetensorsFile("model.safetensors", src, md)
		if err != nil {
			t.Fatal(err)
		}
		if !f.Live || f.Name != "model.safetensors" {
			t.Fatalf("file %q, Live %v", f.Name, f.Live)
		}
		var got, want bytes.Buffer
		if err := f.WriteTo(&got); err != nil {
			t.Fatal(err)
		}
		if err := safetensors.Write(&want, src.specs(), md); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			t.Fatalf("metadata %v: staged file differs from safetensors.Write:\n%q\n%q", md, got.Bytes(), want.Bytes())
		}
		seen := map[int]int{}
		for _, i := range src.calls {
			seen[i]++
		}
		if len(src.calls) != len(src.infos) || len(seen) != len(src.infos) {
			t.Fatalf("Stage calls %v for %d tensors", src.calls, len(src.infos))
		}
		// A second WriteTo stages again and writes the same bytes.
		var again bytes.Buffer
		if err := f.WriteTo(&again); err != nil || !bytes.Equal(again.Bytes(), want.Bytes()) {
			t.Fatalf("second WriteTo: %v", err)
		}
	}
}

// TestSafetensorsFileInvalid: what the strict reader would refuse is refused when the file is
// made, before anything is staged.
func TestSafetensorsFileInvalid(t *testing.T) {
	huge := math.MaxInt64/4 + 1 // one F32 tensor of this many elements overflows int64 bytes
	half := math.MaxInt64/2 + 1 // two U8 tensors of this many bytes overflow the file
	cases := []struct {
		name  string
		file  string
		infos []TensorInfo
		want  string
	}{
		{"empty name", "m.safetensors", []TensorInfo{{Name: "", DType: "F32", Shape: []int{1}}}, "empty tensor name"},
		{"reserved", "m.safetensors", []TensorInfo{{Name: "__metadata__", DType: "F32"}}, "reserved"},
		{"utf8", "m.safetensors", []TensorInfo{{Name: "a\xff", DType: "F32"}}, "UTF-8"},
		{"duplicate", "m.safetensors", []TensorInfo{{Name: "a", DType: "F32"}, {Name: "a", DType: "I64"}}, "duplicate"},
		{"dtype", "m.safetensors", []TensorInfo{{Name: "a", DType: "F4"}}, "F4"},
		{"dtype case", "m.safetensors", []TensorInfo{{Name: "a", DType: "f32"}}, "f32"},
		{"negative", "m.safetensors", []TensorInfo{{Name: "a", DType: "F32", Shape: []int{2, -1}}}, "negative"},
		{"overflow", "m.safetensors", []TensorInfo{{Name: "a", DType: "F32", Shape: []int{huge}}}, "overflows"},
		{"file overflow", "m.safetensors", []TensorInfo{{Name: "a", DType: "U8", Shape: []int{half}}, {Name: "b", DType: "U8", Shape: []int{half}}}, "overflow the file"},
		{"file name", "../m.safetensors", []TensorInfo{{Name: "a", DType: "F32"}}, "m.safetensors"},
	}
	for _, c := range cases {
		src := &memSource{infos: c.infos}
		_, err := SafetensorsFile(c.file, src, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
		if len(src.calls) != 0 {
			t.Errorf("%s: staged %v", c.name, src.calls)
		}
	}
	many := &memSource{infos: make([]TensorInfo, safetensors.MaxTensors+1)}
	if _, err := SafetensorsFile("m.safetensors", many, nil); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("%d tensors: %v", len(many.infos), err)
	}
}

// liveSnapshot is a snapshot of step holding src as model.safetensors and the small files.
func liveSnapshot(t *testing.T, step int, src TensorSource, more ...File) Snapshot {
	t.Helper()
	f, err := SafetensorsFile("model.safetensors", src, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	snap := sample(step)
	snap.Files[0] = f
	snap.Files = append(snap.Files, more...)
	return snap
}

// readTensor reads one tensor of a committed checkpoint, verified by Open.
func readTensor(t *testing.T, dir, file, name string) []byte {
	t.Helper()
	if _, err := Open(dir, file); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := f.Bytes(name)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(b)
}

// TestSaveStagesBeforeReturn: Save returns once every tensor is staged — the trainer then
// dispatches steps that donate the buffers — while the rest of the save (another file still
// blocked, fsyncs, manifest, commit) goes on in the background.
func TestSaveStagesBeforeReturn(t *testing.T) {
	out := t.TempDir()
	w, err := NewWriter(WriterConfig{OutputDir: out})
	if err != nil {
		t.Fatal(err)
	}
	src := mixedSource()
	want := bytes.Clone(src.data[0])
	release := make(chan struct{})
	var slowRan atomic.Bool
	slow := File{Name: "slow.json", WriteTo: func(w io.Writer) error {
		<-release
		slowRan.Store(true)
		_, err := io.WriteString(w, "{}\n")
		return err
	}}
	if err := w.Save(context.Background(), liveSnapshot(t, 1, src, slow)); err != nil {
		t.Fatal(err)
	}
	// Save returned with the non-Live file still blocked, every tensor staged.
	if slowRan.Load() {
		t.Fatal("Save waited for a non-Live file")
	}
	if len(src.calls) != len(src.infos) {
		t.Fatalf("Save returned after staging %d of %d tensors", len(src.calls), len(src.infos))
	}
	// Training goes on: the next step donates (overwrites) the device buffers.
	src.donated.Store(true)
	for _, d := range src.data {
		for j := range d {
			d[j] = 0xee
		}
	}
	close(release)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := src.lateStage.Load(); n != 0 {
		t.Fatalf("%d Stage calls after Save returned", n)
	}
	dir := filepath.Join(out, "checkpoint-1")
	if got := readTensor(t, dir, "model.safetensors", src.infos[0].Name); !bytes.Equal(got, want) {
		t.Fatalf("checkpoint holds %v, want the state at Save %v", got, want)
	}
}

// TestSaveStageFailure: a Stage failing at one tensor fails the save, naming the tensor: Save
// returns the error (once), no checkpoint of the step appears, the earlier checkpoint — even
// one of the same step, being re-saved — stays intact, nothing is left behind and the writer
// goes on.
func TestSaveStageFailure(t *testing.T) {
	out := t.TempDir()
	if _, err := Commit(out, sample(1)); err != nil {
		t.Fatal(err)
	}
	before := readTensor(t, filepath.Join(out, "checkpoint-1"), "model.safetensors", "w")
	w, err := NewWriter(WriterConfig{OutputDir: out})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []int{2, 1} {
		src := mixedSource()
		src.failAt = "model.layers.1.mlp.weight" // the fourth tensor in file order
		err := w.Save(context.Background(), liveSnapshot(t, step, src))
		if err == nil || !strings.Contains(err.Error(), `"model.layers.1.mlp.weight"`) || !strings.Contains(err.Error(), "injected") {
			t.Fatalf("step %d: Save with a failing Stage: %v", step, err)
		}
		t.Logf("step %d: %v", step, err)
		if len(src.calls) != 4 {
			t.Errorf("step %d: Stage called for %v; want the tensors up to the failing one (F64, I64, F32 adamw_m, F32 model.layers)", step, src.calls)
		}
		assertOnly(t, out, "checkpoint-1")
		if got := readTensor(t, filepath.Join(out, "checkpoint-1"), "model.safetensors", "w"); !bytes.Equal(got, before) {
			t.Fatalf("checkpoint-1 changed: %v, was %v", got, before)
		}
	}
	// The error was reported by Save, not again; the writer saves the next snapshot.
	if err := w.Save(context.Background(), liveSnapshot(t, 3, mixedSource())); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	assertOnly(t, out, "checkpoint-1", "checkpoint-3")
	if l, err := List(out); err != nil || len(l) != 2 {
		t.Fatalf("List = %v, %v", l, err)
	}

	// The same through Commit.
	src := mixedSource()
	src.failAt = "step"
	if _, err := Commit(out, liveSnapshot(t, 4, src)); err == nil || !strings.Contains(err.Error(), `"step"`) {
		t.Fatalf("Commit: %v", err)
	}
	assertOnly(t, out, "checkpoint-1", "checkpoint-3")
}

// TestSaveStageContext: Stage gets Save's context; cancelling it fails the save cleanly.
func TestSaveStageContext(t *testing.T) {
	out := t.TempDir()
	w, err := NewWriter(WriterConfig{OutputDir: out})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	src := &cancelSource{memSource: mixedSource(), cancel: cancel, at: 2}
	err = w.Save(ctx, liveSnapshot(t, 1, src))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Save cancelled while staging: %v", err)
	}
	if len(src.calls) != 3 {
		t.Fatalf("Stage calls %v after the cancellation at the third", src.calls)
	}
	assertOnly(t, out)
}

type cancelSource struct {
	*memSource
	cancel func()
	at     int
}

func (s *cancelSource) Stage(ctx context.Context, i int, dst []byte) error {
	if len(s.calls) == s.at {
		s.cancel()
	}
	return s.memSource.Stage(ctx, i, dst)
}

// TestSaveStagedMultiHost: in a job of two hosts each host's Save returns once its tensors are
// staged, and the primary commits both hosts' files.
func TestSaveStagedMultiHost(t *testing.T) {
	out := t.TempDir()
	hosts := Hosts{Count: 2, RunID: "5a6e"}
	var ws [2]*Writer
	var srcs [2]*memSource
	for h := range 2 {
		hosts.Host = h
		var err error
		if ws[h], err = NewWriter(WriterConfig{OutputDir: out, Hosts: hosts, NoElection: true}); err != nil {
			t.Fatal(err)
		}
	}
	for h := range 2 {
		srcs[h] = mixedSource()
		f, err := SafetensorsFile(fmt.Sprintf("model-%d.safetensors", h), srcs[h], nil)
		if err != nil {
			t.Fatal(err)
		}
		files := []File{f}
		if h == 0 {
			files = append(files, File{Name: "trainer_state.json", Data: []byte("{}\n")})
		}
		if err := ws[h].Save(context.Background(), Snapshot{Step: 5, Files: files}); err != nil {
			t.Fatal(err)
		}
		if len(srcs[h].calls) != len(srcs[h].infos) {
			t.Fatalf("host %d: Save returned after staging %v", h, srcs[h].calls)
		}
	}
	for h := 1; h >= 0; h-- {
		if err := ws[h].Close(); err != nil {
			t.Fatal(err)
		}
	}
	ck, err := Open(filepath.Join(out, "checkpoint-5"), "model-0.safetensors", "model-1.safetensors", "trainer_state.json")
	if err != nil {
		t.Fatal(err)
	}
	_ = ck
}

// bigSource is n tensors of 4 MiB and one of 16 MiB, as F32 (n = 32: 144 MiB in all).
func bigSource(n int) *memSource {
	s := &memSource{}
	for i := range n {
		s.add(fmt.Sprintf("layers.%02d.weight", i), safetensors.F32, 1024, 1024)
	}
	s.add("embed.weight", safetensors.F32, 4096, 1024)
	return s
}

// allocDuring returns the bytes allocated on the Go heap while f runs.
func allocDuring(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// TestSaveStagingMemory measures the host memory a save takes beyond the tensors' own (device)
// memory: every byte the Go heap allocates while the file is written (TotalAlloc, an upper bound
// on what is live at once). Staging tensor by tensor costs the largest tensor, plus the write
// path's buffers, not the sum of the tensors that staging everything first (what the trainer
// does today) costs; the files of a save share the buffers.
func TestSaveStagingMemory(t *testing.T) {
	src := bigSource(32)
	var sum, largest uint64
	for _, d := range src.data {
		sum += uint64(len(d))
		largest = max(largest, uint64(len(d)))
	}
	const mib = 1 << 20
	const slack = 1 * mib
	f, err := SafetensorsFile("model.safetensors", src, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}

	// WriteTo alone, into a write buffer allocated beforehand.
	bw := bufio.NewWriterSize(io.Discard, hashChunk)
	writeTo := allocDuring(func() {
		if err := f.WriteTo(bw); err != nil {
			t.Fatal(err)
		}
	})
	if writeTo > largest+slack {
		t.Errorf("WriteTo allocated %d bytes; want at most the largest tensor (%d) + %d", writeTo, largest, slack)
	}

	// A whole save through a Writer (Sync: Save returns once committed) of this file, a second
	// one (48 MiB, its largest tensor 16 MiB too) and a small one: the write buffer and the copy
	// the checksum runs on (hashChunk each) come on top, once.
	out := t.TempDir()
	w, err := NewWriter(WriterConfig{OutputDir: out, Sync: true, NoElection: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	opt, err := SafetensorsFile("optimizer.safetensors", bigSource(8), nil)
	if err != nil {
		t.Fatal(err)
	}
	snap := Snapshot{Step: 1, Files: []File{f, opt, {Name: "trainer_state.json", Data: []byte("{}\n")}}}
	save := allocDuring(func() {
		if err := w.Save(context.Background(), snap); err != nil {
			t.Fatal(err)
		}
	})
	writeBuffers := uint64(2 * hashChunk)
	if save > largest+writeBuffers+slack {
		t.Errorf("a save allocated %d bytes; want at most the largest tensor (%d) + the write buffers (%d) + %d",
			save, largest, writeBuffers, slack)
	}

	// Today's path for comparison: every tensor copied to the host first, then written.
	host := allocDuring(func() {
		specs := src.specs()
		for i := range specs {
			specs[i].Data = bytes.Clone(specs[i].Data)
		}
		if err := safetensors.Write(bw, specs, map[string]string{"format": "pt"}); err != nil {
			t.Fatal(err)
		}
	})
	if host < sum {
		t.Errorf("staging everything allocated %d bytes, less than the tensors' %d", host, sum)
	}
	t.Logf("%d tensors, %.0f MiB in all, largest %.0f MiB: WriteTo allocated %.2f MiB; a whole save (+ a 48 MiB file) %.2f MiB (write buffers %.0f MiB); staging everything first %.2f MiB",
		len(src.infos), float64(sum)/mib, float64(largest)/mib, float64(writeTo)/mib, float64(save)/mib, float64(writeBuffers)/mib, float64(host)/mib)

	// The file is what the tensors hold.
	got := readTensor(t, filepath.Join(out, "checkpoint-1"), "model.safetensors", "embed.weight")
	if !bytes.Equal(got, src.data[len(src.data)-1]) {
		t.Fatal("embed.weight differs")
	}
}
