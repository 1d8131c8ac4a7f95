package peft_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/hub/hubtest"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
)

func parseBase(t testing.TB, fixture string) models.Config {
	t.Helper()
	cfg, err := models.ParseConfig(filepath.Join(modelsDir(t), fixture, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func loraConfig(t testing.TB, raw string) peft.LoraConfig {
	t.Helper()
	cfg, err := peft.ParseConfig([]byte(raw), "adapter_config.json")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestMaxWeightsBytes: the bound is r·(in+out) for each weight matrix the config selects, 8
// bytes an element, plus 1 MiB and 512 bytes a tensor of header room. gpt2-tiny (n_embd 64, 2
// blocks, vocab 1000, 64 positions) has per block c_attn [64, 192], attn.c_proj [64, 64], c_fc
// [64, 256] and mlp.c_proj [256, 64], and the embeddings wte [1000, 64] and wpe [64, 64].
func TestMaxWeightsBytes(t *testing.T) {
	gpt2 := parseBase(t, "gpt2-tiny")
	for _, c := range []struct {
		name, cfg          string
		elements, matrices int64
	}{
		// The fixture: r 4 on c_attn: 2 blocks × 4 × (64+192).
		{"fixture", string(fixtureConfig(t, "gpt2-lora-tiny")), 2 * 4 * 256, 2},
		{"default targets (c_attn)", `{"peft_type": "LORA", "r": 4}`, 2 * 4 * 256, 2},
		// Every matrix, the embeddings too: the bound is a superset of the linear layers.
		{"all-linear", `{"peft_type": "LORA", "r": 4, "target_modules": "all-linear"}`,
			4*(1064+128) + 2*4*(256+128+320+320), 10},
		{"all-linear less the embeddings", `{"peft_type": "LORA", "r": 4, "target_modules": "all-linear", "exclude_modules": ["wte", "wpe"]}`,
			2 * 4 * (256 + 128 + 320 + 320), 8},
		{"regex on block 0", `{"peft_type": "LORA", "r": 1, "target_modules": "transformer\\.h\\.0\\..*"}`, 256 + 128 + 320 + 320, 4},
		{"list of suffixes", `{"peft_type": "LORA", "r": 8, "target_modules": ["h.1.mlp.c_proj", "c_fc"]}`, 8 * (320 + 320 + 320), 3},
	} {
		lc := loraConfig(t, c.cfg)
		n, err := peft.MaxElements(gpt2, lc)
		if err != nil || n != c.elements {
			t.Errorf("%s: MaxElements %d (%v), want %d", c.name, n, err, c.elements)
		}
		limit, err := peft.MaxWeightsBytes(gpt2, lc)
		if want := 8*c.elements + 1<<20 + 2*512*c.matrices; err != nil || limit != want {
			t.Errorf("%s: MaxWeightsBytes %d (%v), want %d", c.name, limit, err, want)
		}
	}

	// Refused, naming the field: a config that selects nothing on the base, a list holding
	// "all-linear", no base at all.
	for _, c := range []struct {
		name string
		base models.Config
		cfg  string
		want string
	}{
		{"llama targets on gpt2", gpt2, string(fixtureConfig(t, "llama-lora-tiny")), `target_modules: "q_proj" matches no module of GPT2LMHeadModel`},
		{"regex matching nothing", gpt2, `{"peft_type": "LORA", "r": 1, "target_modules": "c_attn"}`, `target_modules: "c_attn" selects no weight matrix of GPT2LMHeadModel`},
		{"no base", nil, `{"peft_type": "LORA", "r": 1}`, "no base model config"},
	} {
		_, err := peft.MaxWeightsBytes(c.base, loraConfig(t, c.cfg))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	list := peft.DefaultLoraConfig()
	list.TargetModules = []string{"all-linear"}
	if _, err := peft.MaxWeightsBytes(gpt2, list); err == nil || !strings.Contains(err.Error(), "target_modules") {
		t.Errorf(`["all-linear"]: %v, want the target_modules error`, err)
	}
}

// TestMaxElementsBoundsRealAdapters: for each config, the bound is at least the elements of the
// adapter peft.New builds on the same base (and the fixtures' files are within MaxWeightsBytes):
// the bound never refuses an adapter gotpu would load.
func TestMaxElementsBoundsRealAdapters(t *testing.T) {
	ctx := context.Background()
	rt := openGo(t)
	for _, fx := range loraFixtures {
		base := parseBase(t, fx.base)
		lc, err := peft.ReadConfig(filepath.Join(modelsDir(t), "lora", fx.name, peft.ConfigFile))
		if err != nil {
			t.Fatal(err)
		}
		limit, err := peft.MaxWeightsBytes(base, lc)
		if err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(filepath.Join(modelsDir(t), "lora", fx.name, peft.WeightsFile))
		if err != nil || st.Size() > limit {
			t.Errorf("%s: %s of %d bytes (%v) over its bound %d", fx.name, peft.WeightsFile, st.Size(), err, limit)
		}
		for _, targets := range []string{"", `, "target_modules": "all-linear"`, `, "target_modules": ".*\\.1\\..*"`, `, "target_modules": "all-linear", "exclude_modules": ".*\\.0\\..*"`} {
			lc := loraConfig(t, `{"peft_type": "LORA", "r": 3`+targets+`}`)
			bound, err := peft.MaxElements(base, lc)
			if err != nil {
				t.Errorf("%s%s: %v", fx.base, targets, err)
				continue
			}
			m, err := models.Load(ctx, rt, filepath.Join(modelsDir(t), fx.base), models.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			adapted, err := peft.New(ctx, rt, m, lc, peft.Options{})
			if err != nil {
				t.Fatalf("%s%s: %v", fx.base, targets, err)
			}
			var real int64
			for _, p := range adapted.Params() {
				real += int64(p.NumElements())
			}
			if real == 0 || bound < real {
				t.Errorf("%s%s: bound %d below the adapter's %d elements", fx.base, targets, bound, real)
			}
		}
	}
}

// asked reports whether the fake Hub was asked for file at all (metadata or body).
func asked(s *hubtest.Server, file string) bool {
	return s.CountRequests(func(r hubtest.Request) bool { return strings.HasSuffix(r.Path, "/"+file) }) > 0
}

func testHub(t *testing.T, s *hubtest.Server) *hub.Client {
	t.Helper()
	cfg := hub.DefaultConfig()
	cfg.Endpoint, cfg.CacheDir = s.URL(), filepath.Join(t.TempDir(), "hub")
	c, err := hub.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestResolveAdapterRefusesOversizedWeights: a Hub adapter whose adapter_config.json is the
// gpt2-lora-tiny fixture's (r 4 on c_attn: 2,048 elements, a bound of 1,067,008 bytes on
// gpt2-tiny) but whose adapter_model.safetensors is 32 MiB is refused by ResolveAdapter and
// peft.Load with hub.ErrTooLarge naming the repo, the file, the announced size and the limit,
// without one byte of the weights served — whether the Hub announces the size as an LFS file's
// X-Linked-Size or a plain Content-Length. A 2 MiB adapter_config.json is refused the same way
// (MaxConfigBytes); a config that selects nothing on the base is refused before the weights are
// asked for; and the fixture itself, served the same way, resolves and loads.
func TestResolveAdapterRefusesOversizedWeights(t *testing.T) {
	ctx := context.Background()
	base := parseBase(t, "gpt2-tiny")
	cfg := fixtureConfig(t, "gpt2-lora-tiny")
	limit, err := peft.MaxWeightsBytes(base, loraConfig(t, string(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	const big = 32 << 20
	s := hubtest.New(t)
	s.AddRepo("model", "org/big-lfs", map[string][]byte{peft.ConfigFile: cfg, peft.WeightsFile: hubtest.Noise(big, 1)}, hubtest.RepoOptions{})
	s.AddRepo("model", "org/big-plain", map[string][]byte{peft.ConfigFile: cfg, peft.WeightsFile: hubtest.Noise(big, 2)}, hubtest.RepoOptions{LFSThreshold: -1})
	c := testHub(t, s)
	rt := openGo(t)
	for _, id := range []string{"org/big-lfs", "org/big-plain"} {
		s.ResetRequests()
		start := time.Now()
		_, err := peft.ResolveAdapter(ctx, id, base, models.HubOptions{Hub: c})
		elapsed := time.Since(start)
		if !errors.Is(err, hub.ErrTooLarge) {
			t.Fatalf("%s: err %v, want hub.ErrTooLarge", id, err)
		}
		for _, part := range []string{"adapter " + id, peft.WeightsFile, strconv.Itoa(big), "over the limit of " + strconv.FormatInt(limit, 10),
			"adapter_config.json implies for GPT2LMHeadModel"} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("%s: the error does not say %q: %v", id, part, err)
			}
		}
		if n := s.BytesServedFor(peft.WeightsFile); n != 0 {
			t.Errorf("%s: %d bytes of the oversized weights were served", id, n)
		}
		if elapsed > 10*time.Second {
			t.Errorf("%s: the refusal took %v", id, elapsed)
		}
		t.Logf("%s: refused after %v, %d bytes of %s served: %v", id, elapsed.Round(time.Millisecond), s.BytesServedFor(peft.WeightsFile), peft.WeightsFile, err)

		m, err := models.Load(ctx, rt, filepath.Join(modelsDir(t), "gpt2-tiny"), models.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := peft.Load(ctx, rt, m, id, peft.Options{Hub: models.HubOptions{Hub: c}}); !errors.Is(err, hub.ErrTooLarge) {
			t.Errorf("peft.Load(%s): err %v, want hub.ErrTooLarge", id, err)
		}
		if n := s.BytesServedFor(peft.WeightsFile); n != 0 {
			t.Errorf("peft.Load(%s): %d bytes of the oversized weights were served", id, n)
		}
	}

	// An oversized adapter_config.json is refused from its announced size too.
	s.ResetRequests()
	s.AddRepo("model", "org/big-config", map[string][]byte{peft.ConfigFile: hubtest.Noise(2<<20, 3), peft.WeightsFile: hubtest.Noise(1024, 4)}, hubtest.RepoOptions{})
	if _, err := peft.ResolveAdapter(ctx, "org/big-config", base, models.HubOptions{Hub: c}); !errors.Is(err, hub.ErrTooLarge) ||
		!strings.Contains(err.Error(), peft.ConfigFile) || !strings.Contains(err.Error(), strconv.Itoa(peft.MaxConfigBytes)) {
		t.Errorf("2 MiB %s: %v, want hub.ErrTooLarge naming it and %d", peft.ConfigFile, err, peft.MaxConfigBytes)
	}
	if n := s.BytesServedFor(peft.ConfigFile); n != 0 {
		t.Errorf("%d bytes of the oversized config were served", n)
	}

	// An adapter for another architecture: refused from its config, its weights never asked for.
	s.ResetRequests()
	s.AddRepo("model", "org/llama-adapter", hubtest.DirFiles(t, filepath.Join(modelsDir(t), "lora", "llama-lora-tiny")), hubtest.RepoOptions{})
	if _, err := peft.ResolveAdapter(ctx, "org/llama-adapter", base, models.HubOptions{Hub: c}); err == nil ||
		!strings.Contains(err.Error(), `"q_proj" matches no module of GPT2LMHeadModel`) || asked(s, peft.WeightsFile) {
		t.Errorf("llama adapter on gpt2: %v (weights asked for: %v)", err, asked(s, peft.WeightsFile))
	}

	// The legitimate adapter resolves, whole, and loads.
	s.AddRepo("model", "org/gpt2-lora-tiny", hubtest.DirFiles(t, filepath.Join(modelsDir(t), "lora", "gpt2-lora-tiny")), hubtest.RepoOptions{})
	dir, err := peft.ResolveAdapter(ctx, "org/gpt2-lora-tiny", base, models.HubOptions{Hub: c})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.Stat(filepath.Join(modelsDir(t), "lora", "gpt2-lora-tiny", peft.WeightsFile))
	if st, err := os.Stat(filepath.Join(dir, peft.WeightsFile)); err != nil || st.Size() != want.Size() {
		t.Errorf("the fixture's weights resolved to %v (%v), want %d bytes", st, err, want.Size())
	}
	m, err := models.Load(ctx, rt, filepath.Join(modelsDir(t), "gpt2-tiny"), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := peft.Load(ctx, rt, m, "org/gpt2-lora-tiny", peft.Options{Hub: models.HubOptions{Hub: c}}); err != nil {
		t.Errorf("peft.Load of the fixture from the Hub: %v", err)
	}
}
