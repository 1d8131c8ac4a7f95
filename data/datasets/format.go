package datasets

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// Formats gotpu reads (datasets' packaged module names).
const (
	FormatParquet = "parquet"
	FormatArrow   = "arrow"
	FormatCSV     = "csv"
	FormatJSON    = "json"
	FormatText    = "text"
)

var supportedFormats = []string{FormatParquet, FormatArrow, FormatCSV, FormatJSON, FormatText}

// extensionModules maps a data file extension to the datasets module that reads it
// (_EXTENSION_TO_MODULE). Formats gotpu does not read are listed too: datasets counts them when it
// picks a dataset's format, so a folder of images with a metadata.csv is an image dataset (which
// gotpu refuses), not a one-file CSV dataset.
var extensionModules = func() map[string]string {
	m := map[string]string{
		".csv": "csv", ".tsv": "csv",
		".json": "json", ".jsonl": "json", ".ndjson": "json",
		".parquet": "parquet", ".geoparquet": "parquet", ".gpq": "parquet",
		".arrow": "arrow",
		".txt":   "text",
		".conll": "conll", ".conllu": "conll",
		".tar":  "webdataset",
		".xml":  "xml",
		".hdf5": "hdf5", ".h5": "hdf5",
		".eval":   "eval",
		".lance":  "lance",
		".tsfile": "tsfile",
	}
	// Media folders, in datasets' order: a later module takes an extension an earlier one also
	// lists (.mpeg, .mp4, ...).
	for _, f := range []struct {
		module string
		exts   string
	}{
		{"imagefolder", ".blp .bmp .dib .bufr .cur .pcx .dcx .dds .ps .eps .fit .fits .fli .flc .ftc .ftu .gbr " +
			".gif .grib .png .apng .jp2 .j2k .jpc .jpf .jpx .j2c .icns .ico .im .iim .tif .tiff .jfif .jpe .jpg " +
			".jpeg .mpg .mpeg .msp .pcd .pxr .pbm .pgm .ppm .pnm .psd .bw .rgb .rgba .sgi .ras .tga .icb .vda " +
			".vst .webp .wmf .emf .xbm .xpm"},
		{"audiofolder", ".aiff .au .avr .caf .flac .htk .svx .mat4 .mat5 .mpc2k .ogg .paf .pvf .raw .rf64 .sd2 " +
			".sds .ircam .voc .w64 .wav .nist .wavex .wve .xi .mp3 .opus .3gp .3g2 .avi .asf .flv .mp4 .mov " +
			".m4v .mkv .mpg .webm .f4v .wmv .wma .ogm .mxf .nut"},
		{"videofolder", ".mkv .mp4 .avi .mpeg .mov"},
		{"meshfolder", ".glb .ply .stl"},
		{"pdffolder", ".pdf"},
		{"niftifolder", ".nii"},
	} {
		for _, e := range strings.Fields(f.exts) {
			m[e] = f.module
		}
	}
	return m
}()

// upperAllowed reports whether datasets also accepts ext in upper case: it does only for the media
// folders' extensions (".PNG"), so "TRAIN.CSV" is not a data file to it.
func upperAllowed(lower string) bool {
	return strings.HasSuffix(extensionModules[lower], "folder")
}

// metadataExtensions (lance's) are allowed as data files without naming a format;
// metadataFileNames are the files datasets counts last when it picks a format.
var (
	metadataExtensions = map[string]bool{".idx": true, ".txn": true, ".manifest": true}
	metadataFileNames  = map[string]bool{
		"metadata.csv": true, "metadata.jsonl": true, "metadata.parquet": true, "latest_version_hint.json": true,
	}
)

// suffixes returns the name's extensions as datasets lists them: every "."-separated part after
// the first, each with its dot ("a.csv.gz" → ".csv", ".gz").
func suffixes(name string) []string {
	ps := strings.Split(name, ".")[1:]
	for i := range ps {
		ps[i] = "." + ps[i]
	}
	return ps
}

// allowedDataFile is resolve_pattern's allowed_extensions test with _ALL_ALLOWED_EXTENSIONS: some
// extension of the file's name (as written) is one datasets knows.
func allowedDataFile(rel string) bool {
	for _, s := range suffixes(path.Base(rel)) {
		lower := strings.ToLower(s)
		known := extensionModules[lower] != "" || lower == ".zip" || metadataExtensions[lower]
		if known && (s == lower || (s == strings.ToUpper(s) && upperAllowed(lower))) {
			return true
		}
	}
	return false
}

// module is what datasets infers for a list of files: the packaged module and, for CSV, the
// separator a .tsv implies.
type module struct {
	name string // "" when no file has a known extension; "zip" for archives to look inside
	sep  string
}

func (m module) String() string {
	switch {
	case m.name == "":
		return "none"
	case m.sep != "":
		return fmt.Sprintf("%s (sep %q)", m.name, m.sep)
	}
	return m.name
}

// inferModule is infer_module_for_data_files_list: count every extension of every file (lower
// case), metadata files apart; take the most common one that names a module, preferring on a tie
// .parquet, .lance, .arrow, .jsonl, .json, .csv, then the greater extension.
func inferModule(files []string) module {
	type key struct {
		ext  string
		meta bool
	}
	counts := map[key]int{}
	for _, f := range files {
		name := path.Base(f)
		for _, s := range suffixes(name) {
			counts[key{strings.ToLower(s), metadataFileNames[name]}]++
		}
	}
	keys := make([]key, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	favorite := func(ext string) int {
		if i := slices.Index([]string{".parquet", ".lance", ".arrow", ".jsonl", ".json", ".csv"}, ext); i >= 0 {
			return 6 - i
		}
		return 0
	}
	slices.SortFunc(keys, func(a, b key) int { // descending by datasets' sort key
		switch {
		case a.meta != b.meta:
			if a.meta {
				return 1
			}
			return -1
		case counts[a] != counts[b]:
			return counts[b] - counts[a]
		case favorite(a.ext) != favorite(b.ext):
			return favorite(b.ext) - favorite(a.ext)
		}
		return strings.Compare(b.ext, a.ext)
	})
	for _, k := range keys {
		if m := extensionModules[k.ext]; m != "" {
			if k.ext == ".tsv" {
				return module{name: m, sep: "\t"}
			}
			return module{name: m}
		}
		if k.ext == ".zip" {
			return module{name: "zip"}
		}
	}
	return module{}
}

// moduleFileRE is DataFilesList.filter for a module: the path ends with one of the module's
// extensions (or .zip), possibly followed by more extensions (a compression suffix).
func moduleFileRE(name string) *regexp.Regexp {
	var alts []string
	for ext, m := range extensionModules {
		if m == name {
			alts = append(alts, regexp.QuoteMeta(ext))
		}
	}
	slices.Sort(alts)
	alts = append(alts, regexp.QuoteMeta(".zip"))
	return regexp.MustCompile(`^.*(` + strings.Join(alts, "|") + `)(\..+)?$`)
}

// compressionSuffixes are the extensions of compressed or archived files datasets would open
// through fsspec; gotpu reads data files as they are, so it refuses these rather than dropping
// or misreading them.
var compressionSuffixes = map[string]bool{
	".gz": true, ".gzip": true, ".bz2": true, ".xz": true, ".lzma": true, ".lz4": true, ".zst": true,
	".zstd": true, ".7z": true, ".zip": true, ".tar": true, ".tgz": true, ".snappy": true, ".sz": true, ".br": true,
}

// checkReadable refuses a file gotpu cannot read as the format although datasets would: one inside
// an archive or behind a compression suffix. m is moduleFileRE's match of rel.
func checkReadable(rel string, m []string) error {
	ext, rest := m[1], m[2]
	if rest == "" && ext == ".zip" {
		return fmt.Errorf("data file %q is a zip archive: archived data files are not supported, extract them", rel)
	}
	if rest != "" {
		last := strings.ToLower(rest[strings.LastIndexByte(rest, '.'):])
		if compressionSuffixes[last] {
			return fmt.Errorf("data file %q is compressed (%s): compressed data files are not supported, decompress them", rel, last)
		}
	}
	return nil
}
