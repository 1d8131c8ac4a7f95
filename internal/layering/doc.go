// Package layering holds no code: its test checks the repository's import layering — the device
// runtime below the training step, the step below the trainer, plumbing in internal/ importing
// nothing above it — so that an upward import fails CI rather than a review.
package layering
