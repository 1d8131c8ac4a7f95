// Package docs holds gotpu's prose documentation, the Markdown files listed in README.md, and the
// tests that keep it true. It has no code of its own.
//
// The tests build the real gotpu binary and examples once (docs_test.go) and check the Cloud TPU
// VM runbook tpu-vm.md against them; the Markdown and shell reading is in markdown_test.go.
//   - Every `gotpu …` and `go run ./examples/…` command in its sh blocks parses with the flags it
//     uses, and uses no flag gotpu only accepts to refuse or ignore.
//   - Each output sample or error message marked with an HTML comment
//     <!-- doccheck: NAME key=value --> is what the binary prints (samples_test.go); a real
//     training run is preempted with SIGTERM to check the message it prints and the files it
//     leaves.
//   - The repository paths, relative links and #anchors it names exist.
//   - The environment variables it documents for plugin discovery are exactly those package xla
//     reads.
//
// Facts about Google Cloud (images, device counts, gcsfuse) cannot be checked here; the runbook
// cites its sources for them.
package docs
