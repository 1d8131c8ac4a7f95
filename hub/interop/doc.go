// Package interop holds tests, and no API: they check that gotpu's Hugging Face cache (package
// hub) and its fake Hub (package hubtest) interoperate with a client no one here wrote,
// Hugging Face's JavaScript @huggingface/hub, driven through Node by hfjs.mjs:
//
//   - a snapshot @huggingface/hub downloads from the fake Hub is found, byte for byte, by
//     hub.Client and `gotpu download` offline, without a request;
//   - @huggingface/hub's scanCacheDir reads a cache gotpu wrote (models and datasets) without a
//     warning, with the commits, refs, files and sizes gotpu wrote;
//   - either client reuses the blobs the other downloaded into a shared cache;
//   - the fake Hub answers the calls the JavaScript client makes (repo info, paginated tree,
//     paths-info, ranged resolve) as the Hub does.
//
// The JavaScript package is pinned by package-lock.json and installed into node_modules by
// setup.sh, which the tests run (it installs nothing when the pinned version is there; CI runs
// it before `go test`, so that the tests need no network). Without `node` on PATH the tests
// skip, saying so; a failed install fails them. The tests build cmd/gotpu once into a temporary
// folder for the command-line checks.
//
// # Errors
//
// A failure names the file, request or field that differs and shows the JavaScript client's
// answer or stderr.
//
// # Concurrency
//
// Each test owns its fake Hub (two loopback httptest servers, closed when the test ends) and
// runs its Node and gotpu child processes one at a time, each under a timeout.
package interop
