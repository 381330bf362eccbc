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
	// AnnotationDependsOnDependencies, in Chart.yaml's annotations, is a
	// JSON object that maps a dependency (name or alias) to the list of
	// sibling dependencies it needs first: what HIP-0025's depends-on
	// field of a dependencies entry says, in a place that packaging keeps.
	// helm package, helm push and source-controller write Chart.yaml anew
	// from Helm's metadata, which keeps annotations and drops depends-on.
	// This key is this controller's; HIP-0025 has none.
	AnnotationDependsOnDependencies = "helm.sh/depends-on/dependencies"
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
	// declared dependencies, each with the sibling dependencies it needs
	// first: its depends-on field and its entry in the
	// helm.sh/depends-on/dependencies annotation.
	Dependencies map[string][]string `json:"dependencies,omitempty"`
	// DependsOn are the subcharts the chart's own resources need first
	// (its helm.sh/depends-on/subcharts annotation).
	DependsOn []string `json:"dependsOn,omitempty"`
	// OrderDeclared tells that Chart.yaml says something about the order
	// of its subcharts, even that there is none (an empty list): then a
	// lost order is not suspected (see Plan.Warnings).
	OrderDeclared bool `json:"orderDeclared,omitempty"`
}

// declaresOrder tells whether the chart says anything about the order of
// its subcharts. Facts recorded before OrderDeclared existed say it by
// their lists.
func (c Chart) declaresOrder() bool {
	if c.OrderDeclared || len(c.DependsOn) > 0 {
		return true
	}
	for _, needs := range c.Dependencies {
		if len(needs) > 0 {
			return true
		}
	}
	return false
}

// Charts maps chart paths (see Resource.Chart) to their Chart.yaml facts.
// Charts without sequencing facts may be left out.
type Charts map[string]Chart

// Batch is a set of resources applied together, once the batches it comes
// after are done.
type Batch struct {
	// Name says what the batch holds, for conditions and events: its
	// resource groups ("db", "backend/cache"), "subchart backend" for the
	// unsequenced resources of a subchart, "unsequenced" for the root
	// chart's.
	Name string
	// Chart is the path of the chart the batch belongs to.
	Chart     string
	Resources []ObjectID
	// Needs are the positions (in Plan.Batches, always earlier) of the
	// batches that must be ready before this one is applied.
	Needs []int
	// After are the positions of the batches that must be applied, and
	// ready when they wait, before this one is: the groups a chart's
	// unsequenced resources come after, which they do not need.
	After []int
	// Wait is true when a later batch needs this one: it is waited for
	// until ready. The readiness of the others is left to the action's
	// own wait, as HIP-0025 checks readiness only where something depends
	// on it.
	Wait bool
}

// Plan is the order a release is applied in: a graph of batches. Batches
// of different charts that do not need each other progress independently.
type Plan struct {
	// Batches are listed so that each comes after those it needs, by
	// depth, then chart by chart.
	Batches []Batch
	// Warnings name each misconfiguration that made a resource
	// unsequenced (a dependency on a group or subchart that does not
	// exist, an isolated group) and each chart whose subchart order looks
	// lost in packaging.
	Warnings []string
}

// Predecessors returns the positions of the batches b comes after, needed
// or not, sorted.
func (b Batch) Predecessors() []int {
	return uniqueSortedInts(append(slices.Clone(b.Needs), b.After...))
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
	t := buildTree(resources, charts)
	p := &planner{}
	if _, err := p.chart(t.root, nil, false); err != nil {
		return nil, err
	}
	return p.finish(), nil
}

// draft is a batch under construction; needs and after are indexes into
// planner.drafts.
type draft struct {
	labels    []string
	chart     string
	resources []ObjectID
	needs     []int
	after     []int
	// tail marks the unsequenced resources of a chart: tails nothing
	// waits for are merged when they come after the same batches.
	tail bool
}

type planner struct {
	drafts   []*draft
	warnings []string
}

func (p *planner) add(d *draft) int {
	p.drafts = append(p.drafts, d)
	return len(p.drafts) - 1
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

// self names a chart's own resources among its units (its subcharts have
// non-empty names).
const self = ""

// chart plans n and its subcharts, every batch of them after the batches
// of after (ready), and returns the batches it made. The chart's units
// are its own resources and each subchart; a unit waits for the units it
// names to be complete, and units that do not need each other progress
// independently. needed says that something outside waits for the whole
// chart: then its unsequenced resources are waited for too.
func (p *planner) chart(n *chartNode, after []int, needed bool) ([]int, error) {
	units := n.units(&p.warnings)
	levels, err := layers(units)
	if err != nil {
		var cycle *CycleError
		if errors.As(err, &cycle) {
			cycle.Chart, cycle.What = n.path, "subcharts"
		}
		return nil, err
	}
	p.warnLostOrder(n)
	neededUnits := dependedOn(units)
	made := map[string][]int{}
	var all []int
	for _, level := range levels {
		for _, u := range level {
			unitAfter := slices.Clone(after)
			for _, v := range units[u] {
				unitAfter = append(unitAfter, p.sinks(made[v])...)
			}
			var ids []int
			if u == self {
				ids, err = p.own(n, unitAfter, needed)
			} else {
				ids, err = p.chart(n.subcharts[u], unitAfter, needed || neededUnits[u])
			}
			if err != nil {
				return nil, err
			}
			made[u] = ids
			all = append(all, ids...)
		}
	}
	return all, nil
}

// units returns the chart's dependency graph of units: its own resources
// (self) and each rendered subchart, each with the units it needs.
func (n *chartNode) units(warnings *[]string) map[string][]string {
	units := map[string][]string{self: n.subchartNames(n.facts.DependsOn, "the chart's "+AnnotationDependsOnSubcharts, warnings)}
	for name := range n.subcharts {
		units[name] = n.subchartNames(n.facts.Dependencies[name], "subchart "+name+"'s depends-on", warnings)
	}
	return units
}

// own plans the chart's own resources: its groups layer by layer (a layer
// needs the one before), the first after after, then its unsequenced
// resources once the groups are through.
func (p *planner) own(n *chartNode, after []int, needed bool) ([]int, error) {
	layered, unsequenced, err := n.sequenceGroups(&p.warnings)
	if err != nil {
		return nil, err
	}
	var ids, previous []int
	needs := after
	for _, s := range layered {
		id := p.add(&draft{labels: s.labels, chart: n.path, resources: s.resources, needs: uniqueSortedInts(needs)})
		ids = append(ids, id)
		previous = []int{id}
		needs = previous
	}
	if len(unsequenced) == 0 {
		return ids, nil
	}
	tail := &draft{labels: []string{n.tailName()}, chart: n.path, resources: unsequenced, needs: uniqueSortedInts(after), tail: true}
	if needed {
		tail.needs = uniqueSortedInts(append(tail.needs, previous...))
	} else {
		tail.after = previous
	}
	return append(ids, p.add(tail)), nil
}

// tailName names a chart's unsequenced resources.
func (n *chartNode) tailName() string {
	if rel := n.relPath(); rel != "" {
		return "subchart " + rel
	}
	return "unsequenced"
}

// sinks returns the batches of ids that no other batch of ids comes
// after: when they are done, all of ids are.
func (p *planner) sinks(ids []int) []int {
	followed := map[int]bool{}
	for _, id := range ids {
		for _, prev := range append(slices.Clone(p.drafts[id].needs), p.drafts[id].after...) {
			followed[prev] = true
		}
	}
	var out []int
	for _, id := range ids {
		if !followed[id] {
			out = append(out, id)
		}
	}
	return out
}

// warnLostOrder warns when a chart looks as if packaging dropped the
// order of its subcharts: subcharts that order their own resources with
// resource groups, next to other units, and not a word on their order in
// Chart.yaml. helm package, helm push and source-controller rewrite
// Chart.yaml from Helm's metadata, which has no depends-on field.
func (p *planner) warnLostOrder(n *chartNode) {
	if n.facts.declaresOrder() || len(n.subcharts) == 0 || (len(n.subcharts) == 1 && len(n.resources) == 0) {
		return
	}
	var grouped []string
	for _, name := range slices.Sorted(maps.Keys(n.subcharts)) {
		if slices.ContainsFunc(n.subcharts[name].resources, usesGroups) {
			grouped = append(grouped, name)
		}
	}
	if len(grouped) == 0 {
		return
	}
	p.warnings = append(p.warnings, fmt.Sprintf("chart %s: subchart(s) %s order their resources with resource groups, but Chart.yaml declares no order "+
		"between the chart's subcharts, so they are applied side by side. If it had depends-on on its dependencies, packaging dropped it "+
		"(helm package, helm push and source-controller rewrite Chart.yaml without that field): declare the order in the annotation %s, "+
		"or set %s to '[]' when the subcharts are meant to run side by side",
		n.path, strings.Join(quoteAll(grouped), ", "), AnnotationDependsOnDependencies, AnnotationDependsOnSubcharts))
}

// usesGroups tells whether r carries a resource group annotation.
func usesGroups(r Resource) bool {
	_, group := r.Annotations[AnnotationResourceGroup]
	_, deps := r.Annotations[AnnotationDependsOnGroups]
	return group || deps
}

// finish decides which batches are waited for, merges the tails nothing
// waits for that come after the same batches, and lists the batches by
// depth.
func (p *planner) finish() *Plan {
	wait := make([]bool, len(p.drafts))
	for _, d := range p.drafts {
		for _, id := range d.needs {
			wait[id] = true
		}
	}
	keep := p.mergeTails(wait)
	order := p.byDepth(keep)
	position := map[int]int{}
	for i, id := range order {
		position[id] = i
	}
	remap := func(ids []int) []int {
		out := make([]int, 0, len(ids))
		for _, id := range ids {
			out = append(out, position[id])
		}
		return uniqueSortedInts(out)
	}
	plan := &Plan{Warnings: p.warnings}
	for _, id := range order {
		d := p.drafts[id]
		plan.Batches = append(plan.Batches, Batch{
			Name: strings.Join(d.labels, ", "), Chart: d.chart, Resources: d.resources,
			Needs: remap(d.needs), After: remap(d.after), Wait: wait[id],
		})
	}
	return plan
}

// mergeTails folds each tail nothing waits for into the first earlier
// such tail with the same needs and afters, so that a chart made of plain
// subcharts is applied in one batch, as Helm would. It returns the drafts
// that remain. Nothing comes after a tail nothing waits for, so no
// reference to a folded draft is left.
func (p *planner) mergeTails(wait []bool) []int {
	var keep []int
	into := map[string]int{}
	for id, d := range p.drafts {
		if !d.tail || wait[id] {
			keep = append(keep, id)
			continue
		}
		key := fmt.Sprint(d.needs, d.after)
		if first, ok := into[key]; ok {
			p.drafts[first].labels = append(p.drafts[first].labels, d.labels...)
			p.drafts[first].resources = append(p.drafts[first].resources, d.resources...)
			continue
		}
		into[key] = id
		keep = append(keep, id)
	}
	return keep
}

// byDepth orders ids by the longest chain of batches before each, then
// by the order they were made in (chart by chart).
func (p *planner) byDepth(ids []int) []int {
	depth := make(map[int]int, len(ids))
	var depthOf func(int) int
	depthOf = func(id int) int {
		if d, ok := depth[id]; ok {
			return d
		}
		d := 0
		for _, prev := range append(slices.Clone(p.drafts[id].needs), p.drafts[id].after...) {
			d = max(d, depthOf(prev)+1)
		}
		depth[id] = d
		return d
	}
	out := slices.Clone(ids)
	slices.SortStableFunc(out, func(a, b int) int { return depthOf(a) - depthOf(b) })
	return out
}

// step is one layer of a chart's groups: what it holds and which groups.
type step struct {
	labels    []string
	resources []ObjectID
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

// sequenceGroups orders the chart's own resources by their groups into
// layers, and returns the rest: its unsequenced resources.
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

func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%q", n)
	}
	return out
}

func uniqueSortedInts(ids []int) []int {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}
