// Package fakeplugin builds files that look like PJRT plugins, for tests of plugin discovery and
// of the errors gotpu gives for broken installations, on machines without any accelerator.
//
// It needs a C compiler (cc) to produce real ELF shared libraries; Build reports an error when
// there is none so the caller can skip. Nothing here is used outside tests.
package fakeplugin
