package preview

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/fluxcd/pkg/ssa/jsondiff"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/afterhooks/helm-controller/internal/recreate"
)

// Live changes of an object, beyond its patch operations.
const (
	// LiveNoChange: applying the object changes nothing in the cluster.
	LiveNoChange = "no change to the live object"
	// LiveExists: an object to create is already in the cluster; the
	// action takes it over.
	LiveExists = "already in the cluster: taken over"
	// LiveImmutable: the API server refuses the change in place; only a
	// recreate can make it (Action.Recreates says whether one would).
	LiveImmutable = "refused in place by the API server (immutable field): see recreates"
	// LiveMissing: an object of the stored release is not in the cluster
	// (deleted by hand, or never made by a failed action); Helm creates it.
	LiveMissing = "not in the cluster: created"
)

// absentNote is said of an object the action would delete that is not
// in the cluster.
const absentNote = "not in the cluster: nothing to delete"

// compareLive adds to the objects to update what a server-side
// apply dry run of the rendered manifest changes in the live objects: the
// drift checker's comparison (runner.DetectDrift), run on the manifest
// the action would apply; an object to create that is already there is
// taken over instead. Only the operations and paths are kept, never
// values.
func (a *Action) compareLive(ctx context.Context, in Input, rendered *releasev1.Release) error {
	set, refused, err := in.Helm.DetectRefused(ctx, rendered)
	if err != nil {
		return fmt.Errorf("comparing with the live objects (server-side dry run): %w", err)
	}
	a.Recreates = judgeRefused(ctx, a.Plan.RecreatePolicy(), refused)
	diffs := map[string]*jsondiff.Diff{}
	for _, d := range set {
		diffs[liveKey(d.GroupVersionKind().Kind, d.GetNamespace(), d.GetName())] = d
	}
	releaseNS := in.Object.GetReleaseNamespace()
	find := func(o Object) *jsondiff.Diff {
		if d := diffs[liveKey(o.Kind, o.Namespace, o.Name)]; d != nil || o.Namespace != "" {
			return d
		}
		return diffs[liveKey(o.Kind, releaseNS, o.Name)]
	}
	for _, list := range [][]Object{a.Objects.Update, a.Objects.Unchanged} {
		for i := range list {
			list[i].Live = liveChanges(find(list[i]))
		}
	}
	a.Objects.takeOver(find)
	a.Objects.createMissing(find)
	a.Objects.sort()
	return nil
}

// createMissing moves the objects to update or leave unchanged that are
// not in the cluster to those created: Helm's update creates what it
// does not find. The lists are left for the caller to sort.
func (o *Objects) createMissing(find func(Object) *jsondiff.Diff) {
	keep := func(list []Object) []Object {
		out := list[:0]
		for _, obj := range list {
			if d := find(obj); d != nil && d.Type == jsondiff.DiffTypeCreate {
				obj.Fields, obj.Live = nil, []string{LiveMissing}
				o.Create = append(o.Create, obj)
				continue
			}
			out = append(out, obj)
		}
		return out
	}
	o.Update, o.Unchanged = keep(o.Update), keep(o.Unchanged)
}

// takeOver moves the objects to create that are already in the cluster
// to those updated or unchanged: Helm takes them over, with their live
// state as the baseline. The lists are left for the caller to sort.
func (o *Objects) takeOver(find func(Object) *jsondiff.Diff) {
	create := o.Create[:0]
	for _, obj := range o.Create {
		d := find(obj)
		switch {
		case d == nil || d.Type == jsondiff.DiffTypeCreate || d.Type == jsondiff.DiffTypeExclude:
			create = append(create, obj)
		case d.Type == jsondiff.DiffTypeNone:
			obj.Live = []string{LiveExists, LiveNoChange}
			o.Unchanged = append(o.Unchanged, obj)
		default:
			obj.Live = append([]string{LiveExists}, liveChanges(d)...)
			o.Update = append(o.Update, obj)
		}
	}
	o.Create = create
}

// judgeRefused tells, for each object refused in place, what the
// action's updates would do with it: the recreate layer's own decision
// (recreate.Policy.Judge), with reads and dry runs only. Without a policy
// the action recreates nothing and fails with the API server's refusal.
func judgeRefused(ctx context.Context, policy *recreate.Policy, refused []recreate.Refused) []recreate.Verdict {
	verdicts := make([]recreate.Verdict, 0, len(refused))
	for _, r := range refused {
		if policy == nil {
			verdicts = append(verdicts, recreate.Verdict{Object: r.Object, Fields: recreate.Fields(r.Cause), Refusal: "the action recreates nothing"})
			continue
		}
		verdicts = append(verdicts, policy.Judge(ctx, r))
	}
	return verdicts
}

func liveKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// liveChanges says what applying the object does to its live copy.
func liveChanges(d *jsondiff.Diff) []string {
	switch {
	case d == nil, d.Type == jsondiff.DiffTypeCreate, d.Type == jsondiff.DiffTypeExclude:
		return nil
	case d.Type == jsondiff.DiffTypeNone:
		return []string{LiveNoChange}
	case len(d.Patch) == 0:
		return []string{LiveImmutable}
	}
	out := make([]string, 0, len(d.Patch))
	for _, op := range d.Patch {
		out = append(out, op.Type+" "+op.Path)
	}
	return out
}

// withoutKinds is rel with the objects of kinds ("Kind.group") left out
// of its manifest: kinds the cluster does not serve yet cannot be
// compared with it.
func withoutKinds(rel *releasev1.Release, kinds []string) *releasev1.Release {
	if len(kinds) == 0 {
		return rel
	}
	kept := *rel
	split := releaseutil.SplitManifests(rel.Manifest)
	keys := slices.Collect(maps.Keys(split))
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	var docs []string
	for _, key := range keys {
		doc := split[key]
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err == nil {
			gv, _ := schema.ParseGroupVersion(head.APIVersion)
			if slices.Contains(kinds, head.Kind+"."+gv.Group) {
				continue
			}
		}
		docs = append(docs, doc)
	}
	kept.Manifest = strings.Join(docs, "\n---\n")
	return &kept
}

// passOverAbsent moves the objects to delete that are not in the cluster
// to Absent: Helm's deletion passes over what it does not find, so the
// action deletes nothing there. An object of a namespaced kind without a
// namespace lives in releaseNS. Without a lookup every object stays.
func (o *Objects) passOverAbsent(ctx context.Context, lookup Lookup, releaseNS string) error {
	if lookup == nil {
		return nil
	}
	var present []Object
	for _, obj := range o.Delete {
		ns := obj.Namespace
		if ns == "" {
			ns = releaseNS
		}
		exists, err := lookup(ctx, obj.APIVersion, obj.Kind, ns, obj.Name)
		if err != nil {
			return fmt.Errorf("looking up %s, which the action deletes: %w", obj, err)
		}
		if exists {
			present = append(present, obj)
			continue
		}
		o.Absent = append(o.Absent, obj)
	}
	o.Delete = present
	return nil
}
