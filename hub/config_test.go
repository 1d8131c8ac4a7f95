package hub

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestConfigFromEnv(t *testing.T) {
	home := t.TempDir()
	hfHome := filepath.Join(home, "hfhome")
	if err := os.MkdirAll(hfHome, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(hfHome, "token"), []byte("hf_from_file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	otherToken := filepath.Join(home, "other-token")
	if err := os.WriteFile(otherToken, []byte("  hf_from_path  "), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		env   map[string]string
		check func(t *testing.T, c Config)
	}{
		{"defaults", map[string]string{}, func(t *testing.T, c Config) {
			want := Config{Endpoint: DefaultEndpoint, CacheDir: filepath.Join(home, ".cache", "huggingface", "hub"),
				EtagTimeout: DefaultEtagTimeout, DownloadTimeout: DefaultDownloadTimeout}
			if c.Endpoint != want.Endpoint || c.CacheDir != want.CacheDir || c.Token != "" || c.Offline ||
				c.EtagTimeout != want.EtagTimeout || c.DownloadTimeout != want.DownloadTimeout || c.Progress != os.Stderr {
				t.Errorf("got %+v", c)
			}
		}},
		{"xdg", map[string]string{"XDG_CACHE_HOME": "/x/cache"}, func(t *testing.T, c Config) {
			if c.CacheDir != "/x/cache/huggingface/hub" {
				t.Errorf("CacheDir %s", c.CacheDir)
			}
		}},
		{"hf_home", map[string]string{"XDG_CACHE_HOME": "/x/cache", "HF_HOME": hfHome}, func(t *testing.T, c Config) {
			if c.CacheDir != filepath.Join(hfHome, "hub") || c.Token != "hf_from_file" {
				t.Errorf("CacheDir %s, token from $HF_HOME/token %q", c.CacheDir, c.Token)
			}
		}},
		{"hub_cache_wins", map[string]string{"HF_HOME": hfHome, "HF_HUB_CACHE": "~/hc", "HUGGINGFACE_HUB_CACHE": "/legacy"}, func(t *testing.T, c Config) {
			if c.CacheDir != filepath.Join(home, "hc") {
				t.Errorf("CacheDir %s", c.CacheDir)
			}
		}},
		{"legacy_cache", map[string]string{"HUGGINGFACE_HUB_CACHE": "/legacy"}, func(t *testing.T, c Config) {
			if c.CacheDir != "/legacy" {
				t.Errorf("CacheDir %s", c.CacheDir)
			}
		}},
		{"token_env_wins", map[string]string{"HF_HOME": hfHome, "HF_TOKEN": " hf_env \n"}, func(t *testing.T, c Config) {
			if c.Token != "hf_env" {
				t.Errorf("Token %q", c.Token)
			}
		}},
		{"token_path", map[string]string{"HF_HOME": hfHome, "HF_TOKEN_PATH": otherToken}, func(t *testing.T, c Config) {
			if c.Token != "hf_from_path" {
				t.Errorf("Token %q", c.Token)
			}
		}},
		{"endpoint_offline_progress", map[string]string{"HF_ENDPOINT": "http://mirror.local:8080/", "HF_HUB_OFFLINE": "yes",
			"HF_HUB_DISABLE_PROGRESS_BARS": "TRUE", "HF_HUB_ETAG_TIMEOUT": "2.5", "HF_HUB_DOWNLOAD_TIMEOUT": "30"}, func(t *testing.T, c Config) {
			if c.Endpoint != "http://mirror.local:8080" || !c.Offline || c.Progress != nil || c.EtagTimeout != 2500*time.Millisecond || c.DownloadTimeout != 30*time.Second {
				t.Errorf("got %+v", c)
			}
		}},
		{"transformers_offline", map[string]string{"TRANSFORMERS_OFFLINE": "1"}, func(t *testing.T, c Config) {
			if !c.Offline {
				t.Error("TRANSFORMERS_OFFLINE=1 ignored")
			}
		}},
		{"offline_false", map[string]string{"HF_HUB_OFFLINE": "0"}, func(t *testing.T, c Config) {
			if c.Offline {
				t.Error("HF_HUB_OFFLINE=0 set Offline")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"HOME": home}
			for k, v := range tc.env {
				env[k] = v
			}
			c, err := ConfigFromEnv(func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
			if err := c.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
	for _, bad := range []string{"HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT"} {
		env := map[string]string{"HOME": home, bad: "soon"}
		if _, err := ConfigFromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%s=soon: %v, want an error naming it", bad, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		edit  func(*Config)
		field string
	}{
		{func(c *Config) { c.Endpoint = "" }, "Endpoint"},
		{func(c *Config) { c.Endpoint = "ftp://x" }, "Endpoint"},
		{func(c *Config) { c.Endpoint = "https://" }, "Endpoint"},
		{func(c *Config) { c.Endpoint = "https://h/?q=1" }, "Endpoint"},
		{func(c *Config) { c.CacheDir = "" }, "CacheDir"},
		{func(c *Config) { c.Token = "hf_abc\r\nX-Evil: 1" }, "Token"},
		{func(c *Config) { c.UserAgent = "a\nb" }, "UserAgent"},
		{func(c *Config) { c.EtagTimeout = -1 }, "EtagTimeout"},
		{func(c *Config) { c.DownloadTimeout = -1 }, "DownloadTimeout"},
	} {
		c := DefaultConfig()
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), "Config."+tc.field) {
			t.Errorf("%s: Validate = %v, want an error naming it", tc.field, err)
		}
		if _, nerr := New(c); nerr == nil {
			t.Errorf("%s: New accepted the config", tc.field)
		}
		if tc.field == "Token" && strings.Contains(err.Error(), "hf_abc") {
			t.Errorf("Validate printed the token: %v", err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig: %v", err)
	}
}

func TestDefaultUserAgent(t *testing.T) {
	ua := defaultUserAgent()
	if !strings.HasPrefix(ua, "gotpu/") || !strings.Contains(ua, "; go/1.") {
		t.Errorf("user agent %q", ua)
	}
}
