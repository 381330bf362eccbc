package sequencing

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Annotations a chart's templates and Chart.yaml use to order a release.
const (
	// AnnotationResourceGroup names the one group a resource belongs to.
	AnnotationResourceGroup = "helm.sh/resource-group"
	// AnnotationDependsOnGroups is a JSON list of the groups of the same
	// chart that must be ready before the resource is applied.
	AnnotationDependsOnGroups = "helm.sh/depends-on/resource-groups"
	// AnnotationDependsOnSubcharts, in Chart.yaml's annotations, is a JSON
	// list of subcharts (names or aliases) that must be ready before the
	// chart's own resources are applied.
	AnnotationDependsOnSubcharts = "helm.sh/depends-on/subcharts"
)

// ObjectID identifies a Kubernetes object of a release. Namespace is empty
// for cluster-scoped objects and for namespaced ones whose manifest leaves
// it to the release namespace.
type ObjectID struct {
	Group     string
	Kind      string
	Namespace string
	Name      string
}

func (id ObjectID) String() string {
	if id.Namespace == "" {
		return id.Kind + "/" + id.Name
	}
	return id.Kind + "/" + id.Namespace + "/" + id.Name
}

// Resource is one object of a rendered release, with what sequencing needs
// to know about it.
type Resource struct {
	ID ObjectID
	// Chart is the path of the chart whose template rendered it: the root
	// chart's name, then each subchart's name (or alias), joined by '/'.
	Chart       string
	Annotations map[string]string
}

// Chart is what sequencing reads from one chart's Chart.yaml.
type Chart struct {
	// Dependencies are the names (aliases where given) of the chart's
	// declared dependencies, each with the sibling dependencies it names
	// in its depends-on list.
	Dependencies map[string][]string `json:"dependencies,omitempty"`
	// DependsOn are the subcharts the chart's own resources need first
	// (its helm.sh/depends-on/subcharts annotation).
	DependsOn []string `json:"dependsOn,omitempty"`
}

// Charts maps chart paths (see Resource.Chart) to their Chart.yaml facts.
// Charts without sequencing facts may be left out.
type Charts map[string]Chart

// Batch is a set of resources applied together. The resources of a waited
// batch must all be ready before the next batch is applied.
type Batch struct {
	// Name says what the batch holds, for conditions and events: its
	// resource groups ("db", "backend/cache"), or "subchart backend" for
	// the unsequenced resources of a subchart others wait for.
	Name      string
	Resources []ObjectID
	// Wait is false only for the release's unsequenced resources, the last
	// batch when there are any: the action's own readiness wait covers
	// them.
	Wait bool
}

// Plan is the order a release is applied in.
type Plan struct {
	Batches []Batch
	// Warnings name each misconfiguration that made a resource
	// unsequenced: a dependency on a group or subchart that does not
	// exist, an isolated group.
	Warnings []string
}

// ErrInvalidOrder matches (errors.Is) every error in a chart's ordering:
// a cycle, or an ordering or readiness annotation that cannot be read.
// Retrying does not help; only a new chart does.
var ErrInvalidOrder = errors.New("invalid resource order")

// orderError is an ordering annotation that cannot be read.
type orderError struct{ msg string }

func (e *orderError) Error() string        { return e.msg }
func (e *orderError) Is(target error) bool { return target == ErrInvalidOrder }

// invalidOrder wraps err, which describes a broken ordering annotation, so
// that it matches ErrInvalidOrder.
func invalidOrder(err error) error {
	if err == nil || errors.Is(err, ErrInvalidOrder) {
		return err
	}
	return &wrappedOrderError{err}
}

type wrappedOrderError struct{ err error }

func (e *wrappedOrderError) Error() string        { return e.err.Error() }
func (e *wrappedOrderError) Unwrap() error        { return e.err }
func (e *wrappedOrderError) Is(target error) bool { return target == ErrInvalidOrder }

// CycleError reports resource groups or subcharts that depend on each
// other in a circle; no order exists and nothing may be applied.
type CycleError struct {
	// Chart is the chart path the cycle is in.
	Chart string
	// What is "resource groups" or "subcharts".
	What string
	// Cycle lists the members in order, the first repeated at the end.
	Cycle []string
}

// Is makes a cycle match ErrInvalidOrder.
func (e *CycleError) Is(target error) bool { return target == ErrInvalidOrder }

func (e *CycleError) Error() string {
	return fmt.Sprintf("%s of chart %s depend on each other in a cycle: %s", e.What, e.Chart, strings.Join(e.Cycle, " → "))
}

// NewPlan orders resources by their resource groups and their charts'
// subchart dependencies. It fails on a cycle or on an annotation that is
// not a JSON list of names, before anything is applied.
func NewPlan(resources []Resource, charts Charts) (*Plan, error) {
	tree := buildTree(resources, charts)
	var warnings []string
	steps, tail, err := tree.root.sequence(&warnings)
	if err != nil {
		return nil, err
	}
	plan := &Plan{Warnings: warnings}
	for _, s := range steps {
		plan.Batches = append(plan.Batches, Batch{Name: s.name(), Resources: s.resources, Wait: true})
	}
	if len(tail) > 0 {
		plan.Batches = append(plan.Batches, Batch{Name: "unsequenced", Resources: tail})
	}
	return plan, nil
}

// step is one batch under construction: what it holds and which groups.
type step struct {
	labels    []string
	resources []ObjectID
}

func (s step) name() string {
	return strings.Join(s.labels, ", ")
}

// chartNode is one chart of the release with its own resources and its
// rendered subcharts.
type chartNode struct {
	path      string
	facts     Chart
	resources []Resource
	subcharts map[string]*chartNode
}

type tree struct {
	root *chartNode
}

// buildTree places each resource in its chart. The root is the first
// segment every chart path shares; a release renders from one root chart.
func buildTree(resources []Resource, charts Charts) tree {
	t := tree{}
	node := func(path string) *chartNode {
		segments := strings.Split(path, "/")
		if t.root == nil {
			t.root = &chartNode{path: segments[0], facts: charts[segments[0]], subcharts: map[string]*chartNode{}}
		}
		n := t.root
		for i, name := range segments[1:] {
			child, ok := n.subcharts[name]
			if !ok {
				p := strings.Join(segments[:i+2], "/")
				child = &chartNode{path: p, facts: charts[p], subcharts: map[string]*chartNode{}}
				n.subcharts[name] = child
			}
			n = child
		}
		return n
	}
	for _, r := range resources {
		n := node(r.Chart)
		n.resources = append(n.resources, r)
	}
	if t.root == nil {
		t.root = &chartNode{subcharts: map[string]*chartNode{}}
	}
	return t
}

// sequence returns the chart's waited steps and its tail: the resources
// that nothing in or above this chart has to wait for.
//
// The chart's units are its own resources ("self") and each subchart. A
// unit that another unit depends on is applied completely, its tail as a
// last waited step, before its dependents; a unit nothing depends on hands
// its tail up. Units of the same depth in the unit graph run side by side:
// their steps are merged pairwise.
func (n *chartNode) sequence(warnings *[]string) ([]step, []ObjectID, error) {
	own, ownTail, err := n.sequenceGroups(warnings)
	if err != nil {
		return nil, nil, err
	}
	if len(n.subcharts) == 0 && len(n.facts.DependsOn) == 0 {
		return own, ownTail, nil
	}

	const self = ""
	units := map[string][]string{self: n.subchartNames(n.facts.DependsOn, "the chart's "+AnnotationDependsOnSubcharts, warnings)}
	for name := range n.subcharts {
		units[name] = n.subchartNames(n.facts.Dependencies[name], "subchart "+name+"'s depends-on", warnings)
	}
	levels, err := layers(units)
	if err != nil {
		var cycle *CycleError
		if errors.As(err, &cycle) {
			cycle.Chart, cycle.What = n.path, "subcharts"
		}
		return nil, nil, err
	}
	needed := dependedOn(units)

	var steps []step
	tail := ownTail
	for _, level := range levels {
		var merged []step
		for _, name := range level {
			if name == self {
				merged = zipSteps(merged, own)
				continue
			}
			subSteps, subTail, err := n.subcharts[name].sequence(warnings)
			if err != nil {
				return nil, nil, err
			}
			if needed[name] && len(subTail) > 0 {
				subSteps = append(subSteps, step{labels: []string{"subchart " + n.subcharts[name].relPath()}, resources: subTail})
				subTail = nil
			}
			merged = zipSteps(merged, subSteps)
			tail = append(tail, subTail...)
		}
		steps = append(steps, merged...)
	}
	return steps, tail, nil
}

// relPath is the chart's path below the root chart, which names it in
// batch names.
func (n *chartNode) relPath() string {
	_, rel, _ := strings.Cut(n.path, "/")
	return rel
}

// subchartNames keeps the names that are rendered subcharts of n. A name
// declared in Chart.yaml but not rendered (a disabled dependency) is
// dropped silently; an unknown one with a warning.
func (n *chartNode) subchartNames(names []string, where string, warnings *[]string) []string {
	var kept []string
	for _, name := range names {
		if _, ok := n.subcharts[name]; ok {
			kept = append(kept, name)
			continue
		}
		if _, declared := n.facts.Dependencies[name]; !declared {
			*warnings = append(*warnings, fmt.Sprintf("chart %s: %s names %q, which is not a dependency of the chart; ignored", n.path, where, name))
		}
	}
	return kept
}

// member is one of a chart's own resources in a group.
type member struct {
	id    ObjectID
	group string
	needs []string
}

// sequenceGroups orders the chart's own resources by their groups.
func (n *chartNode) sequenceGroups(warnings *[]string) ([]step, []ObjectID, error) {
	var grouped []member
	var unsequenced []ObjectID
	for _, r := range n.resources {
		group := strings.TrimSpace(r.Annotations[AnnotationResourceGroup])
		deps, err := groupList(r)
		if err != nil {
			return nil, nil, err
		}
		switch {
		case group == "" && len(deps) == 0:
			unsequenced = append(unsequenced, r.ID)
			continue
		case group == "":
			// A resource that needs groups without joining one is a
			// group of its own that nothing can name.
			group = "(" + r.ID.String() + ")"
		}
		grouped = append(grouped, member{id: r.ID, group: group, needs: deps})
	}
	grouped, unsequenced = n.dropMissingDependencies(grouped, unsequenced, warnings)

	needs := map[string][]string{}
	for _, m := range grouped {
		needs[m.group] = append(needs[m.group], m.needs...)
	}
	grouped, unsequenced = n.dropIsolatedGroups(grouped, needs, unsequenced, warnings)

	levels, err := layers(needs)
	if err != nil {
		var cycle *CycleError
		if errors.As(err, &cycle) {
			cycle.Chart, cycle.What = n.path, "resource groups"
		}
		return nil, nil, err
	}
	prefix := n.relPath()
	if prefix != "" {
		prefix += "/"
	}
	steps := make([]step, 0, len(levels))
	for _, level := range levels {
		var s step
		for _, group := range level {
			s.labels = append(s.labels, prefix+group)
			for _, m := range grouped {
				if m.group == group {
					s.resources = append(s.resources, m.id)
				}
			}
		}
		steps = append(steps, s)
	}
	return steps, unsequenced, nil
}

// dropMissingDependencies makes each resource that needs a group no
// resource of the chart belongs to unsequenced, with a warning. Dropping
// one can empty a group others need, so it repeats until nothing changes.
func (n *chartNode) dropMissingDependencies(grouped []member, unsequenced []ObjectID, warnings *[]string) ([]member, []ObjectID) {
	for {
		exists := map[string]bool{}
		for _, m := range grouped {
			exists[m.group] = true
		}
		i := slices.IndexFunc(grouped, func(m member) bool {
			return slices.ContainsFunc(m.needs, func(g string) bool { return !exists[g] })
		})
		if i < 0 {
			return grouped, unsequenced
		}
		m := grouped[i]
		missing := slices.DeleteFunc(slices.Clone(m.needs), func(g string) bool { return exists[g] })
		*warnings = append(*warnings, fmt.Sprintf("chart %s: %s depends on resource group(s) %s, which no resource of the chart belongs to; applied unsequenced",
			n.path, m.id, strings.Join(quoteAll(missing), ", ")))
		unsequenced = append(unsequenced, m.id)
		grouped = slices.Delete(grouped, i, i+1)
	}
}

// dropIsolatedGroups makes groups that need nothing and that nothing needs
// unsequenced, with a warning: ordering them means nothing.
func (n *chartNode) dropIsolatedGroups(grouped []member, needs map[string][]string, unsequenced []ObjectID, warnings *[]string) ([]member, []ObjectID) {
	needed := dependedOn(needs)
	for _, group := range slices.Sorted(maps.Keys(needs)) {
		if len(needs[group]) > 0 || needed[group] {
			continue
		}
		*warnings = append(*warnings, fmt.Sprintf("chart %s: resource group %q neither depends on another group nor is depended on; applied unsequenced", n.path, group))
		delete(needs, group)
		grouped = slices.DeleteFunc(grouped, func(m member) bool {
			if m.group != group {
				return false
			}
			unsequenced = append(unsequenced, m.id)
			return true
		})
	}
	return grouped, unsequenced
}

// groupList reads a resource's depends-on annotation.
func groupList(r Resource) ([]string, error) {
	raw, ok := r.Annotations[AnnotationDependsOnGroups]
	if !ok {
		return nil, nil
	}
	names, err := ParseNameList(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: annotation %s: %w", r.ID, AnnotationDependsOnGroups, err)
	}
	return names, nil
}

// ParseNameList reads an annotation holding a JSON list of names. Empty
// names and duplicates are dropped.
func ParseNameList(raw string) ([]string, error) {
	var names []string
	if err := json.Unmarshal([]byte(raw), &names); err != nil {
		return nil, &orderError{fmt.Sprintf("want a JSON list of names such as [\"database\"], got: %s", raw)}
	}
	var out []string
	for _, name := range names {
		name = strings.TrimSpace(name)
		if name != "" && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// dependedOn returns the set of nodes some node needs.
func dependedOn(needs map[string][]string) map[string]bool {
	out := map[string]bool{}
	for _, deps := range needs {
		for _, d := range deps {
			out[d] = true
		}
	}
	return out
}

// zipSteps merges two step lists that may run side by side: step i of the
// result holds step i of both.
func zipSteps(a, b []step) []step {
	out := make([]step, max(len(a), len(b)))
	for i := range out {
		if i < len(a) {
			out[i].labels = append(out[i].labels, a[i].labels...)
			out[i].resources = append(out[i].resources, a[i].resources...)
		}
		if i < len(b) {
			out[i].labels = append(out[i].labels, b[i].labels...)
			out[i].resources = append(out[i].resources, b[i].resources...)
		}
	}
	return out
}

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}
