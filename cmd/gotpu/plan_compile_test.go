package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPlanCompileNeedsPJRTPlugin: --compile on the pure-Go backend is a usage error naming the
// flag and saying that the compiler's figures need a PJRT plugin, not a plan without them; so is
// --compile with a plan target for --device, and --num_devices without --compile.
func TestPlanCompileNeedsPJRTPlugin(t *testing.T) {
	gpt2 := filepath.Join("..", "..", "testdata", "models", "gpt2-tiny")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--compile", "--device", "go"}, []string{"--compile", "PJRT plugin", "--device go"}},
		{[]string{"--compile"}, []string{"--compile needs --device"}},
		{[]string{"--compile", "--device", "v5e-8"}, []string{"--compile --device v5e-8", "not a plan target"}},
		{[]string{"--num_devices", "8"}, []string{"--num_devices", "add --compile"}},
	} {
		out, errOut, code := runPlanCLI(t, append([]string{"--model", gpt2}, c.args...)...)
		if code != 2 || out != "" {
			t.Errorf("plan %v: exit %d, stdout %q; want usage error (2) and nothing printed", c.args, code, out)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("plan %v: stderr lacks %q:\n%s", c.args, w, errOut)
			}
		}
	}
}
