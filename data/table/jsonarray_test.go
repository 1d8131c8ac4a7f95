package table

import "testing"

// TestIsJSONArray: the array-or-lines rule Open uses, on the fixtures and on edge cases (a
// byte-order mark and whitespace first, an empty file).
func TestIsJSONArray(t *testing.T) {
	for _, c := range []struct {
		path string
		want bool
	}{
		{fixture("corpus-array.json"), true},
		{fixture("corpus.jsonl"), false},
		{writeFile(t, "bom.json", "\ufeff \n\t[{\"text\": \"a\"}]"), true},
		{writeFile(t, "lines.json", "\n{\"text\": \"a\"}\n"), false},
		{writeFile(t, "empty.json", ""), false},
	} {
		got, err := IsJSONArray(c.path)
		if err != nil || got != c.want {
			t.Errorf("IsJSONArray(%s) = %v, %v; want %v", c.path, got, err, c.want)
		}
	}
	if _, err := IsJSONArray(fixture("no-such.json")); err == nil {
		t.Error("a missing file: no error")
	}
}
