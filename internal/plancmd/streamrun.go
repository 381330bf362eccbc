package plancmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/afterhooks/helm-controller/internal/preview"
)

// planned is the plan of one HelmRelease of a stream, or why there is
// none.
type planned struct {
	HelmRelease string           `json:"helmRelease"`
	Preview     *preview.Preview `json:"preview,omitempty"`
	Error       string           `json:"error,omitempty"`
}

// runStream plans every HelmRelease of a multi-document --file (only the
// one named, when a NAME is given), in dependsOn order, and prints them.
// A release that cannot be planned does not stop the others: its error is
// printed in its place, and the exit code is ExitError.
func runStream(ctx context.Context, o *options, docs [][]byte, stdout, stderr io.Writer, terminal bool) (int, error) {
	s, err := openSession(o)
	if err != nil {
		return ExitError, err
	}
	st, err := parseStream(o.file, docs, o.namespace)
	if err != nil {
		return ExitError, err
	}
	releases := st.releases
	if o.name != "" {
		releases = nil
		for _, r := range st.releases {
			if r.Name == o.name && (!o.namespaceFlag || r.Namespace == o.namespace) {
				releases = append(releases, r)
			}
		}
		if len(releases) == 0 {
			return ExitError, fmt.Errorf("reading --file %s: no HelmRelease %s in it", o.file, o.name)
		}
	}
	c := &overlay{Client: s.cluster, objects: st.objects}
	var out []planned
	for _, r := range releases {
		p := planned{HelmRelease: releaseKey(r).String()}
		obj, err := overLive(ctx, s.cluster, r)
		if err == nil {
			p.Preview, err = planRelease(ctx, s, c, obj, o)
		}
		if err != nil {
			p.Error = oneLine(err.Error())
		}
		out = append(out, p)
	}
	if err := writeStream(stdout, stderr, out, st, o, terminal); err != nil {
		return ExitError, err
	}
	return streamExit(out), nil
}

// streamExit is ExitError when a release could not be planned, else
// ExitChanges when one would change, else ExitNoChange.
func streamExit(out []planned) int {
	code := ExitNoChange
	for _, p := range out {
		switch {
		case p.Error != "":
			return ExitError
		case p.Preview.Changes():
			code = ExitChanges
		}
	}
	return code
}

// writeStream prints the plans of a stream: one after another as text, a
// JSON array, or a markdown summary. The count of ignored documents goes
// with the text and markdown, and to stderr beside the JSON array.
func writeStream(stdout, stderr io.Writer, out []planned, st *stream, o *options, terminal bool) error {
	ignored := st.ignoredSummary()
	switch o.output {
	case "json":
		if ignored != "" {
			fmt.Fprintln(stderr, "plan: "+ignored)
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	case "markdown":
		return writeStreamMarkdown(stdout, out, ignored)
	}
	fmt.Fprintf(stdout, "%d HelmReleases, in dependsOn order", len(out))
	if ignored != "" {
		fmt.Fprintf(stdout, "; %s", ignored)
	}
	fmt.Fprintln(stdout)
	color := o.color == "always" || (o.color == "auto" && terminal)
	for _, p := range out {
		fmt.Fprintln(stdout)
		if p.Error != "" {
			fmt.Fprintf(stdout, "HelmRelease %s: error: %s\n", p.HelmRelease, p.Error)
			continue
		}
		if err := preview.WriteText(stdout, p.Preview, color); err != nil {
			return err
		}
	}
	return nil
}

// writeStreamMarkdown writes the summary for a review: a table of every
// release's step, then a section per release.
func writeStreamMarkdown(w io.Writer, out []planned, ignored string) error {
	fmt.Fprintf(w, "## helm-controller plan: %d HelmReleases\n\n", len(out))
	fmt.Fprintln(w, "| HelmRelease | next step |")
	fmt.Fprintln(w, "|---|---|")
	for _, p := range out {
		step := "**error**"
		if p.Error == "" {
			step = string(p.Preview.Step)
		}
		fmt.Fprintf(w, "| `%s` | %s |\n", p.HelmRelease, step)
	}
	if ignored != "" {
		fmt.Fprintf(w, "\n%s.\n", ignored)
	}
	var set *preview.Settings
	for _, p := range out {
		fmt.Fprintln(w)
		if p.Error != "" {
			fmt.Fprintf(w, "### %s\n\n**error**: %s\n", p.HelmRelease, preview.MarkdownText(p.Error))
			continue
		}
		if err := preview.WriteMarkdown(w, p.HelmRelease, p.Preview); err != nil {
			return err
		}
		set = p.Preview.Settings
	}
	// One controller plans them all: its settings are said once.
	return preview.WriteMarkdownSettings(w, set)
}
