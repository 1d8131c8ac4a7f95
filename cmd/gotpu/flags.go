package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/gotpu/gotpu/internal/cli"
	"github.com/gotpu/gotpu/xla"
)

// errHelp is returned after printing a command's help; the exit status is 0.
var errHelp = errors.New("help requested")

// newFlagSet returns a flag set for a command, with --help handled.
func newFlagSet(name string) *flag.FlagSet {
	return flag.NewFlagSet("gotpu "+name, flag.ContinueOnError)
}

// parse parses args, printing usage to stderr on --help. Only gotpu download takes positional
// arguments between its flags (REPO_ID FILENAME…); for every other command a word after a
// boolean flag can only be a value meant for it (`--bf16 maybe` is a bad boolean).
func parse(fs *flag.FlagSet, args []string, stderr io.Writer, synopsis string) error {
	var err error
	if fs.Name() == "gotpu download" {
		err = cli.Parse(fs, args)
	} else {
		err = cli.ParseFlagsOnly(fs, args)
	}
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stderr, "Usage: %s %s\n", fs.Name(), synopsis)
		switch fs.Name() {
		case "gotpu train":
			cli.PrintGroups(stderr, fs, trainHelpGroups(), "")
		case "gotpu eval":
			cli.PrintGroups(stderr, fs, evalHelpGroups(), evalHelpRest)
		default:
			fmt.Fprintln(stderr, "\nFlags:")
			cli.PrintDefaults(stderr, fs)
		}
		return errHelp
	}
	return err
}

// deviceFlags are the device-selection flags every command that runs a model takes.
type deviceFlags struct {
	device     string
	numDevices int
	pluginPath string
	goBackend  string
	cache      cacheFlags
	cached     bool // the cache's flags were registered (register, not registerNoCache)
}

func (d *deviceFlags) register(fs *flag.FlagSet) {
	d.registerNoCache(fs)
	d.cache.register(fs)
	d.cached = true
}

// registerNoCache registers the device flags without the compilation cache's, for commands that
// compile nothing (devices): there the flags would be accepted and do nothing.
func (d *deviceFlags) registerNoCache(fs *flag.FlagSet) {
	fs.StringVar(&d.device, "device", xla.DeviceAuto, "auto, tpu, cuda, cpu or go (the pure-Go backend)")
	fs.IntVar(&d.numDevices, "num_devices", 0, "devices (replicas) to use; 0 = all (1 on the pure-Go backend, any number of virtual devices there)")
	fs.StringVar(&d.pluginPath, "plugin_path", "", "PJRT plugin file or directory to use instead of searching")
	registerGoBackend(fs, &d.goBackend)
}

// registerGoBackend adds --go_backend. Its default is empty rather than "gotpu" so that
// --device tpu (or cuda, cpu) without it is valid: xla.Config rejects a Go backend named for a
// device that does not use one, and an empty value means xla.DefaultGoBackend.
func registerGoBackend(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "go_backend", "", "pure-Go backend for --device go (and auto without an accelerator): "+
		xla.GoBackendGotpu+" (gotpu's own, the default) or "+xla.GoBackendSimpleGo+" (GoMLX's)")
}

func (d *deviceFlags) config() (xla.Config, error) {
	cfg := xla.DefaultConfig()
	cfg.Device = d.device
	cfg.NumDevices = d.numDevices
	cfg.PluginPath = d.pluginPath
	cfg.GoBackend = d.goBackend
	if !d.cached {
		return cfg, nil
	}
	return cfg, d.cache.apply(&cfg)
}

// open validates the device flags (a bad value is a usage error) and opens the runtime; the
// caller closes it.
func (d *deviceFlags) open(ctx context.Context) (*xla.Runtime, error) {
	cfg, err := d.config()
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, cli.UsageError("%v", err)
	}
	rt, err := xla.Open(ctx, cfg)
	if err == nil && d.cached {
		d.cache.opened(rt)
	}
	return rt, err
}
