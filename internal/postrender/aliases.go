package postrender

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"sigs.k8s.io/kustomize/kyaml/kio"
)

// inlineAliases makes every document of Helm's output stand alone.
//
// Before post-rendering, Helm 4 flattens a `kind: List` template into one
// document per item but leaves YAML aliases as the chart wrote them. An
// item whose alias (*name) points at an anchor (&name) in another item then
// no longer parses: anchors only reach within their document. Without a
// post renderer Helm never re-parses the flattened stream, so such charts
// install fine elsewhere; since this controller always post-renders (the
// origin labels), it must cope.
//
// The fix: read the stream again as the items of one List document, so
// every alias finds its anchor, and replace each alias by a copy of the
// value it names. Streams that parse as they are are returned unchanged.
func inlineAliases(in *bytes.Buffer) (*bytes.Buffer, error) {
	_, err := kio.ParseAll(in.String())
	if err == nil {
		return in, nil
	}
	if !strings.Contains(err.Error(), "unknown anchor") {
		return nil, fmt.Errorf("parsing the rendered manifests: %w", err)
	}
	nodes, err := kio.ParseAll(asListItems(in.String()))
	if err != nil {
		return nil, fmt.Errorf("parsing the rendered manifests with aliases across documents: %w", err)
	}
	for _, n := range nodes {
		if err := n.DeAnchor(); err != nil {
			return nil, fmt.Errorf("inlining YAML aliases in %s: %w", describe(n), err)
		}
	}
	out, err := kio.StringAll(nodes)
	if err != nil {
		return nil, fmt.Errorf("writing the manifests: %w", err)
	}
	return bytes.NewBufferString(out), nil
}

// asListItems turns a multi-document YAML stream into one List document
// with each document as an item. The stream is split as Helm splits
// manifests (releaseutil.SplitManifests: at lines starting "---"; a block
// scalar's lines are indented, so none of them can be such a line), and
// each document is indented as a sequence entry.
func asListItems(stream string) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	docs := releaseutil.SplitManifests(stream)
	keys := slices.Collect(maps.Keys(docs))
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	for _, key := range keys {
		for i, line := range strings.Split(strings.TrimRight(docs[key], "\n"), "\n") {
			switch {
			case i == 0:
				b.WriteString("- ")
			case line != "":
				b.WriteString("  ")
			}
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
