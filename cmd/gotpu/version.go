package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/gotpu/gotpu/internal/cli"
	"github.com/gotpu/gotpu/xla"
)

// versionInfo is what gotpu version prints: enough to tell two builds apart in a bug report.
type versionInfo struct {
	// Version is the main module's version: a release tag for `go install …@vX`, "(devel)" for a
	// build from a checkout.
	Version string `json:"version"`
	// Commit, CommitTime and Modified are the VCS stamp `go build` records in a checkout (absent
	// with -buildvcs=false, or outside a repository).
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commit_time,omitempty"`
	Modified   bool   `json:"modified"`
	GoVersion  string `json:"go_version"`
	Platform   string `json:"platform"`
	// Backends are the backends compiled in: the pure-Go ones always, "pjrt" (XLA plugins for
	// TPU, GPU and CPU) unless built with -tags noxla.
	Backends []string `json:"backends"`
}

func buildVersion() versionInfo {
	v := versionInfo{Version: "unknown", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.time":
				v.CommitTime = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	v.Backends = []string{xla.GoBackendGotpu, xla.GoBackendSimpleGo}
	if pjrtCompiledIn {
		v.Backends = append(v.Backends, "pjrt")
	}
	return v
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("version")
	asJSON := fs.Bool("json", false, "print the version as a JSON object")
	if err := parse(fs, args, stderr, "[--json]"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.UsageError("unexpected arguments %q", fs.Args())
	}
	v := buildVersion()
	if *asJSON {
		return json.NewEncoder(stdout).Encode(v)
	}
	commit := "unknown (built without VCS information)"
	if v.Commit != "" {
		commit = v.Commit
		if v.CommitTime != "" {
			commit += " (" + v.CommitTime + ")"
		}
		if v.Modified {
			commit += ", with uncommitted changes"
		}
	}
	backends := strings.Join(v.Backends, ", ")
	if !pjrtCompiledIn {
		backends += " (built with -tags noxla: no PJRT plugins)"
	}
	_, err := fmt.Fprintf(stdout, "gotpu %s\ncommit    %s\ngo        %s %s\nbackends  %s\n",
		v.Version, commit, v.GoVersion, v.Platform, backends)
	return err
}
