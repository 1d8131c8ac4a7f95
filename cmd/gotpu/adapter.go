package main

import (
	"context"
	"io"

	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
	"github.com/gotpu/gotpu/xla"
)

// resolveAdapterFlag is resolveModelFlag for an --adapter_name_or_path: a local adapter directory
// as it is, a Hub repo id fetched into the shared cache (adapter_config.json and
// adapter_model.safetensors).
func resolveAdapterFlag(ctx context.Context, nameOrPath, revision string, stderr io.Writer) (string, error) {
	if isLocal(nameOrPath) {
		return nameOrPath, nil
	}
	c, err := newHubClient(hubFlags{}, stderr)
	if err != nil {
		return "", err
	}
	return peft.ResolveAdapter(ctx, nameOrPath, models.HubOptions{Hub: c, Revision: revision})
}

// withAdapter attaches the adapter in dir ("" for none) to base: score, generate, eval and the
// service run the adapted model.
func withAdapter(ctx context.Context, rt *xla.Runtime, base models.Model, dir string) (models.Model, error) {
	if dir == "" {
		return base, nil
	}
	return peft.Load(ctx, rt, base, dir, peft.Options{})
}
