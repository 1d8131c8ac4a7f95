// Command devices is the smallest gotpu program: open the device runtime the way every gotpu
// program does and print what it got.
//
//	go run ./examples/devices -device go -num_devices 8
//	go run ./examples/devices -device go -go_backend simplego
//
// On a Cloud TPU VM with libtpu installed, `-device auto` (the default) prints the TPU devices.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/gotpu/gotpu/xla"
)

func main() {
	cfg := xla.DefaultConfig()
	flag.StringVar(&cfg.Device, "device", cfg.Device, "auto, tpu, cuda, cpu or go")
	flag.IntVar(&cfg.NumDevices, "num_devices", 0, "devices to use (0 = all; any number of virtual devices on go)")
	flag.StringVar(&cfg.GoBackend, "go_backend", "", "pure-Go backend for -device go (and auto without an accelerator): gotpu (the default) or simplego")
	flag.Parse()

	rt, err := xla.Open(context.Background(), cfg)
	if err != nil {
		slog.Error("opening the device runtime", "error", err)
		os.Exit(1)
	}
	defer rt.Close()
	if gb := rt.GoBackend(); gb != "" {
		fmt.Printf("%s backend (%s), %d device(s)\n", rt.Kind(), gb, rt.NumDevices())
	} else {
		fmt.Printf("%s backend, %d device(s)\n", rt.Kind(), rt.NumDevices())
	}
	for _, d := range rt.Devices() {
		fmt.Printf("  %d: %s\n", d.Index, d.Description)
	}
}
