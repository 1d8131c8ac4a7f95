// Package xlatest holds test helpers for programs gotpu hands to a PJRT plugin, for tests only
// (as net/http/httptest is for HTTP).
//
// GoMLXBackend is GoMLX v0.26.0's own XLA backend made to build programs without a plugin: GoMLX
// refuses to build anything before a PJRT plugin is loaded, so NewGoMLXBackend marks a zero
// backend as loaded (reflect and unsafe on unexported fields) and fakes the host→device transfers
// (buffers that only carry their shapes); Module reads the StableHLO text the builder wrote once
// Compile stopped at the missing PJRT client. Tests compare that text with gotpu's own tracer
// (xla.StableHLO) and check how gotpu configures GoMLX's context.Exec on a plugin, byte for byte,
// with no device. The hack is tied to GoMLX v0.26.0's field names: after an upgrade, a renamed
// field panics here, in tests, never in the library.
//
// Tests that execute programs on XLA's CPU plugin use xla/pjrttest instead (it imports xla, which
// this package must not: xla's own tests import it).
//
// It needs GoMLX's XLA backend, so it builds only without the noxla tag. Not safe for concurrent
// use: one test, one backend.
package xlatest
