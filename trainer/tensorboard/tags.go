package tensorboard

import "strings"

// RewriteTag returns the TensorBoard tag Hugging Face's TensorBoardCallback gives a log key
// (integrations' rewrite_logs): "eval_<rest>" → "eval/<rest>", "test_<rest>" → "test/<rest>",
// anything else → "train/<key>". So loss → train/loss, learning_rate → train/learning_rate,
// eval_loss → eval/loss, train_runtime → train/train_runtime.
func RewriteTag(key string) string {
	if rest, ok := strings.CutPrefix(key, "eval_"); ok {
		return "eval/" + rest
	}
	if rest, ok := strings.CutPrefix(key, "test_"); ok {
		return "test/" + rest
	}
	return "train/" + key
}
