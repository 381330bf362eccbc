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

// batches renders a plan as "a: x y | b <a: z | c ~b: w", batches in
// plan order, each with the batches it needs ready (<) and those it only
// comes after (~), for compact comparisons.
func batches(p *Plan) string {
	var parts []string
	for _, b := range p.Batches {
		var names []string
		for _, id := range b.Resources {
			names = append(names, id.Name)
		}
		slices.Sort(names)
		head := b.Name
		for _, n := range b.Needs {
			head += " <" + p.Batches[n].Name
		}
		for _, n := range b.After {
			head += " ~" + p.Batches[n].Name
		}
		parts = append(parts, head+": "+strings.Join(names, " "))
	}
	return strings.Join(parts, " | ")
}

// checkPlanShape checks what holds for every plan: each resource in one
// batch, no empty batch, a batch comes after earlier batches only, and it
// is waited for exactly when a later batch needs it.
func checkPlanShape(t *testing.T, plan *Plan, resources int) {
	t.Helper()
	needed := map[int]bool{}
	for i, b := range plan.Batches {
		if len(b.Resources) == 0 {
			t.Errorf("batch %q is empty", b.Name)
		}
		for _, prev := range b.Predecessors() {
			if prev >= i {
				t.Errorf("batch %d %q comes after batch %d, which is not earlier", i, b.Name, prev)
			}
		}
		for _, n := range b.Needs {
			needed[n] = true
		}
	}
	for i, b := range plan.Batches {
		if b.Wait != needed[i] {
			t.Errorf("batch %q: Wait = %v, want it waited exactly when a later batch needs it (%v)", b.Name, b.Wait, needed[i])
		}
	}
	if count(plan) != resources {
		t.Errorf("plan holds %d resources, want each of the %d once", count(plan), resources)
	}
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
		name: "a chain of groups, each its own batch; the last is not waited for, nothing needs it",
		resources: []Resource{
			res("app", "web", "app", `["migrate"]`),
			res("app", "job", "migrate", `["db"]`),
			res("app", "sts", "db", ""),
			res("app", "secret", "db", ""),
			res("app", "plain", "", ""),
		},
		want: "db: secret sts | migrate <db: job | app <migrate: web | unsequenced ~app: plain",
	}, {
		name: "independent groups share a batch (the HIP's database and queue)",
		resources: []Resource{
			res("app", "db", "database", ""),
			res("app", "queue", "queue", ""),
			res("app", "web", "app", `["database", "queue"]`),
		},
		want: "database, queue: db queue | app <database, queue: web",
	}, {
		name: "a group is applied once everything it needs is ready, not earlier",
		resources: []Resource{
			res("app", "a", "a", ""),
			res("app", "b", "b", `["a"]`),
			res("app", "c", "c", `["a","b"]`),
		},
		want: "a: a | b <a: b | c <b: c",
	}, {
		name: "members' needs add up for their group",
		resources: []Resource{
			res("app", "a", "a", ""),
			res("app", "b", "b", ""),
			res("app", "c1", "c", `["a"]`),
			res("app", "c2", "c", `["b"]`),
		},
		want: "a, b: a b | c <a, b: c1 c2",
	}, {
		name: "a missing group makes the resource unsequenced, with a warning",
		resources: []Resource{
			res("app", "a", "a", ""),
			res("app", "b", "b", `["a"]`),
			res("app", "lost", "b", `["nope"]`),
		},
		want:     "a: a | b <a: b | unsequenced ~b: lost",
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
		want: "a: a | (ConfigMap/loner) <a: loner",
	}, {
		name: "groups are per chart: a subchart's group of the same name is another group, and the two charts go their own ways",
		resources: []Resource{
			res("app", "a", "db", ""),
			res("app", "b", "web", `["db"]`),
			res("app/sub", "c", "db", ""),
			res("app/sub", "d", "web", `["db"]`),
		},
		charts: Charts{"app": {OrderDeclared: true, Dependencies: map[string][]string{"sub": nil}}},
		want:   "db: a | sub/db: c | web <db: b | sub/web <sub/db: d",
	}, {
		name: "subcharts using groups next to others, with no order declared: a lost order is suspected",
		resources: []Resource{
			res("app", "web", "", ""),
			res("app/db", "sts", "db", ""),
			res("app/db", "svc", "svc", `["db"]`),
			res("app/api", "job", "", ""),
		},
		want:     "unsequenced, subchart api: job web | db/db: sts | db/svc <db/db: svc",
		warnings: []string{`chart app: subchart(s) "db" order their resources with resource groups, but Chart.yaml declares no order`},
	}, {
		name: "an empty helm.sh/depends-on/subcharts says no order is meant",
		resources: []Resource{
			res("app", "web", "", ""),
			res("app/db", "sts", "db", ""),
			res("app/db", "svc", "svc", `["db"]`),
		},
		charts: Charts{"app": {OrderDeclared: true, Dependencies: map[string][]string{"db": nil}}},
		want:   "unsequenced: web | db/db: sts | db/svc <db/db: svc",
	}, {
		name: "sibling subcharts progress independently: neither waits for the other's groups",
		resources: []Resource{
			res("app/fast", "x", "x", ""),
			res("app/fast", "y", "y", `["x"]`),
			res("app/slow", "a", "a", ""),
			res("app/slow", "b", "b", `["a"]`),
			res("app/slow", "c", "c", `["b"]`),
		},
		charts: Charts{"app": {OrderDeclared: true, Dependencies: map[string][]string{"fast": nil, "slow": nil}}},
		want:   "fast/x: x | slow/a: a | fast/y <fast/x: y | slow/b <slow/a: b | slow/c <slow/b: c",
	}, {
		name: "the parent's own resources wait for the subcharts its annotation names",
		resources: []Resource{
			res("app", "web", "", ""),
			res("app/db", "sts", "", ""),
			res("app/cache", "redis", "", ""),
		},
		charts: Charts{"app": {DependsOn: []string{"db"}, Dependencies: map[string][]string{"db": nil, "cache": nil}}},
		want:   "subchart cache: redis | subchart db: sts | unsequenced <subchart db: web",
	}, {
		name: "dependencies' depends-on order subcharts; a needed subchart completes, groups and all, each waited for",
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
		want: "subchart nginx: ngx | subchart rabbitmq: rmq | bar/a <subchart nginx <subchart rabbitmq: bar-a | bar/b <bar/a: bar-b | " +
			"subchart bar <subchart nginx <subchart rabbitmq <bar/b: bar-plain | unsequenced <subchart rabbitmq <subchart bar: web",
	}, {
		name: "a needed subchart includes its own subcharts, which are waited for too",
		resources: []Resource{
			res("app", "web", "", ""),
			res("app/db", "sts", "", ""),
			res("app/db/backup", "cron", "", ""),
		},
		charts: Charts{"app": {DependsOn: []string{"db"}, Dependencies: map[string][]string{"db": nil}}},
		want:   "subchart db: sts | subchart db/backup: cron | unsequenced <subchart db <subchart db/backup: web",
	}, {
		name: "a disabled dependency is ignored silently, an unknown name with a warning",
		resources: []Resource{
			res("app", "web", "", ""),
			res("app/db", "sts", "", ""),
		},
		charts: Charts{"app": {DependsOn: []string{"db", "disabled", "typo"}, Dependencies: map[string][]string{"db": nil, "disabled": nil}}},
		want:   "subchart db: sts | unsequenced <subchart db: web",
		warnings: []string{
			`names "typo", which is not a dependency of the chart`,
		},
	}, {
		name: "a subchart nothing waits for goes its own way, not after the parent's groups",
		resources: []Resource{
			res("app", "a", "a", ""),
			res("app", "b", "b", `["a"]`),
			res("app/side", "side", "", ""),
		},
		want: "a: a | subchart side: side | b <a: b",
	}, {
		name: "plain subcharts and a plain parent are one batch, as Helm applies them",
		resources: []Resource{
			res("app", "web", "", ""),
			res("app/one", "x", "", ""),
			res("app/two", "y", "", ""),
		},
		want: "unsequenced, subchart one, subchart two: web x y",
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
			checkPlanShape(t, plan, len(tt.resources))
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
