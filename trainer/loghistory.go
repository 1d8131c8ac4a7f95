package trainer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gotpu/gotpu/internal/atomicfile"
)

// logHistoryFile is the JSON-lines log gotpu writes beside trainer_state.json: one line per log
// entry as it happens (HF's log_history entries plus gotpu's throughput metrics), so a run can be
// followed with `tail -f` and survives a crash, which trainer_state.json (written at saves) does
// not.
const logHistoryFile = "log_history.jsonl"

// logHistoryCallback appends each log entry to output_dir/log_history.jsonl.
type logHistoryCallback struct {
	BaseCallback
	f *os.File
}

// OnLog implements Callback.
func (c *logHistoryCallback) OnLog(_ context.Context, e *Event) error {
	if c.f == nil {
		if err := atomicfile.MkdirAll(e.Args.OutputDir); err != nil {
			return fmt.Errorf("trainer: %w", err)
		}
		f, err := os.OpenFile(filepath.Join(e.Args.OutputDir, logHistoryFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, atomicfile.FileMode) // modes from the umask, as every file gotpu writes
		if err != nil {
			return fmt.Errorf("trainer: %w", err)
		}
		c.f = f
	}
	line := appendPyJSON(nil, JSONObjectValue(e.Logs.Members()...), pyJSONStyle{indent: -1}, 0)
	if _, err := c.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("trainer: %s: %w", c.f.Name(), err)
	}
	return nil
}

// Close closes the file.
func (c *logHistoryCallback) Close() error {
	if c.f == nil {
		return nil
	}
	err := c.f.Close()
	c.f = nil
	return err
}
