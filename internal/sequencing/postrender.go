package sequencing

import (
	"bytes"
	"fmt"
	"strings"

	"helm.sh/helm/v4/pkg/postrenderer"
	"sigs.k8s.io/yaml"
)

// helmFilenameAnnotation is the annotation Helm puts on every document it
// hands a post renderer, naming the template that rendered it; Helm
// removes it again afterwards.
const helmFilenameAnnotation = "postrenderer.helm.sh/postrender-filename"

// hookAnnotation marks Helm hooks, which are not sequenced.
const hookAnnotation = "helm.sh/hook"

// CheckOrder returns a post renderer that runs next (which may be nil) and
// then plans the order of its output, failing on a cycle or a broken
// depends-on annotation. Helm runs post renderers while it renders, before
// it stores the release or applies anything, so such a chart fails with
// nothing changed in the cluster.
func CheckOrder(next postrenderer.PostRenderer, charts Charts) postrenderer.PostRenderer {
	return orderCheck{next: next, charts: charts}
}

type orderCheck struct {
	next   postrenderer.PostRenderer
	charts Charts
}

func (c orderCheck) Run(rendered *bytes.Buffer) (*bytes.Buffer, error) {
	out := rendered
	if c.next != nil {
		var err error
		if out, err = c.next.Run(rendered); err != nil {
			return nil, err
		}
	}
	resources, err := renderedResources(out.Bytes())
	if err != nil {
		return nil, fmt.Errorf("reading the rendered manifests for their order: %w", err)
	}
	if _, err := NewPlan(resources, c.charts); err != nil {
		return nil, err
	}
	// Readiness expressions are checked here too, so a broken one fails
	// the action before anything is applied rather than halfway through.
	for _, r := range resources {
		if _, _, err := ParseReadiness(r.Annotations); err != nil {
			return nil, invalidOrder(fmt.Errorf("%s: %w", r.ID, err))
		}
	}
	return out, nil
}

// renderedResources reads the objects of a post renderer's stream, each
// placed in its chart by Helm's file name annotation. Hooks are left out.
func renderedResources(stream []byte) ([]Resource, error) {
	var out []Resource
	for i, doc := range splitDocuments(string(stream)) {
		var h header
		if err := yaml.Unmarshal([]byte(doc.content), &h); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if _, hook := h.Metadata.Annotations[hookAnnotation]; hook {
			continue
		}
		source := strings.Trim(h.Metadata.Annotations[helmFilenameAnnotation], "'\"")
		out = append(out, h.resources(ChartPath(source))...)
	}
	return out, nil
}
