package jinja

import (
	"strings"
	"unicode/utf8"
)

// Python's str.split, rsplit and splitlines. The pieces are counted first, so that the list is
// charged before it is made (a string of 8 MiB of "a\n" is 4 Mi pieces: 192 MiB of list), then
// made straight into the list's values: a separator's by strings.Count, the others' by a walk
// over the pieces, made twice.

// pieceWalk calls yield with each piece in order (for rsplit, from the last), until it returns
// false.
type pieceWalk func(yield func(string) bool)

// pieces makes the list of the pieces of walk over a string of n bytes: a scan of n bytes, then
// one value per piece charged before the list is made. fromEnd says that walk yields the pieces
// from the last (rsplit), so the list is filled from its end.
func (r *renderer) pieces(n int, walk pieceWalk, fromEnd bool) (Value, error) {
	if err := r.bud.scan(n); err != nil {
		return Value{}, err
	}
	count := 0
	walk(func(string) bool { count++; return true })
	if err := r.bud.allocMul(int64(count), valueSize); err != nil {
		return Value{}, err
	}
	items := make([]Value, count)
	i, d := 0, 1
	if fromEnd {
		i, d = count-1, -1
	}
	walk(func(p string) bool {
		items[i] = String(p)
		i += d
		return true
	})
	return List(items...), nil
}

// splitSep is s.split(sep, maxsplit) for a non-empty sep (maxsplit < 0: no limit), or
// s.rsplit(sep, maxsplit) fromRight. Without a walk: the pieces are the separators found plus
// one, and strings.Count finds as many as a search from either end does (the most
// non-overlapping ones), so the list is counted, charged and filled in place.
func (r *renderer) splitSep(s, sep string, maxsplit int, fromRight bool) (Value, error) {
	if err := r.bud.scan(len(s)); err != nil {
		return Value{}, err
	}
	n := strings.Count(s, sep)
	if maxsplit >= 0 && n > maxsplit {
		n = maxsplit
	}
	if err := r.bud.allocMul(int64(n)+1, valueSize); err != nil {
		return Value{}, err
	}
	items := make([]Value, n+1)
	if fromRight {
		// separators found from the right, which differs from split's for overlapping ones
		// ('aaa'.rsplit('aa') is ['a', ''])
		for k := n; k > 0; k-- {
			i := strings.LastIndex(s, sep)
			items[k] = String(s[i+len(sep):])
			s = s[:i]
		}
		items[0] = String(s)
	} else {
		for k := range n {
			i := strings.Index(s, sep)
			items[k] = String(s[:i])
			s = s[i+len(sep):]
		}
		items[n] = String(s)
	}
	return List(items...), nil
}

// splitWS is s.split() (no separator): runs of whitespace separate, at most maxsplit splits
// (negative: no limit), the rest kept whole with its trailing whitespace.
func splitWS(s string, maxsplit int) pieceWalk {
	return func(yield func(string) bool) {
		n, i := 0, 0
		for {
			for i < len(s) {
				r, size := utf8.DecodeRuneInString(s[i:])
				if !pyIsSpace(r) {
					break
				}
				i += size
			}
			if i >= len(s) {
				return
			}
			if maxsplit >= 0 && n == maxsplit {
				yield(s[i:])
				return
			}
			j := i
			for j < len(s) {
				r, size := utf8.DecodeRuneInString(s[j:])
				if pyIsSpace(r) {
					break
				}
				j += size
			}
			if !yield(s[i:j]) {
				return
			}
			n++
			i = j
		}
	}
}

// rsplitWS is s.rsplit() (no separator), from the last piece.
func rsplitWS(s string, maxsplit int) pieceWalk {
	return func(yield func(string) bool) {
		n, j := 0, len(s)
		for {
			for j > 0 {
				r, size := utf8.DecodeLastRuneInString(s[:j])
				if !pyIsSpace(r) {
					break
				}
				j -= size
			}
			if j <= 0 {
				return
			}
			if maxsplit >= 0 && n == maxsplit {
				yield(s[:j])
				return
			}
			i := j
			for i > 0 {
				r, size := utf8.DecodeLastRuneInString(s[:i])
				if pyIsSpace(r) {
					break
				}
				i -= size
			}
			if !yield(s[i:j]) {
				return
			}
			n++
			j = i
		}
	}
}

func isLineBreak(r rune) bool {
	switch r {
	case '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
		return true
	}
	return false
}

// splitLines is s.splitlines(keepends).
func splitLines(s string, keepends bool) pieceWalk {
	return func(yield func(string) bool) {
		start := 0
		for i := 0; i < len(s); {
			r, n := utf8.DecodeRuneInString(s[i:])
			if !isLineBreak(r) {
				i += n
				continue
			}
			end := i + n
			if r == '\r' && end < len(s) && s[end] == '\n' {
				end++
			}
			piece := s[start:i]
			if keepends {
				piece = s[start:end]
			}
			if !yield(piece) {
				return
			}
			start, i = end, end
		}
		if start < len(s) {
			yield(s[start:])
		}
	}
}

// endsWithLineBreak reports whether s's last code point ends a line that s+"\n" would not
// extend: a line break other than a lone '\r' (which the '\n' would join into "\r\n").
func endsWithLineBreak(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && isLineBreak(r) && r != '\r'
}
