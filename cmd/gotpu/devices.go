package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/gotpu/gotpu/internal/cli"
)

// runDevices implements `gotpu devices`.
//
// Text output, one "key  value" line each, then one line per device:
//
//	backend      go (--go_backend gotpu)
//	description  gotpu CPU backend: GEMM (avx512bf16) and float32/bfloat16 elementwise, reductions and comparisons native, other ops on Simple Go Portable Backend
//	plugin       none
//	xla          compiled in
//	devices      2
//	  0  go  virtual device 0 of 2 on the host CPU (pure Go)
//	  1  go  virtual device 1 of 2 on the host CPU (pure Go)
//
// The backend line names the pure-Go backend in use (--go_backend) when the backend is "go"; the
// description is the backend's own (gotpu's names the GEMM kernel picked for this CPU).
//
// With --json, one JSON object: xla.Info's fields (backend, go_backend ("" unless backend is
// "go"), description, plugin (null or {kind, path, pjrt_api_version, attributes}), num_devices, devices [{index, kind, virtual,
// description}], xla_compiled_in).
func runDevices(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("devices")
	var dev deviceFlags
	dev.registerNoCache(fs)
	asJSON := fs.Bool("json", false, "print one JSON object instead of text")
	if err := parse(fs, args, stderr, "[--device auto|tpu|cuda|cpu|go] [--go_backend gotpu|simplego] [--num_devices N] [--plugin_path P] [--json]"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.UsageError("unexpected arguments %q", fs.Args())
	}
	rt, err := dev.open(ctx)
	if err != nil {
		return err
	}
	defer rt.Close()
	info := rt.Info()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		return enc.Encode(info)
	}
	plugin := "none"
	if info.Plugin != nil {
		plugin = fmt.Sprintf("%s %s", info.Plugin.Kind, info.Plugin.Path)
		if info.Plugin.APIVersion != "" {
			plugin += " (PJRT C API " + info.Plugin.APIVersion + ")"
		}
	}
	xlaState := "compiled in"
	if !info.XLACompiled {
		xlaState = "not compiled in (built with -tags noxla)"
	}
	backend := info.Backend
	if info.GoBackend != "" {
		backend = fmt.Sprintf("%s (--go_backend %s)", info.Backend, info.GoBackend)
	}
	fmt.Fprintf(stdout, "backend      %s\ndescription  %s\nplugin       %s\nxla          %s\ndevices      %d\n",
		backend, info.Description, plugin, xlaState, info.NumDevices)
	for _, d := range info.Devices {
		fmt.Fprintf(stdout, "  %d  %s  %s\n", d.Index, d.Kind, d.Description)
	}
	return nil
}
