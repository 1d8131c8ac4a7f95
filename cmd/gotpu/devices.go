package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/gotpu/gotpu/internal/cli"
	"github.com/gotpu/gotpu/xla"
)

// runDevices implements `gotpu devices`.
//
// Text output, one "key  value" line each, then one line per device:
//
//	backend      go
//	description  Simple Go Portable Backend
//	plugin       none
//	xla          compiled in
//	devices      2
//	  0  go  virtual device 0 of 2 on the host CPU (pure Go)
//	  1  go  virtual device 1 of 2 on the host CPU (pure Go)
//
// With --json, one JSON object: xla.Info's fields (backend, description, plugin (null or
// {kind, path}), num_devices, devices [{index, kind, virtual, description}], xla_compiled_in).
func runDevices(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("devices")
	var dev deviceFlags
	dev.register(fs)
	asJSON := fs.Bool("json", false, "print one JSON object instead of text")
	if err := parse(fs, args, stderr, "[--device auto|tpu|cuda|cpu|go] [--num_devices N] [--plugin_path P] [--json]"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.UsageError("unexpected arguments %q", fs.Args())
	}
	cfg := dev.config()
	if err := cfg.Validate(); err != nil {
		return cli.UsageError("%v", err)
	}
	rt, err := xla.Open(ctx, cfg)
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
	}
	xlaState := "compiled in"
	if !info.XLACompiled {
		xlaState = "not compiled in (built with -tags noxla)"
	}
	fmt.Fprintf(stdout, "backend      %s\ndescription  %s\nplugin       %s\nxla          %s\ndevices      %d\n",
		info.Backend, info.Description, plugin, xlaState, info.NumDevices)
	for _, d := range info.Devices {
		fmt.Fprintf(stdout, "  %d  %s  %s\n", d.Index, d.Kind, d.Description)
	}
	return nil
}
