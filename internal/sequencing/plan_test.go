package sequencing

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// res is a resource of kind ConfigMap named name in chart, with the given
// group ("" for none) and depends-on annotation ("" for none).
func res(chart, name, group, dependsOn string) Resource {
	a := map[string]string{}
	if group != "" {
		a[AnnotationResourceGroup] = group
	}
	if dependsOn != "" {
		a[AnnotationDependsOnGroups] = dependsOn
	}
	return Resource{ID: ObjectID{Kind: "ConfigMap", Name: name}, Chart: chart, Annotations: a}
}

// batches renders a plan as "name: a b | name: c" with the unsequenced
// batch last, for compact comparisons.
func batches(p *Plan) string {
	var parts []string
	for _, b := range p.Batches {
		var names []string
		for _, id := range b.Resources {
			names = append(names, id.Name)
		}
		slices.Sort(names)
		parts = append(parts, b.Name+": "+strings.Join(names, " "))
	}
	return strings.Join(parts, " | ")
}

func TestNewPlan(t *testing.T) {
	tests := []struct {
		name      string
		resources []Resource
		charts    Charts
		want      string
		warnings  []string // substrings, one per warning, in order
	}{{
		name:      "no annotations: one unsequenced batch, as Helm applies it",
		resources: []Resource{res("app", "a", "", ""), res("app", "b", "", "")},
		want:      "unsequenced: a b",
	}, {
		name: "a chain of groups, each its own batch",
		resources: []Resource{
			res("app", "web", "app", `["migrate"]`),
			res("app", "job", "migrate", `["db"]`),
			res("app", "sts", "db", ""),
			res("app", "secret", "db", ""),
			res("app", "plain", "", ""),
		},
		want: "db: secret sts | migrate: job | app: web | unsequenced: plain",
	}, {
		name: "independent groups share a batch (the HIP's database and queue)",
		resources: []Resource{
			res("app", "db", "database", ""),
			res("app", "queue", "queue", ""),
			res("app", "web", "app", `["database", "queue"]`),
		},
		want: "database, queue: db queue | app: web",
	}, {
		name: "a group is applied once everything it needs is ready, not earlier",
		resources: []Resource{
			res("app", "a", "a", ""),
			res("app", "b", "b", `["a"]`),
			res("app", "c", "c", `["a","b"]`),
		},
		want: "a: a | b: b | c: c",
	}, {
		name: "members' needs add up for their group",
		resources: []Resource{
			res("app", "a", "a", ""),
			res("app", "b", "b", ""),
			res("app", "c1", "c", `["a"]`),
			res("app", "c2", "c", `["b"]`),
		},
		want: "a, b: a b | c: c1 c2",
	}, {
		name: "a missing group makes the resource unsequenced, with a warning",
		resources: []Resource{
			res("app", "a", "a", ""),
			res("app", "b", "b", `["a"]`),
			res("app", "lost", "b", `["nope"]`),
		},
		want:     "a: a | b: b | unsequenced: lost",
		warnings: []string{`ConfigMap/lost depends on resource group(s) "nope"`},
	}, {
		name: "dropping a missing dependency can leave another group without members",
		resources: []Resource{
			res("app", "x", "x", `["nope"]`),
			res("app", "y", "y", `["x"]`),
		},
		want: "unsequenced: x y",
		warnings: []string{
			`ConfigMap/x depends on resource group(s) "nope"`,
			`ConfigMap/y depends on resource group(s) "x"`,
		},
	}, {
		name:      "an isolated group is unsequenced, with a warning",
		resources: []Resource{res("app", "alone", "alone", ""), res("app", "plain", "", "")},
		want:      "unsequenced: alone plain",
		warnings:  []string{`resource group "alone" neither depends on another group nor is depended on`},
	}, {
		name: "a resource that needs a group without joining one waits for it",
		resources: []Resource{
			res("app", "a", "a", ""),
			res("app", "loner", "", `["a"]`),
		},
		want: "a: a | (ConfigMap/loner): loner",
	}, {
		name: "groups are per chart: a subchart's group of the same name is another group",
		resources: []Resource{
			res("app", "a", "db", ""),
			res("app", "b", "web", `["db"]`),
			res("app/sub", "c", "db", ""),
			res("app/sub", "d", "web", `["db"]`),
		},
		want: "db, sub/db: a c | web, sub/web: b d",
	}, {
		name: "the parent's own resources wait for the subcharts its annotation names",
		resources: []Resource{
			res("app", "web", "", ""),
			res("app/db", "sts", "", ""),
			res("app/cache", "redis", "", ""),
		},
		charts: Charts{"app": {DependsOn: []string{"db"}, Dependencies: map[string][]string{"db": nil, "cache": nil}}},
		want:   "subchart db: sts | unsequenced: redis web",
	}, {
		name: "dependencies' depends-on order subcharts; a needed subchart completes, groups and all",
		resources: []Resource{
			res("app", "web", "", ""),
			res("app/nginx", "ngx", "", ""),
			res("app/rabbitmq", "rmq", "", ""),
			res("app/bar", "bar-a", "a", ""),
			res("app/bar", "bar-b", "b", `["a"]`),
			res("app/bar", "bar-plain", "", ""),
		},
		charts: Charts{"app": {
			DependsOn:    []string{"bar", "rabbitmq"},
			Dependencies: map[string][]string{"nginx": nil, "rabbitmq": nil, "bar": {"nginx", "rabbitmq"}},
		}},
		want: "subchart nginx, subchart rabbitmq: ngx rmq | bar/a: bar-a | bar/b: bar-b | subchart bar: bar-plain | unsequenced: web",
	}, {
		name: "a disabled dependency is ignored silently, an unknown name with a warning",
		resources: []Resource{
			res("app", "web", "", ""),
			res("app/db", "sts", "", ""),
		},
		charts: Charts{"app": {DependsOn: []string{"db", "disabled", "typo"}, Dependencies: map[string][]string{"db": nil, "disabled": nil}}},
		want:   "subchart db: sts | unsequenced: web",
		warnings: []string{
			`names "typo", which is not a dependency of the chart`,
		},
	}, {
		name: "a subchart nothing waits for hands its unsequenced resources to the end",
		resources: []Resource{
			res("app", "a", "a", ""),
			res("app", "b", "b", `["a"]`),
			res("app/side", "side", "", ""),
		},
		want: "a: a | b: b | unsequenced: side",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := NewPlan(tt.resources, tt.charts)
			if err != nil {
				t.Fatalf("NewPlan: %v", err)
			}
			if got := batches(plan); got != tt.want {
				t.Errorf("batches\n got: %s\nwant: %s", got, tt.want)
			}
			if len(plan.Warnings) != len(tt.warnings) {
				t.Fatalf("warnings = %q, want %d", plan.Warnings, len(tt.warnings))
			}
			for i, w := range tt.warnings {
				if !strings.Contains(plan.Warnings[i], w) {
					t.Errorf("warning %d = %q, want it to contain %q", i, plan.Warnings[i], w)
				}
			}
			for _, b := range plan.Batches {
				if b.Wait == (b.Name == "unsequenced") {
					t.Errorf("batch %q: Wait = %v; only the unsequenced batch is left to the action's own wait", b.Name, b.Wait)
				}
				if len(b.Resources) == 0 {
					t.Errorf("batch %q is empty", b.Name)
				}
			}
			if count(plan) != len(tt.resources) {
				t.Errorf("plan holds %d resources, want each of the %d once", count(plan), len(tt.resources))
			}
		})
	}
}

func count(p *Plan) int {
	seen := map[ObjectID]bool{}
	for _, b := range p.Batches {
		for _, id := range b.Resources {
			seen[id] = true
		}
	}
	return len(seen)
}

func TestNewPlanRefusesCycles(t *testing.T) {
	tests := []struct {
		name      string
		resources []Resource
		charts    Charts
		want      string
	}{{
		name: "two groups",
		resources: []Resource{
			res("app", "a", "a", `["b"]`),
			res("app", "b", "b", `["a"]`),
		},
		want: "resource groups of chart app depend on each other in a cycle: a → b → a",
	}, {
		name: "a group on itself",
		resources: []Resource{
			res("app", "a", "a", `["a"]`),
		},
		want: "cycle: a → a",
	}, {
		name: "a cycle beside a good chain",
		resources: []Resource{
			res("app", "ok", "ok", ""),
			res("app", "x", "x", `["ok", "z"]`),
			res("app", "y", "y", `["x"]`),
			res("app", "z", "z", `["y"]`),
		},
		want: "cycle: x → z → y → x",
	}, {
		name: "in a subchart",
		resources: []Resource{
			res("app/sub", "a", "a", `["b"]`),
			res("app/sub", "b", "b", `["a"]`),
		},
		want: "resource groups of chart app/sub depend",
	}, {
		name: "subcharts",
		resources: []Resource{
			res("app/one", "a", "", ""),
			res("app/two", "b", "", ""),
		},
		charts: Charts{"app": {Dependencies: map[string][]string{"one": {"two"}, "two": {"one"}}}},
		want:   "subcharts of chart app depend on each other in a cycle: one → two → one",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewPlan(tt.resources, tt.charts)
			var cycle *CycleError
			if !errors.As(err, &cycle) {
				t.Fatalf("NewPlan error = %v, want a cycle", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestNewPlanRefusesBrokenAnnotations(t *testing.T) {
	for _, value := range []string{`db`, `"db"`, `[db]`, `{"db":1}`, `[1]`} {
		t.Run(value, func(t *testing.T) {
			_, err := NewPlan([]Resource{res("app", "web", "app", value)}, nil)
			if err == nil {
				t.Fatal("NewPlan accepted a depends-on annotation that is not a JSON list of names")
			}
			for _, want := range []string{"ConfigMap/web", AnnotationDependsOnGroups, value} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error = %q, want it to name %q", err, want)
				}
			}
		})
	}
}

func TestNewPlanIsDeterministic(t *testing.T) {
	resources := []Resource{
		res("app", "a", "a", ""), res("app", "b", "b", ""), res("app", "c", "c", ""),
		res("app", "d", "d", `["a","b","c"]`),
		res("app/x", "x", "", ""), res("app/y", "y", "", ""),
	}
	charts := Charts{"app": {DependsOn: []string{"x", "y"}, Dependencies: map[string][]string{"x": nil, "y": nil}}}
	first, err := NewPlan(resources, charts)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		again, err := NewPlan(resources, charts)
		if err != nil {
			t.Fatal(err)
		}
		if batches(again) != batches(first) {
			t.Fatalf("plans differ between runs:\n%s\n%s", batches(first), batches(again))
		}
		for i := range again.Batches {
			if !slices.Equal(again.Batches[i].Resources, first.Batches[i].Resources) {
				t.Fatalf("batch %d lists its resources in another order", i)
			}
		}
	}
}
