package compilecache

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// The environment of TestHelperPutter's processes.
const (
	envPutterDir  = "GOTPU_COMPILECACHE_TEST_PUTTER_DIR"
	envPutterName = "GOTPU_COMPILECACHE_TEST_PUTTER_NAME"
	putterRounds  = 50
	putterBytes   = 256 << 10
)

// putterPayload is the payload writer name puts in round i: distinct for every writer and round,
// and recognisable whole (isPutterPayload), so that a mix of two shows.
func putterPayload(name string, i int) []byte {
	tag := fmt.Sprintf("%s-%02d|", name, i)
	p := make([]byte, putterBytes)
	copy(p, tag)
	seed := byte(len(name)*31 + i)
	for j := len(tag); j < len(p); j++ {
		p[j] = seed + byte(j) + name[0]
	}
	return p
}

// isPutterPayload reports whether p is exactly some round's payload of writer a or b.
func isPutterPayload(p []byte) bool {
	for _, name := range []string{"a", "b"} {
		for i := range putterRounds {
			if bytes.HasPrefix(p, []byte(fmt.Sprintf("%s-%02d|", name, i))) {
				return bytes.Equal(p, putterPayload(name, i))
			}
		}
	}
	return false
}

var putterKey = testKey("shared-program", "8")

// TestHelperPutter is not a test: TestConcurrentProcesses runs the test binary with it selected
// and the environment set, as a second process writing the cache.
func TestHelperPutter(t *testing.T) {
	dir, name := os.Getenv(envPutterDir), os.Getenv(envPutterName)
	if dir == "" {
		t.Skip("a helper process of TestConcurrentProcesses")
	}
	s, err := Open(Config{Dir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range putterRounds {
		if _, err := s.Put(putterKey, putterPayload(name, i), Meta{Name: name + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConcurrentProcesses: two processes each put the same key 50 times, with payloads of their
// own, while this one reads it in a loop: every hit is one whole payload, never a mix, no read
// finds a torn or corrupt file (nothing is logged), and the final file is one of the last
// payloads, valid.
func TestConcurrentProcesses(t *testing.T) {
	s, logs := openStore(t, "", 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for _, name := range []string{"a", "b"} {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperPutter$", "-test.count=1")
		cmd.Env = append(os.Environ(), envPutterDir+"="+s.Dir(), envPutterName+"="+name)
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	done := make(chan error, len(cmds))
	for _, cmd := range cmds {
		go func() { done <- cmd.Wait() }()
	}
	gets, hits, finished := 0, 0, 0
	for finished < len(cmds) {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("writer process: %v", err)
			}
			finished++
			continue
		default:
		}
		p, _, ok := s.Get(putterKey)
		gets++
		if ok {
			hits++
			if !isPutterPayload(p) {
				t.Fatalf("Get returned %d bytes that are no writer's payload (starting %q)", len(p), p[:min(len(p), 8)])
			}
		}
	}
	for i, out := range outs {
		if t.Failed() {
			t.Logf("writer %d output:\n%s", i, out)
		}
	}
	t.Logf("%d Gets while the writers ran, %d hits", gets, hits)
	if hits == 0 {
		t.Error("no Get hit while the writers ran")
	}
	if logs.String() != "" {
		t.Errorf("reads logged problems:\n%s", logs.String())
	}
	p, e, ok := s.Get(putterKey)
	if !ok || !(bytes.Equal(p, putterPayload("a", putterRounds-1)) || bytes.Equal(p, putterPayload("b", putterRounds-1))) {
		t.Errorf("final entry: ok=%v, name %q; want a writer's last payload", ok, e.Name)
	}
	if list, err := s.List(); err != nil || len(list) != 1 || list[0].Problem != "" {
		t.Errorf("List after the writers: %+v, %v; want one valid entry and no temporary files", list, err)
	}
}
