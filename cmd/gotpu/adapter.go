package main

import (
	"context"
	"io"
	"path/filepath"

	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
	"github.com/gotpu/gotpu/xla"
)

// resolveAdapterFlag is resolveModelFlag for an --adapter_name_or_path: a local adapter directory
// as it is, a Hub repo id fetched into the shared cache (adapter_config.json and
// adapter_model.safetensors). baseDir is the base model's directory, already resolved: its
// config.json bounds the adapter's weights, which are refused before download when the Hub
// announces more (peft.MaxWeightsBytes).
func resolveAdapterFlag(ctx context.Context, nameOrPath, revision, baseDir string, stderr io.Writer) (string, error) {
	if isLocal(nameOrPath) {
		return nameOrPath, nil
	}
	base, err := models.ParseConfig(filepath.Join(baseDir, "config.json"))
	if err != nil {
		return "", err
	}
	c, err := newHubClient(hubFlags{}, stderr)
	if err != nil {
		return "", err
	}
	return peft.ResolveAdapter(ctx, nameOrPath, base, models.HubOptions{Hub: c, Revision: revision})
}

// openAdapted opens the runtime the device flags ask for and loads modelDir (variables of dtype,
// as --dtype) with the adapter in adapterDir attached ("" for none): what score, generate and
// merge run. The caller closes the runtime.
func openAdapted(ctx context.Context, dev *deviceFlags, modelDir, dtype, adapterDir string) (*xla.Runtime, models.Model, error) {
	rt, err := dev.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	m, err := models.Load(ctx, rt, modelDir, models.LoadOptions{DType: dtype})
	if err == nil && adapterDir != "" {
		m, err = peft.Load(ctx, rt, m, adapterDir, peft.Options{})
	}
	if err != nil {
		rt.Close()
		return nil, nil, err
	}
	return rt, m, nil
}
