package hubtest

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// ClosedURL returns an http URL of a loopback port nothing listens on: a Hub that refuses
// connections, or a proxy that makes any request sent through it fail.
func ClosedURL(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// DirFiles reads every regular file under dir (recursively, "/"-separated relative names) into
// the map AddRepo takes: a model directory served as a repo.
func DirFiles(tb testing.TB, dir string) map[string][]byte {
	tb.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		files[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return files
}
