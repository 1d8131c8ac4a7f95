package data

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// tokenOf encodes (example, index) in a token id so a packed row can be traced back.
func tokenOf(ex, j int) int32 { return int32(ex*1000 + j) }

// examplesOfLengths makes example i of lengths[i] tokens tokenOf(i, j), labels nil.
func examplesOfLengths(lengths []int) []Example {
	out := make([]Example, len(lengths))
	for i, n := range lengths {
		out[i].InputIDs = make([]int32, n)
		for j := range n {
			out[i].InputIDs[j] = tokenOf(i, j)
		}
	}
	return out
}

// rowExamples is the sequence of example indices a packed row holds, read from its tokens and
// position ids (a new example wherever the position is 0).
func rowExamples(t testing.TB, row Example) []int {
	t.Helper()
	var out []int
	for j, tok := range row.InputIDs {
		if row.PositionIDs[j] == 0 {
			out = append(out, int(tok)/1000)
		}
	}
	return out
}

// TestPackBFDMatchesTRLDocstring is the example of TRL's pack_dataset docstring (strategy "bfd",
// seq_length 4): rows [[1,2,3,4], [8,9,10,11], [6,7]], seq_lengths [[4], [3,1], [2]].
func TestPackBFDMatchesTRLDocstring(t *testing.T) {
	in := []Example{
		{InputIDs: []int32{1, 2, 3, 4, 5}, AttentionMask: []int32{1, 1, 1, 0, 0}},
		{InputIDs: []int32{6, 7}, AttentionMask: []int32{1, 0}},
		{InputIDs: []int32{8, 9, 10}, AttentionMask: []int32{1, 1, 0}},
		{InputIDs: []int32{11}, AttentionMask: []int32{1}},
	}
	rows, st, err := PackBFDWithStats(in, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := []Example{
		{InputIDs: []int32{1, 2, 3, 4}, AttentionMask: []int32{1, 1, 1, 0}, PositionIDs: []int32{0, 1, 2, 3}, Labels: []int32{1, 2, 3, 4}},
		{InputIDs: []int32{8, 9, 10, 11}, AttentionMask: []int32{1, 1, 0, 1}, PositionIDs: []int32{0, 1, 2, 0}, Labels: []int32{8, 9, 10, 11}},
		{InputIDs: []int32{6, 7}, AttentionMask: []int32{1, 0}, PositionIDs: []int32{0, 1}, Labels: []int32{6, 7}},
	}
	if fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Fatalf("rows\n%v\nwant (TRL)\n%v", rows, want)
	}
	wantSt := PackStats{Examples: 4, Truncated: 1, TruncatedTokens: 1, Rows: 3, Tokens: 10, MaxLength: 4}
	if st != wantSt {
		t.Fatalf("stats %+v, want %+v", st, wantSt)
	}
	if got := st.PaddingFraction(); math.Abs(got-2.0/12) > 1e-15 {
		t.Fatalf("padding fraction %v, want 2/12", got)
	}
}

// TestPackBFDMatchesTRLBins compares the rows with those of TRL's _pack_bfd binning loop (its
// _SegmentTree and deque code run verbatim in Python, pyarrow's stable sort as sorted()) on 40
// lengths drawn with Python's random.seed(21), seq_length 32: empties dropped, 40s truncated, ties
// kept in input order, best fit with FIFO among equal spaces.
func TestPackBFDMatchesTRLBins(t *testing.T) {
	lengths := []int{7, 31, 31, 13, 40, 8, 40, 7, 8, 0, 0, 17, 31, 2, 5, 8, 8, 1, 31, 31, 32, 1, 16, 40, 3, 17, 0, 5, 2, 3, 0, 32, 7, 16, 20, 40, 5, 7, 1, 40}
	want := [][]int{{4}, {6}, {20}, {23}, {31}, {35}, {39}, {1, 17}, {2, 21}, {12, 38}, {18}, {19}, {34, 5, 24},
		{11, 3, 13}, {25, 8, 0}, {22, 33}, {15, 16, 7, 32, 28}, {37, 14, 27, 36, 29}}
	rows, st, err := PackBFDWithStats(examplesOfLengths(lengths), 32)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]int
	for _, r := range rows {
		got = append(got, rowExamples(t, r))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rows hold examples\n%v\nTRL's\n%v", got, want)
	}
	if st.Skipped != 4 || st.Truncated != 5 || st.TruncatedTokens != 5*8 || st.Rows != len(want) {
		t.Fatalf("stats %+v", st)
	}
}

// TestPackBFDOptimalHandCase: 40 tokens into rows of 10 fill exactly 4 rows (the optimum), where
// taking the examples in their input order and opening a row when the next does not fit (what a
// naive packer does) needs 6. Best fit also prefers the tighter row: 3 goes to the row with 3
// left, not to the earlier one with 4.
func TestPackBFDOptimalHandCase(t *testing.T) {
	lengths := []int{6, 5, 7, 3, 8, 4, 5, 2}
	rows, err := PackBFD(examplesOfLengths(lengths), 10)
	if err != nil {
		t.Fatal(err)
	}
	// Decreasing: 8(#4) 7(#2) 6(#0) 5(#1) 5(#6) 4(#5) 3(#3) 2(#7).
	want := [][]int{{4, 7}, {2, 3}, {0, 5}, {1, 6}}
	var got [][]int
	for _, r := range rows {
		got = append(got, rowExamples(t, r))
		if len(r.InputIDs) != 10 {
			t.Errorf("row %v has %d tokens, want a full row of 10", rowExamples(t, r), len(r.InputIDs))
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	naive, used := 1, 0
	for _, n := range lengths {
		if used+n > 10 {
			naive, used = naive+1, 0
		}
		used += n
	}
	if naive != 6 {
		t.Fatalf("the naive in-order packing needs %d rows; the case is meant to need 6", naive)
	}
}

func TestPackBFDRowContents(t *testing.T) {
	in := []Example{
		{InputIDs: []int32{1, 2, 3}, Labels: []int32{IgnoreIndex, IgnoreIndex, 3}},
		{InputIDs: []int32{4, 5}, TokenTypeIDs: []int32{1, 1}},
		{InputIDs: []int32{6, 7, 8, 9}, PositionIDs: []int32{0, 1, 0, 1}}, // already packed
	}
	rows, err := PackBFD(in, 9)
	if err != nil {
		t.Fatal(err)
	}
	want := Example{
		InputIDs:     []int32{6, 7, 8, 9, 1, 2, 3, 4, 5},
		Labels:       []int32{6, 7, 8, 9, IgnoreIndex, IgnoreIndex, 3, 4, 5},
		PositionIDs:  []int32{0, 1, 0, 1, 0, 1, 2, 0, 1},
		TokenTypeIDs: []int32{0, 0, 0, 0, 0, 0, 0, 1, 1},
	}
	if len(rows) != 1 || fmt.Sprintf("%+v", rows[0]) != fmt.Sprintf("%+v", want) {
		t.Fatalf("rows %+v\nwant [%+v]", rows, want)
	}
}

func TestPackBFDErrors(t *testing.T) {
	ok := Example{InputIDs: []int32{1, 2}}
	for _, tc := range []struct {
		ex   Example
		max  int
		want string
	}{
		{ok, 0, "maxLength 0"},
		{Example{InputIDs: []int32{1, 2}, Labels: []int32{1}}, 4, "example 1: labels: 1 values"},
		{Example{InputIDs: []int32{1, 2}, AttentionMask: []int32{1}}, 4, "example 1: attention_mask"},
		{Example{InputIDs: []int32{1, 2}, PositionIDs: []int32{0, 2}}, 4, "example 1: position_ids: [1]: 2 after 0"},
		{Example{InputIDs: []int32{1}, Label: 1, HasLabel: true}, 4, "example 1: has a sequence label"},
	} {
		_, err := PackBFD([]Example{ok, tc.ex}, tc.max)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err = %v, want mention of %q", err, tc.want)
		}
	}
	rows, st, err := PackBFDWithStats([]Example{{}, {InputIDs: []int32{}}}, 4)
	if err != nil || len(rows) != 0 || st.Skipped != 2 || st.PaddingFraction() != 0 {
		t.Fatalf("only empty examples: rows %v, stats %+v, err %v", rows, st, err)
	}
}

// refBFD is best-fit decreasing written the plain way, as the specification TRL's segment tree
// and deques implement: longest first (stable), into the open row with the least space that fits,
// among equals the one that reached that space first, else a new row.
func refBFD(lengths []int, maxLength int) [][]int {
	var idx []int
	for i, n := range lengths {
		if n > 0 {
			idx = append(idx, i)
		}
	}
	size := func(i int) int { return min(lengths[i], maxLength) }
	slices.SortStableFunc(idx, func(a, b int) int { return size(b) - size(a) })
	type bin struct {
		space, reached int
		ids            []int
	}
	var bins []*bin
	for t, i := range idx {
		n := size(i)
		var best *bin
		for _, b := range bins {
			if b.space >= n && (best == nil || b.space < best.space || b.space == best.space && b.reached < best.reached) {
				best = b
			}
		}
		if best == nil {
			best = &bin{space: maxLength}
			bins = append(bins, best)
		}
		best.ids = append(best.ids, i)
		best.space -= n
		best.reached = t
	}
	out := make([][]int, len(bins))
	for k, b := range bins {
		out[k] = b.ids
	}
	return out
}

// checkPacking checks PackBFD's invariants on examples of the given lengths: each non-empty
// example appears exactly once, whole (up to maxLength) and in order, rows are at most maxLength,
// positions restart at 0 per example, labels are the inputs, the rows are refBFD's, and the
// stats add up.
func checkPacking(t *testing.T, lengths []int, maxLength int) {
	t.Helper()
	in := examplesOfLengths(lengths)
	rows, st, err := PackBFDWithStats(in, maxLength)
	if err != nil {
		t.Fatal(err)
	}
	seen := make([]int, len(lengths))
	var got [][]int
	tokens := 0
	for r, row := range rows {
		n := len(row.InputIDs)
		if n == 0 || n > maxLength || len(row.Labels) != n || len(row.PositionIDs) != n || row.AttentionMask != nil {
			t.Fatalf("row %d: %d tokens (max %d), %d labels, %d positions, mask %v", r, n, maxLength, len(row.Labels), len(row.PositionIDs), row.AttentionMask)
		}
		if err := CheckPositionIDs(row.PositionIDs); err != nil {
			t.Fatalf("row %d: %v", r, err)
		}
		tokens += n
		got = append(got, rowExamples(t, row))
		for j, tok := range row.InputIDs {
			ex, k := int(tok)/1000, int(tok)%1000
			if int(row.PositionIDs[j]) != k || row.Labels[j] != tok {
				t.Fatalf("row %d [%d]: token %d at position %d label %d: example %d's token %d out of place", r, j, tok, row.PositionIDs[j], row.Labels[j], ex, k)
			}
			seen[ex]++
		}
	}
	for i, n := range lengths {
		if seen[i] != min(n, maxLength) {
			t.Fatalf("example %d (%d tokens) appears %d times, want %d", i, n, seen[i], min(n, maxLength))
		}
	}
	if want := refBFD(lengths, maxLength); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rows %v, best-fit decreasing gives %v", got, want)
	}
	if st.Rows != len(rows) || st.Tokens != tokens || st.Examples+st.Skipped != len(lengths) {
		t.Fatalf("stats %+v for %d rows, %d tokens, %d examples", st, len(rows), tokens, len(lengths))
	}
}

func TestPackBFDInvariantsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 0))
	for range 300 {
		maxLength := 1 + r.IntN(64)
		lengths := make([]int, r.IntN(60))
		for i := range lengths {
			lengths[i] = r.IntN(maxLength + 8)
		}
		checkPacking(t, lengths, maxLength)
	}
}

// FuzzPackBFD: byte 0 is maxLength (1..64), each further byte one example's length (0..79).
func FuzzPackBFD(f *testing.F) {
	f.Add([]byte{31, 7, 31, 31, 13, 40, 8, 40, 7, 8, 0, 0, 17})
	f.Add([]byte{9, 6, 5, 7, 3, 8, 4, 5, 2})
	f.Add([]byte{0, 1, 1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || len(b) > 400 {
			return
		}
		maxLength := 1 + int(b[0])%64
		lengths := make([]int, len(b)-1)
		for i, x := range b[1:] {
			lengths[i] = int(x) % 80
		}
		checkPacking(t, lengths, maxLength)
	})
}

// TestCausalLMCollatorPacked: position ids are copied, the label where a packed example starts
// (other than the row's first) is IgnoreIndex as TRL sets it, padding continues the last
// example's positions, and a row without position ids gets 0..SeqLen-1.
func TestCausalLMCollatorPacked(t *testing.T) {
	packed := Example{InputIDs: []int32{1, 2, 3, 4, 5}, Labels: []int32{1, IgnoreIndex, 3, 4, 5}, PositionIDs: []int32{0, 1, 0, 1, 2}}
	plain := Example{InputIDs: []int32{7, 8}}
	b, err := CausalLMCollator{BlockSize: 7, PadID: 0}.Collate([]Example{packed, plain})
	if err != nil {
		t.Fatal(err)
	}
	wantPos := []int32{0, 1, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5, 6}
	wantLabels := []int32{1, IgnoreIndex, IgnoreIndex, 4, 5, IgnoreIndex, IgnoreIndex, 7, 8, IgnoreIndex, IgnoreIndex, IgnoreIndex, IgnoreIndex, IgnoreIndex}
	if !slices.Equal(b.PositionIDs, wantPos) || !slices.Equal(b.Labels, wantLabels) {
		t.Fatalf("positions %v labels %v\nwant      %v labels %v", b.PositionIDs, b.Labels, wantPos, wantLabels)
	}
	b, err = CausalLMCollator{BlockSize: 4}.Collate([]Example{plain})
	if err != nil || b.PositionIDs != nil {
		t.Fatalf("no example has position ids: PositionIDs %v (want nil), err %v", b.PositionIDs, err)
	}
	bad := Example{InputIDs: []int32{1, 2}, PositionIDs: []int32{1, 2}}
	if _, err := (CausalLMCollator{BlockSize: 4}).Collate([]Example{plain, bad}); err == nil || !strings.Contains(err.Error(), "example 1: position_ids: [0]") {
		t.Fatalf("bad position ids: err = %v", err)
	}
	// A classifier's collator keeps them too, so the model refuses them by name.
	cls := Example{InputIDs: []int32{1, 2}, PositionIDs: []int32{0, 0}, Label: 1, HasLabel: true}
	b, err = BucketCollator{Buckets: []int{4}}.Collate([]Example{cls})
	if err != nil || !slices.Equal(b.PositionIDs, []int32{0, 0, 1, 2}) {
		t.Fatalf("bucket collator: positions %v, err %v", b.PositionIDs, err)
	}
}

// TestPackThenCollate: PackBFD's rows collated have exactly the tokens a loss would count
// example by example — every label but each example's first (the model shifts labels, so an
// example's first label is never a target when it is run alone either).
func TestPackThenCollate(t *testing.T) {
	lengths := []int{3, 9, 5, 12, 4, 7, 2}
	in := examplesOfLengths(lengths)
	in[1].Labels = slices.Clone(in[1].InputIDs)
	for j := range 4 {
		in[1].Labels[j] = IgnoreIndex // a prompt, as an assistant-only mask makes
	}
	rows, err := PackBFD(in, 16)
	if err != nil {
		t.Fatal(err)
	}
	b, err := CausalLMCollator{BlockSize: 16}.Collate(rows)
	if err != nil {
		t.Fatal(err)
	}
	targets := 0
	for r := range b.Size {
		for j := 1; j < b.SeqLen; j++ { // targets: labels[1:], as the model shifts
			if b.Labels[r*b.SeqLen+j] != IgnoreIndex {
				targets++
			}
		}
	}
	want := 0
	for i, n := range lengths {
		want += n - 1
		if i == 1 {
			want -= 3 // labels 1..3 of example 1 are ignored (label 0 is never a target)
		}
	}
	if targets != want {
		t.Fatalf("%d loss targets packed, %d example by example", targets, want)
	}
}

func TestParseExamplePositionIDs(t *testing.T) {
	ex, err := ParseExample([]byte(`{"input_ids": [5, 6, 7, 8], "position_ids": [0, 1, 0, 1]}`))
	if err != nil || !slices.Equal(ex.PositionIDs, []int32{0, 1, 0, 1}) {
		t.Fatalf("%+v, %v", ex, err)
	}
	if ex, err = ParseExample([]byte(`{"input_ids": [5]}`)); err != nil || ex.PositionIDs != nil {
		t.Fatalf("absent position_ids: %+v, %v", ex, err)
	}
	for _, tc := range []struct{ line, want string }{
		{`{"input_ids": [1, 2], "position_ids": [0]}`, "position_ids: 1 values, input_ids has 2"},
		{`{"input_ids": [1, 2], "position_ids": [0, -1]}`, "position_ids: [1]: -1 is negative"},
		{`{"input_ids": [1, 2], "position_ids": [1, 2]}`, "position_ids: [0]: 1, want 0"},
		{`{"input_ids": [1, 2, 3], "position_ids": [0, 1, 3]}`, "position_ids: [2]: 3 after 1"},
		{`{"input_ids": [1], "position_ids": "x"}`, "JSON object"},
	} {
		if _, err := ParseExample([]byte(tc.line)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want mention of %q", tc.line, err, tc.want)
		}
	}
}

// TestTokenStoreKeepsPositionIDs: packed rows go through a TokenStore with their position ids
// (losing them would make the rows one sequence each); bad ones are refused when added.
func TestTokenStoreKeepsPositionIDs(t *testing.T) {
	rows, err := PackBFD(examplesOfLengths([]int{3, 5, 2, 6}), 8)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewTokenStoreBuilder(StoreOptions{Dir: t.TempDir(), Source: "packed"})
	if err != nil {
		t.Fatal(err)
	}
	rows = append(rows, Example{InputIDs: []int32{9}}) // one without: stays nil
	for _, r := range rows {
		if err := b.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Add(Example{InputIDs: []int32{1, 2}, PositionIDs: []int32{0, 5}}); err == nil || !strings.Contains(err.Error(), "position_ids: [1]") {
		t.Fatalf("bad position ids added: err = %v", err)
	}
	s, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i, want := range rows {
		got, err := s.Get(i)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
			t.Fatalf("row %d: stored %+v, read back %+v", i, want, got)
		}
	}
}
