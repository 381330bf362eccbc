package chartsource

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"

	"github.com/afterhooks/helm-controller/test/testcharts"
)

// podinfoDir is the repository's copy of the podinfo chart.
var podinfoDir = testcharts.Podinfo

// packageDir packages a chart directory as `helm package` would.
func packageDir(f *testing.F, dir string) ([]byte, *chartv2.Chart) {
	f.Helper()
	ch, err := loader.LoadDir(dir)
	if err != nil {
		f.Fatalf("loading %s: %v", dir, err)
	}
	p, err := chartutil.Save(ch, f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	return data, ch
}

// gzipped stores data in a gzip stream without compressing it: a
// compressing writer costs most of a millisecond to set up, which would
// dominate every tar-only execution.
func gzipped(data []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.NoCompression)
	_, _ = zw.Write(data)
	_ = zw.Close()
	return buf.Bytes()
}

// escapingEntry returns the name of the first regular entry of a tar.gz
// that would land outside the chart: the chart is the archive's first path
// component, whatever it is called, and the rest of a name must stay below
// it. Entries after a read error are not looked at: the loader stops there
// too.
func escapingEntry(data []byte) string {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return ""
	}
	tr := tar.NewReader(zr)
	for {
		hd, err := tr.Next()
		if err != nil {
			return ""
		}
		if hd.FileInfo().IsDir() || hd.Typeflag == tar.TypeXGlobalHeader || hd.Typeflag == tar.TypeXHeader {
			continue
		}
		// A name with a backslash comes from Windows: it is split at
		// backslashes only, and a slash in it is part of a component
		// (`0/\0` is the file "0" of chart "0/").
		sep := "/"
		if strings.Contains(hd.Name, `\`) {
			sep = `\`
		}
		_, rest, _ := strings.Cut(hd.Name, sep)
		rest = strings.ReplaceAll(rest, sep, "/")
		if clean := path.Clean(rest); path.IsAbs(rest) || clean == ".." || strings.HasPrefix(clean, "../") {
			return hd.Name
		}
	}
}

// How FuzzParseChart reads its input.
const (
	// formArtifact: the bytes are the artifact.
	formArtifact = iota
	// formEntries: the bytes list tar entries (see entriesArchive).
	formEntries
	// formEdit: the bytes edit a real packaged chart (see editArchive).
	formEdit
	numForms
)

// entriesArchive builds a chart archive from a compact list of entries, so
// that the fuzzer can work on names and contents without wading through
// 512-byte tar blocks: entries are separated by NUL, and each is a name, a
// newline and the body. A name ending in '/' is a directory. Entries the tar
// writer refuses are left out.
func entriesArchive(list []byte) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, rec := range bytes.Split(list, []byte{0}) {
		name, body, _ := bytes.Cut(rec, []byte("\n"))
		if len(name) == 0 {
			continue
		}
		hdr := &tar.Header{Name: string(name), Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(1700000000, 0)}
		if name[len(name)-1] == '/' {
			hdr.Typeflag, hdr.Mode, hdr.Size, body = tar.TypeDir, 0o755, 0, nil
		}
		if tw.WriteHeader(hdr) != nil {
			continue
		}
		_, _ = tw.Write(body)
	}
	_ = tw.Close()
	return gzipped(buf.Bytes())
}

func encodeEntries(entries ...tarEntry) []byte {
	recs := make([][]byte, 0, len(entries))
	for _, e := range entries {
		recs = append(recs, []byte(e.name+"\n"+e.body))
	}
	return bytes.Join(recs, []byte{0})
}

// editArchive applies an edit to a copy of a real archive, so that the
// fuzzer can truncate and corrupt a 16 KiB chart through a few bytes of
// input: the fuzzer minimises every input that reaches new code by trying
// to drop every range of its bytes, which for the archive itself would take
// longer than a whole run. The edit is a big-endian uint16 length to cut
// the archive to (0 keeps it whole), then any number of (uint16 offset,
// byte) pairs, each XORing the byte into the archive at the offset modulo
// its length.
func editArchive(base, edit []byte) []byte {
	out := bytes.Clone(base)
	if len(edit) >= 2 {
		if cut := int(edit[0])<<8 | int(edit[1]); cut != 0 && cut < len(out) {
			out = out[:cut]
		}
		edit = edit[2:]
	}
	for ; len(edit) >= 3 && len(out) > 0; edit = edit[3:] {
		out[(int(edit[0])<<8|int(edit[1]))%len(out)] ^= edit[2]
	}
	return out
}

func editBytes(cut int, flips ...int) []byte {
	b := []byte{byte(cut >> 8), byte(cut)}
	for _, off := range flips {
		b = append(b, byte(off>>8), byte(off), 0xff)
	}
	return b
}

// chartFiles lists every file a loaded chart holds, its subcharts'
// included, each under the path it would have in the chart directory.
// Raw holds every file of the chart itself; Templates and Files are views of
// it, listed too in case a loader ever fills them from elsewhere.
func chartFiles(ch *chartv2.Chart, prefix string) []string {
	var names []string
	for _, files := range [][]*common.File{ch.Raw, ch.Templates, ch.Files} {
		for _, fl := range files {
			names = append(names, prefix+fl.Name)
		}
	}
	// Subcharts go by position: their names are chart metadata, not
	// paths, and are not what is checked here.
	for i, dep := range ch.Dependencies() {
		names = append(names, chartFiles(dep, fmt.Sprintf("%scharts/%d/", prefix, i))...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// FuzzParseChart fuzzes the artifact bytes parseChart loads, in one of
// three forms: the artifact itself; a list of tar entries (entriesArchive),
// so that mutations reach names and chart files instead of dying in
// deflate; or an edit of the podinfo chart as Helm packages it from
// the repository's copy (editArchive), for truncated and corrupted real
// archives. What must hold:
//   - parseChart never panics and returns within seconds;
//   - anything without the gzip magic is refused;
//   - a regular entry whose path leaves the chart directory (../, an
//     absolute path after the chart's own directory) makes the load fail:
//     Helm refuses those rather than skipping them, and this asserts that
//     behaviour so that no such file is ever handed on;
//   - a failed load returns no chart;
//   - a loaded chart is one Helm would install: valid metadata of API v1
//     or v2, every file (subcharts' too) under a clean relative path, and
//     loading the same bytes again gives the same chart;
//   - podinfo and the hand-made valid charts load with their name, version
//     and files.
func FuzzParseChart(f *testing.F) {
	type expected struct {
		name, version string
		files         []string
	}
	// want maps the archive of a valid seed to what loading it must give.
	want := map[string]expected{}
	files := []string{"Chart.yaml", "templates/configmap.yaml", "values.yaml"}
	base := packaged(f, "app", "1.0.0")
	want[string(base)] = expected{"app", "1.0.0", files}
	data, ch := packageDir(f, podinfoDir)
	base = data
	want[string(base)] = expected{ch.Name(), ch.Metadata.Version, chartFiles(ch, "")}
	archiveOf := func(data []byte, form uint8) []byte {
		switch form % numForms {
		case formEntries:
			return entriesArchive(data)
		case formEdit:
			return editArchive(base, data)
		}
		return data
	}
	valid := func(data []byte, form uint8, name, version string, files ...string) {
		want[string(archiveOf(data, form))] = expected{name, version, files}
		f.Add(data, form)
	}

	// The packaged chart whole, and truncated and corrupted: a cut inside
	// the gzip stream, a cut of the gzip trailer only (the tar ends before
	// it, so this loads: the artifact's digest, checked before parsing, is
	// what catches it), a flipped byte in the compressed body.
	f.Add([]byte{}, uint8(formEdit))
	f.Add(editBytes(len(base)/2), uint8(formEdit))
	f.Add(editBytes(len(base)-4), uint8(formEdit))
	f.Add(editBytes(0, len(base)/2), uint8(formEdit))

	// Hand-made charts, as helm package and as source-controller lay them
	// out (see helpers_test.go).
	valid(packaged(f, "app", "1.0.0"), formArtifact, "app", "1.0.0", files...)
	valid(tarGz(f, chartEntries("app", "2.0.0")...), formArtifact, "app", "2.0.0", files...)
	valid(encodeEntries(chartEntries("app", "2.0.0")...), formEntries, "app", "2.0.0", files...)
	valid(encodeEntries(tarEntry{name: "old/Chart.yaml", body: "apiVersion: v1\nname: old\nversion: 0.1.0\n"}), formEntries, "old", "0.1.0", "Chart.yaml")

	chart := "apiVersion: v2\nname: app\nversion: 1.0.0\n"
	// A first component of ".." or "" is the chart's directory, which the
	// loader drops: these stay inside the chart.
	valid(encodeEntries(tarEntry{name: "../Chart.yaml", body: chart}, tarEntry{name: "../x", body: "x"}), formEntries, "app", "1.0.0", "Chart.yaml", "x")
	valid(encodeEntries(tarEntry{name: "/Chart.yaml", body: chart}), formEntries, "app", "1.0.0", "Chart.yaml")
	// A subchart, so the loader recurses.
	valid(encodeEntries(tarEntry{name: "app/Chart.yaml", body: chart},
		tarEntry{name: "app/charts/sub/Chart.yaml", body: "apiVersion: v2\nname: sub\nversion: 0.0.1\n"},
		tarEntry{name: "app/charts/sub/templates/a.yaml", body: "a: b\n"}), formEntries,
		// The parent keeps the subchart's files among its own too.
		"app", "1.0.0", "Chart.yaml", "charts/0/Chart.yaml", "charts/0/templates/a.yaml", "charts/sub/Chart.yaml", "charts/sub/templates/a.yaml")

	for _, seed := range [][]byte{
		nil,
		[]byte("junk"),
		gzipMagic,
		gzipped(nil),                // an empty gzip stream
		gzipped(make([]byte, 1024)), // an empty tar: only its end blocks
		gzipped([]byte("not a tar, but long enough to be read as a header " + strings.Repeat("x", 512))),
		tarGz(f, tarEntry{name: "app/Chart.yaml", body: chart}, tarEntry{name: "../x", body: "x"}, tarEntry{name: "app/../../x", body: "x"}),
	} {
		f.Add(seed, uint8(formArtifact))
	}
	for _, entries := range [][]tarEntry{
		{{name: "app/values.yaml", body: "a: 1\n"}},
		{{name: "app/Chart.yaml", body: "apiVersion: v2\nname: app\n"}},
		{{name: "app/Chart.yaml", body: "apiVersion: v3\nname: app\nversion: 1.0.0\n"}},
		{{name: "Chart.yaml", body: chart}},
		// Paths leaving the chart directory, in the spellings a loader has
		// to see through.
		{{name: "app/Chart.yaml", body: chart}, {name: "app/../../x", body: "x"}},
		{{name: "app/Chart.yaml", body: chart}, {name: "app/templates/../../../etc/passwd", body: "x"}},
		{{name: "app/Chart.yaml", body: chart}, {name: "app//etc/passwd", body: "x"}},
		{{name: "app/Chart.yaml", body: chart}, {name: `app\..\..\x`, body: "x"}},
		{{name: "app/Chart.yaml", body: chart}, {name: "app/..", body: "x"}},
		{{name: "app/Chart.yaml", body: chart}, {name: "app/../../"}},
	} {
		f.Add(encodeEntries(entries...), uint8(formEntries))
	}

	f.Fuzz(func(t *testing.T, input []byte, form uint8) {
		data := archiveOf(input, form)
		type result struct {
			ch  *chartv2.Chart
			err error
		}
		load := func() result {
			done := make(chan result, 1)
			go func() {
				ch, err := parseChart(data)
				done <- result{ch, err}
			}()
			select {
			case r := <-done:
				return r
			case <-time.After(10 * time.Second):
				t.Fatalf("parseChart of %d bytes has not returned after 10s", len(data))
				return result{}
			}
		}
		r := load()

		if !bytes.HasPrefix(data, gzipMagic) && r.err == nil {
			t.Fatal("parseChart accepted data without the gzip magic")
		}
		if name := escapingEntry(data); name != "" && r.err == nil {
			t.Fatalf("parseChart accepted an archive with entry %q, outside the chart; files: %v", name, chartFiles(r.ch, ""))
		}
		if exp, ok := want[string(data)]; ok {
			if r.err != nil {
				t.Fatalf("valid seed %s %s: %v", exp.name, exp.version, r.err)
			}
			if r.ch.Name() != exp.name || r.ch.Metadata.Version != exp.version {
				t.Fatalf("valid seed loaded as %s %s, want %s %s", r.ch.Name(), r.ch.Metadata.Version, exp.name, exp.version)
			}
			if got := chartFiles(r.ch, ""); !slices.Equal(got, exp.files) {
				t.Fatalf("valid seed loaded with files %v, want %v", got, exp.files)
			}
		}
		if r.err != nil {
			if r.ch != nil {
				t.Fatalf("parseChart returned a chart with its error %v", r.err)
			}
			return
		}

		if r.ch == nil || r.ch.Metadata == nil {
			t.Fatal("parseChart returned no chart and no error")
		}
		if err := r.ch.Validate(); err != nil {
			t.Fatalf("parseChart returned a chart that does not validate: %v", err)
		}
		if v := r.ch.Metadata.APIVersion; v != chartv2.APIVersionV1 && v != chartv2.APIVersionV2 {
			t.Fatalf("parseChart returned a chart of API version %q", v)
		}
		files := chartFiles(r.ch, "")
		for _, name := range files {
			if name == "" || path.IsAbs(name) || path.Clean(name) != name || name == ".." || strings.HasPrefix(name, "../") {
				t.Fatalf("chart file %q is not a clean path inside the chart", name)
			}
		}
		again := load()
		if again.err != nil || again.ch.Name() != r.ch.Name() || again.ch.Metadata.Version != r.ch.Metadata.Version ||
			!slices.Equal(chartFiles(again.ch, ""), files) {
			t.Fatalf("loading the same bytes again gave %v, %v", again.ch, again.err)
		}
	})
}
