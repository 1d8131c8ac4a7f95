// Package tensorboard writes and reads TensorBoard event files, the files Hugging Face's
// TensorBoardCallback produces through torch.utils.tensorboard.SummaryWriter(log_dir=
// args.logging_dir), without a protobuf or TensorFlow dependency.
//
// # Format
//
// An event file (events.out.tfevents.<unix time>.<hostname>.<pid>.<n> in the log directory,
// SummaryWriter's naming) is a TFRecord file: a sequence of records, each
//
//	uint64 length (little endian) | uint32 masked CRC32C of the length bytes |
//	data[length] | uint32 masked CRC32C of the data
//
// where mask(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8. Each record's data is a
// serialized tensorflow.Event protocol buffer (tensorflow/core/util/event.proto), encoded here
// by hand: the first carries file_version "brain.Event:2", the others a Summary whose values
// are scalars (Summary.Value.simple_value, as SummaryWriter.add_scalar writes them) or text
// (a DT_STRING tensor with the "text" plugin, as add_text writes it).
//
// RewriteTag maps a Trainer log key to the tag HF's rewrite_logs gives it (loss → train/loss,
// eval_loss → eval/loss). The trainer package's TensorBoardCallback uses this package; this
// package does not import trainer, so trainer may construct it from report_to.
//
// ReadEvents and ParseEvents read event files back, verifying both CRCs of every record; they
// exist for tests and tools and understand only the fields this package writes (others are
// skipped).
//
// # Errors
//
// Errors name the file. A damaged record wraps ErrCorrupt (a CRC mismatch or an undecodable
// Event) and a file cut inside a record wraps ErrTruncated — what a crash during a write leaves;
// the events before it are returned with the error.
//
// # Concurrency
//
// A Writer is safe for concurrent use (a mutex serialises writes), so Close may be called from
// another goroutine. The package has no global mutable state.
package tensorboard
