package sequencing

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	helmaction "helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// DryRun renders chrt with values as release name in namespace, without a
// cluster (as `helm template` does), and returns the plan an ordered
// install would follow, warnings included. A broken ordering annotation
// or a cycle is an error, as it is for the install.
func DryRun(ctx context.Context, chrt *chartv2.Chart, values map[string]any, name, namespace string) (*Plan, error) {
	charts, err := ChartsOf(chrt)
	if err != nil {
		return nil, err
	}
	cfg := helmaction.NewConfiguration(helmaction.ConfigurationSetLogger(slog.NewTextHandler(io.Discard, nil)))
	install := helmaction.NewInstall(cfg)
	install.DryRunStrategy = helmaction.DryRunClient
	install.ReleaseName, install.Namespace = name, namespace
	install.Replace = true
	install.PostRenderer = CheckOrder(nil, charts)
	out, err := install.RunWithContext(ctx, chrt, values)
	if err != nil {
		return nil, fmt.Errorf("rendering chart %s: %w", chrt.Name(), err)
	}
	rel, ok := out.(*releasev1.Release)
	if !ok {
		return nil, fmt.Errorf("rendering chart %s: unexpected release type %T", chrt.Name(), out)
	}
	resources, err := ParseManifest(rel.Manifest)
	if err != nil {
		return nil, err
	}
	return NewPlan(resources, charts)
}

// Describe writes the plan as text, one batch a line with what it needs
// and holds, then the warnings: what a chart author checks in CI.
func (p *Plan) Describe(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d batches\n", len(p.Batches))
	for i, batch := range p.Batches {
		fmt.Fprintf(&b, "%d. %s", i+1, batch.Name)
		if needs := positions(batch.Needs); needs != "" {
			fmt.Fprintf(&b, " (after %s, ready)", needs)
		}
		if after := positions(batch.After); after != "" {
			fmt.Fprintf(&b, " (after %s)", after)
		}
		if batch.Wait {
			b.WriteString(", waited for")
		} else {
			b.WriteString(", not waited for")
		}
		b.WriteByte('\n')
		for _, id := range batch.Resources {
			fmt.Fprintf(&b, "   %s\n", id)
		}
	}
	if len(p.Warnings) > 0 {
		b.WriteString("warnings:\n")
		for _, warning := range p.Warnings {
			fmt.Fprintf(&b, "- %s\n", warning)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// positions lists batch positions from 1.
func positions(ids []int) string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = fmt.Sprint(id + 1)
	}
	return strings.Join(out, ", ")
}
