package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/gotpu/gotpu/internal/cli"
	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

// planCompileFlags are `gotpu plan --compile`'s settings.
type planCompileFlags struct {
	model        string
	bf16         bool
	batch, accum int
	optim        string
	device       string
	numDevices   int
	pluginPath   string
	shapesOnly   bool
	fs           *flag.FlagSet
	run          *planRunFlags
}

// runPlanCompile implements `gotpu plan --compile`: it opens --device's PJRT plugin with
// --num_devices devices, builds the model with random weights, runs one train step
// (trainer.CompilePlan: GoMLX compiles on first execution) and prints the XLA compiler's memory
// figures of the train program next to the planner's for the same device count:
//
//	<plan's model, optimizer, dtype, batch and fsdp lines>
//
//	compiled   <kind> PJRT plugin, N devices: one train step (random weights and tokens) in S s
//
//	per device, bytes    planner     compiler  compiler/planner
//	arguments            <persistent>  <argument>  <ratio>
//	outputs              <persistent>  <output>    <ratio>
//	aliased              -             <alias>     -
//	temp                 <transients>  <temp>      <ratio>
//	code                 -             <code>      -
//	total                <total>       <total>     <ratio>
//
// followed by notes saying what each row compares.
func runPlanCompile(ctx context.Context, stdout io.Writer, req trainer.PlanRequest, f planCompileFlags) error {
	switch {
	case f.device == "":
		return cli.UsageError("--compile needs --device: the PJRT runtime to compile on (cpu, tpu, cuda or auto)")
	case f.device == xla.DeviceGo:
		return cli.UsageError("--compile: the compiler's memory figures need a PJRT plugin (--device cpu, tpu or cuda); " +
			"--device go is gotpu's pure-Go backend, which has no XLA compiler (plan without --compile for the planner's figures)")
	case slices.Contains(trainer.PlanTargetNames(), f.device):
		return cli.UsageError("--compile --device %s: with --compile, --device names the runtime to compile on "+
			"(cpu, tpu, cuda or auto) and --num_devices its device count, not a plan target", f.device)
	}
	cfg := xla.DefaultConfig()
	cfg.Device, cfg.NumDevices, cfg.PluginPath = f.device, f.numDevices, f.pluginPath
	if err := cfg.Validate(); err != nil {
		return cli.UsageError("%v", err)
	}
	path, err := planModel(&req, f.model, f.bf16, f.batch, f.accum, f.optim)
	if err != nil {
		return err
	}
	if err := f.run.apply(f.fs, &req); err != nil {
		return err
	}
	// Validate the request before opening a plugin (PlanFSDP's errors are the plan's usage errors).
	if _, err := trainer.PlanFSDP(req); errors.Is(err, trainer.ErrInvalidArgument) || errors.Is(err, trainer.ErrUnsupportedArgument) {
		return cli.UsageError("%s: %v", path, err)
	} else if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	rt, err := xla.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer rt.Close()
	if rt.Kind() == xla.DeviceGo {
		return cli.UsageError("--compile --device %s: opened gotpu's pure-Go backend, which has no XLA compiler; the compiler's "+
			"memory figures need a PJRT plugin (--device cpu, tpu or cuda)", f.device)
	}
	compile := trainer.CompilePlan
	if f.shapesOnly {
		compile = trainer.CompilePlanShapes
	}
	c, err := compile(ctx, rt, req)
	if errors.Is(err, trainer.ErrInvalidArgument) || errors.Is(err, trainer.ErrUnsupportedArgument) {
		return cli.UsageError("%s: %v", path, err)
	}
	if err != nil {
		return fmt.Errorf("gotpu plan --compile %s: %w", path, err)
	}
	return writePlanCompiled(stdout, c)
}

// writePlanCompiled prints runPlanCompile's report.
func writePlanCompiled(w io.Writer, c trainer.PlanCompiled) error {
	var b strings.Builder
	p, m := c.Plan, c.Stats
	writePlanHeader(&b, p)
	what := "one train step (random weights and tokens)"
	if c.ShapesOnly {
		what = "the train step traced from shapes and compiled, not run"
	}
	fmt.Fprintf(&b, "\ncompiled   %s PJRT plugin, %s: %s in %.1f s\n", p.Rows[0].Target.Name, plural(c.Devices, "device"), what, c.Seconds)
	b.WriteString("\nper device, bytes          planner        compiler  compiler/planner\n")
	row := func(name string, planned, compiled int64, compare bool) {
		pl, ratio := "-", "-"
		if compare {
			pl = strconv.FormatInt(planned, 10)
			if planned > 0 {
				ratio = strconv.FormatFloat(float64(compiled)/float64(planned), 'f', 2, 64)
			}
		}
		fmt.Fprintf(&b, "%-18s %15s %15s  %s\n", name, pl, strconv.FormatInt(compiled, 10), ratio)
	}
	transients := p.Gradients + p.Gathered + p.Activations
	row("arguments", p.Persistent, m.Argument, true)
	row("outputs", p.Updated, m.Output, true)
	row("aliased", 0, m.Alias, false)
	row("temp", transients, m.Temp, true)
	row("code", 0, m.GeneratedCode, false)
	row("total", p.Total, m.Total(), true)
	b.WriteString("\narguments: planner: parameters + optimizer state a device keeps; compiler: every input of the\n" +
		"  train program (those, the device's batch and the step's scalars).\n")
	b.WriteString("outputs: the updated trainable parameters and optimizer state (and the step's scalars): gotpu's\n" +
		"  programs alias no input to an output yet, so they are a second copy; aliased: outputs written over\n" +
		"  donated inputs.\n")
	b.WriteString("temp: planner: gradients + gathered weights + activations (the step's transients); compiler:\n" +
		"  XLA's scratch buffers after fusion and buffer reuse.\n")
	b.WriteString("total: planner: its estimated peak; compiler: arguments + outputs - aliased + temp + code.\n")
	b.WriteString("The compiler's figures are those of the train program (the last micro-batch, with the update).\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// plural is "1 device", "8 devices".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
