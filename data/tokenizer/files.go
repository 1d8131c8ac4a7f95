package tokenizer

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/gotpu/gotpu/internal/atomicfile"
)

// SavedFileNames are the files of a tokenizer that save_pretrained writes (or a Hub repo holds
// beside tokenizer.json) and that ReadFiles copies when the source directory has them:
// tokenizer.json and tokenizer_config.json; special_tokens_map.json; the chat template in its
// own file (chat_template.jinja, transformers ≥ 4.43 writes it there; older versions keep it
// as "chat_template" in tokenizer_config.json, which is copied as it is); the slow tokenizer's
// vocabulary files, which PreTrainedTokenizerFast.save_pretrained writes too when it can.
var savedFileNames = []string{
	"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
	"chat_template.jinja", "chat_template.json", "added_tokens.json",
	"vocab.json", "merges.txt", "vocab.txt", "tokenizer.model", "spiece.model", "sentencepiece.bpe.model",
}

// SavedFileNames lists the names ReadFiles looks for, tokenizer.json first.
func SavedFileNames() []string { return slices.Clone(savedFileNames) }

// ChatTemplateFile is where a chat template of its own is saved (transformers' CHAT_TEMPLATE_FILE).
const ChatTemplateFile = "chat_template.jinja"

// File is one file of a saved tokenizer.
type File struct {
	Name string
	Data []byte
}

// Files are a tokenizer's files as read from its source, to be written next to a model the
// way HF's Trainer writes processing_class.save_pretrained into output_dir and every
// checkpoint-N. They are copied byte for byte (not re-serialized from the parsed pipeline), so
// a saved tokenizer is exactly the one that was loaded, fields gotpu does not read included.
// A Files is immutable; the With methods return a modified copy.
type Files struct {
	files []File
}

// ReadFiles reads the tokenizer files of path: a directory holding tokenizer.json (or
// tokenizer.json.gz, written decompressed since transformers reads only the plain file), or a
// tokenizer.json file, whose directory's other files (SavedFileNames) are taken with it. The
// tokenizer.json must load (FromBytes), so a file that would not work is refused here, naming it.
// Each file is bounded by MaxFileSize.
func ReadFiles(path string) (*Files, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, &LoadError{File: path, Err: err}
	}
	dir, tokFile := path, ""
	if st.IsDir() {
		for _, name := range []string{"tokenizer.json", "tokenizer.json.gz"} {
			if p := filepath.Join(path, name); regularFile(p) {
				tokFile = p
				break
			}
		}
		if tokFile == "" {
			return nil, &LoadError{File: path, Err: errors.New("directory has no tokenizer.json or tokenizer.json.gz")}
		}
	} else {
		dir, tokFile = filepath.Dir(path), path
	}
	tj, err := readCapped(tokFile)
	if err != nil {
		return nil, err
	}
	if isGzip(tj) {
		if tj, err = gunzip(tokFile, tj); err != nil {
			return nil, err
		}
	}
	// Parse it once: saving a tokenizer.json that cannot be loaded would only move the error to
	// whoever loads the saved model.
	p, err := load(tokFile, tj)
	if err != nil {
		return nil, err
	}
	p.Close()
	f := &Files{files: []File{{Name: "tokenizer.json", Data: tj}}}
	for _, name := range savedFileNames[1:] {
		fp := filepath.Join(dir, name)
		if !regularFile(fp) {
			continue
		}
		b, err := readCapped(fp)
		if err != nil {
			return nil, err
		}
		f.files = append(f.files, File{Name: name, Data: b})
	}
	return f, nil
}

func regularFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// readCapped reads a file of at most MaxFileSize bytes.
func readCapped(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, &LoadError{File: path, Err: err}
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, MaxFileSize+1))
	if err != nil {
		return nil, &LoadError{File: path, Err: err}
	}
	if len(b) > MaxFileSize {
		return nil, tooLarge(path, "more than the limit")
	}
	return b, nil
}

// List returns the files, tokenizer.json first.
func (f *Files) List() []File {
	if f == nil {
		return nil
	}
	return slices.Clone(f.files)
}

// Get returns the content of the file name, if there is one.
func (f *Files) Get(name string) ([]byte, bool) {
	if f == nil {
		return nil, false
	}
	for _, x := range f.files {
		if x.Name == name {
			return x.Data, true
		}
	}
	return nil, false
}

// WithFile returns a copy of f in which the file name holds data (replaced or added).
func (f *Files) WithFile(name string, data []byte) *Files {
	out := &Files{files: slices.Clone(f.files)}
	for i, x := range out.files {
		if x.Name == name {
			out.files[i].Data = data
			return out
		}
	}
	out.files = append(out.files, File{Name: name, Data: data})
	return out
}

// WithChatTemplate returns a copy of f whose chat template is source, saved as
// chat_template.jinja (the file wins over tokenizer_config.json's "chat_template" for
// transformers ≥ 4.43 and for gotpu), as a tokenizer whose chat_template was set (TRL's
// chat_template_path) saves it.
func (f *Files) WithChatTemplate(source string) *Files {
	return f.WithFile(ChatTemplateFile, []byte(source))
}

// Save writes the files into dir (created if needed), each atomically. Files of the same
// names already there are replaced; others are left alone.
func (f *Files) Save(dir string) error {
	if f == nil {
		return nil
	}
	if err := atomicfile.MkdirAll(dir); err != nil {
		return fmt.Errorf("saving the tokenizer: %w", err)
	}
	for _, x := range f.files {
		if err := atomicfile.WriteFileBytes(filepath.Join(dir, x.Name), x.Data); err != nil {
			return fmt.Errorf("saving the tokenizer's %s: %w", x.Name, err)
		}
	}
	return nil
}
