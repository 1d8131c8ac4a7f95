//go:build !noxla

package xla

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestPJRTABIMatchesGoXLAHeader compiles gotpu's own PJRT declarations (pjrt_abi.h) next to the
// pjrt_c_api.h that go-xla builds with and has the C compiler check, with static assertions,
// that every table position, field offset and struct size the compilation cache uses is the
// C API's. A wrong position would call the wrong plugin function.
func TestPJRTABIMatchesGoXLAHeader(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc): the cgo build needs one anyway")
	}
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/gomlx/go-xla").Output()
	if err != nil {
		t.Fatalf("go list -m github.com/gomlx/go-xla: %v", err)
	}
	goxla := filepath.Join(strings.TrimSpace(string(out)), "pkg", "pjrt")
	if _, err := os.Stat(filepath.Join(goxla, "pjrt_c_api.h")); err != nil {
		t.Fatalf("go-xla's header: %v", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	var src bytes.Buffer
	src.WriteString("#include <stddef.h>\n#include \"pjrt_c_api.h\"\n#include \"pjrt_abi.h\"\n")
	assert := func(cond, what string) {
		fmt.Fprintf(&src, "_Static_assert(%s, %q);\n", cond, what)
	}
	for _, fn := range []string{"Error_Destroy", "Error_Message", "Client_Compile", "Executable_Destroy", "Executable_Name",
		"Executable_Serialize", "LoadedExecutable_Destroy", "LoadedExecutable_GetExecutable", "Executable_DeserializeAndLoad"} {
		assert(fmt.Sprintf("offsetof(PJRT_Api, PJRT_%s) == offsetof(gotpu_PJRT_Api, fn) + GOTPU_PJRT_%s * sizeof(void*)", fn, fn),
			"table position of PJRT_"+fn)
	}
	assert("offsetof(PJRT_Api, PJRT_Executable_DeserializeAndLoad) + sizeof(void*) == offsetof(gotpu_PJRT_Api, fn) + GOTPU_PJRT_FN_NEEDED * sizeof(void*)",
		"GOTPU_PJRT_FN_NEEDED ends at PJRT_Executable_DeserializeAndLoad")
	assert("offsetof(PJRT_Api, pjrt_api_version) == offsetof(gotpu_PJRT_Api, pjrt_api_version)", "PJRT_Api.pjrt_api_version")
	structs := map[string][]string{
		"Api_Version":                         {"major_version", "minor_version"},
		"Program":                             {"code", "code_size", "format", "format_size"},
		"Client_Compile_Args":                 {"client", "program", "compile_options", "compile_options_size", "executable"},
		"Error_Destroy_Args":                  {"error"},
		"Error_Message_Args":                  {"error", "message", "message_size"},
		"LoadedExecutable_GetExecutable_Args": {"loaded_executable", "executable"},
		"Executable_Destroy_Args":             {"executable"},
		"Executable_Name_Args":                {"executable", "executable_name", "executable_name_size"},
		"LoadedExecutable_Destroy_Args":       {"executable"},
		"Executable_Serialize_Args":           {"executable", "serialized_bytes", "serialized_bytes_size", "serialized_executable", "serialized_executable_deleter"},
		"Executable_DeserializeAndLoad_Args": {"client", "serialized_executable", "serialized_executable_size", "loaded_executable",
			"overridden_serialized_compile_options", "overridden_serialized_compile_options_size"},
	}
	for s, fields := range structs {
		assert(fmt.Sprintf("sizeof(PJRT_%s) == sizeof(gotpu_PJRT_%s)", s, s), "size of PJRT_"+s)
		for _, f := range append([]string{"struct_size", "extension_start"}, fields...) {
			assert(fmt.Sprintf("offsetof(PJRT_%s, %s) == offsetof(gotpu_PJRT_%s, %s)", s, f, s, f), "PJRT_"+s+"."+f)
		}
	}
	file := filepath.Join(t.TempDir(), "abi.c")
	if err := os.WriteFile(file, src.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cc, "-std=c11", "-fsyntax-only", "-I", goxla, "-I", wd, file)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gotpu's PJRT declarations differ from go-xla's pjrt_c_api.h: %v\n%s", err, msg)
	}
	t.Logf("%d static assertions hold against %s", strings.Count(src.String(), "_Static_assert"), filepath.Join(goxla, "pjrt_c_api.h"))
}
