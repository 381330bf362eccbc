package realcharts

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"sigs.k8s.io/yaml"
)

// KubeVersion is the test cluster's Kubernetes version (hack/tools/build.sh
// builds kube-apiserver at it); charts are rendered for it.
const KubeVersion = "v1.36.3"

// Coverage is what a chart exercises once rendered with its simulation
// values, as `helm template` would render it (lookup finds nothing).
type Coverage struct {
	// Objects counts the release's objects, Hooks its hooks (crds/ is
	// CRDsDir).
	Objects, Hooks int
	// HookPhases are the hook events used, sorted; DeletePolicies the
	// delete policies.
	HookPhases, DeletePolicies []string
	// Weighted: some hook has a weight other than 0.
	Weighted bool
	// TTLHookJobs counts hook Jobs with ttlSecondsAfterFinished, TTLJobs
	// the release's Jobs and CronJobs whose Jobs have one.
	TTLHookJobs, TTLJobs int
	// CRDsDir counts the CRDs of crds/ directories, CRDsTemplated those
	// rendered from templates.
	CRDsDir, CRDsTemplated int
	// Subcharts lists the dependencies as "name if condition"; Library
	// tells whether one is a library chart, Conditional whether a packaged
	// one has a condition.
	Subcharts            []string
	Library, Conditional bool
	// Lookup: a template calls lookup. Schema: the chart has a values
	// schema.
	Lookup, Schema bool
	// ClaimTemplates counts StatefulSets with volumeClaimTemplates;
	// Webhooks counts admission webhook configurations.
	ClaimTemplates, Webhooks int
}

// Cover renders the chart in dir with the values as release name in
// namespace ns, without a cluster, and reports what it covers.
func Cover(dir, name, ns string, values map[string]any) (Coverage, error) {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return Coverage{}, fmt.Errorf("loading chart %s: %w", dir, err)
	}
	cov := Coverage{CRDsDir: len(ch.CRDObjects()), Schema: len(ch.Schema) > 0}
	cov.addChartFacts(ch)
	install := action.NewInstall(action.NewConfiguration())
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName, install.Namespace = name, ns
	install.Replace = true
	if install.KubeVersion, err = common.ParseKubeVersion(KubeVersion); err != nil {
		return Coverage{}, fmt.Errorf("the test cluster's version: %w", err)
	}
	rel, err := install.RunWithContext(context.Background(), ch, copyValues(values))
	if err != nil {
		return Coverage{}, fmt.Errorf("rendering chart %s: %w", dir, err)
	}
	r, ok := rel.(*releasev1.Release)
	if !ok {
		return Coverage{}, fmt.Errorf("rendering chart %s: unexpected release type %T", dir, rel)
	}
	cov.Lookup, err = callsLookup(dir)
	if err != nil {
		return Coverage{}, err
	}
	cov.addHooks(r.Hooks)
	for _, manifest := range releaseutil.SplitManifests(r.Manifest) {
		if err := cov.addObject(manifest, false); err != nil {
			return Coverage{}, err
		}
	}
	return cov, nil
}

// copyValues gives Helm a copy: installing merges into the map it gets.
func copyValues(values map[string]any) map[string]any {
	data, _ := yaml.Marshal(values)
	out := map[string]any{}
	_ = yaml.Unmarshal(data, &out)
	return out
}

func (c *Coverage) addChartFacts(ch *chart.Chart) {
	packaged := map[string]bool{}
	for _, sub := range ch.Dependencies() {
		packaged[sub.Name()] = true
		if sub.Metadata.Type == "library" {
			c.Library = true
		}
	}
	for _, dep := range ch.Metadata.Dependencies {
		entry := dep.Name
		if dep.Condition != "" {
			entry += " if " + dep.Condition
			c.Conditional = c.Conditional || packaged[dep.Name]
		}
		if !packaged[dep.Name] {
			entry += " (remote, not in the package)"
		}
		c.Subcharts = append(c.Subcharts, entry)
	}
}

func (c *Coverage) addHooks(hooks []*releasev1.Hook) {
	phases, policies := map[string]bool{}, map[string]bool{}
	for _, h := range hooks {
		for _, e := range h.Events {
			phases[string(e)] = true
		}
		for _, p := range h.DeletePolicies {
			policies[string(p)] = true
		}
		if h.Weight != 0 {
			c.Weighted = true
		}
		_ = c.addObject(h.Manifest, true)
	}
	c.HookPhases, c.DeletePolicies = sortedKeys(phases), sortedKeys(policies)
}

// object is the part of a rendered object that coverage reads.
type object struct {
	Kind string `json:"kind"`
	Spec struct {
		TTL                  *int64 `json:"ttlSecondsAfterFinished"`
		VolumeClaimTemplates []any  `json:"volumeClaimTemplates"`
		JobTemplate          struct {
			Spec struct {
				TTL *int64 `json:"ttlSecondsAfterFinished"`
			} `json:"spec"`
		} `json:"jobTemplate"`
	} `json:"spec"`
}

func (c *Coverage) addObject(manifest string, hook bool) error {
	var o object
	if err := yaml.Unmarshal([]byte(manifest), &o); err != nil {
		return fmt.Errorf("reading a rendered object: %w", err)
	}
	if o.Kind == "" {
		return nil
	}
	if hook {
		c.Hooks++
	} else {
		c.Objects++
	}
	switch o.Kind {
	case "Job":
		if o.Spec.TTL != nil && hook {
			c.TTLHookJobs++
		} else if o.Spec.TTL != nil {
			c.TTLJobs++
		}
	case "CronJob":
		if o.Spec.JobTemplate.Spec.TTL != nil {
			c.TTLJobs++
		}
	case "CustomResourceDefinition":
		c.CRDsTemplated++
	case "StatefulSet":
		if len(o.Spec.VolumeClaimTemplates) > 0 {
			c.ClaimTemplates++
		}
	case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
		c.Webhooks++
	}
	return nil
}

// callsLookup tells whether a template of the chart (or of a subchart)
// calls Helm's lookup function.
func callsLookup(dir string) (bool, error) {
	found := false
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || found || !strings.Contains(filepath.ToSlash(path), "/templates/") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found = strings.Contains(string(data), "lookup \"") || strings.Contains(string(data), "(lookup ")
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("reading the templates of %s: %w", dir, err)
	}
	return found, nil
}

// Features is the coverage in words, one short item each.
func (c Coverage) Features() []string {
	var out []string
	add := func(ok bool, f string, args ...any) {
		if ok {
			out = append(out, fmt.Sprintf(f, args...))
		}
	}
	add(len(c.HookPhases) > 0, "hooks %s", strings.Join(c.HookPhases, ", "))
	add(c.Weighted, "hook weights")
	add(len(c.DeletePolicies) > 0, "delete policies %s", strings.Join(c.DeletePolicies, ", "))
	add(c.TTLHookJobs > 0, "%d hook Job(s) with TTL", c.TTLHookJobs)
	add(c.TTLJobs > 0, "%d non-hook Job(s) or CronJob(s) with TTL", c.TTLJobs)
	add(c.CRDsDir > 0, "%d CRD(s) in crds/", c.CRDsDir)
	add(c.CRDsTemplated > 0, "%d templated CRD(s)", c.CRDsTemplated)
	add(len(c.Subcharts) > 0, "subcharts %s", strings.Join(c.Subcharts, ", "))
	add(c.Library, "library chart")
	add(c.Lookup, "lookup")
	add(c.Schema, "values schema")
	add(c.ClaimTemplates > 0, "StatefulSet with volumeClaimTemplates")
	add(c.Webhooks > 0, "%d admission webhook configuration(s)", c.Webhooks)
	add(c.Total() >= 50, "50+ objects")
	return out
}

// Total is every object an install creates: crds/, hooks and the
// release's own.
func (c Coverage) Total() int { return c.Objects + c.Hooks + c.CRDsDir }

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// CRDNames lists the names of the CRDs in the crds/ directories of the
// chart in dir and of its subcharts: Helm creates them before anything
// else and never deletes them.
func CRDNames(dir string) ([]string, error) {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", dir, err)
	}
	var names []string
	for _, crd := range ch.CRDObjects() {
		for _, doc := range releaseutil.SplitManifests(string(crd.File.Data)) {
			var head struct {
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				return nil, fmt.Errorf("reading %s of chart %s: %w", crd.Filename, dir, err)
			}
			if head.Metadata.Name != "" {
				names = append(names, head.Metadata.Name)
			}
		}
	}
	sort.Strings(names)
	return names, nil
}
