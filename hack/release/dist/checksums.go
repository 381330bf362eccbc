package dist

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ChecksumsAsset is the release asset listing the SHA-256 of every other
// asset, in the format `sha256sum -c` reads.
const ChecksumsAsset = "checksums.txt"

// WriteChecksums writes dir/checksums.txt for the given files (paths inside
// dir), sorted by name, and returns its path. Verify a download with
// `sha256sum --ignore-missing -c checksums.txt`.
func WriteChecksums(dir string, files []string) (string, error) {
	names := make([]string, 0, len(files))
	for _, f := range files {
		rel, err := filepath.Rel(dir, f)
		if err != nil || strings.HasPrefix(rel, "..") || strings.ContainsAny(rel, "/\\") {
			return "", fmt.Errorf("%s is not a file directly in %s", f, dir)
		}
		names = append(names, rel)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		sum, err := fileSHA256(filepath.Join(dir, name))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, name)
	}
	out := filepath.Join(dir, ChecksumsAsset)
	return out, os.WriteFile(out, []byte(b.String()), 0o644)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hashing %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
