package preview_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/preview"
	"github.com/afterhooks/helm-controller/internal/reconcile"
)

// The first chart: an app ConfigMap, one kept and one dropped later, and
// hooks around install and upgrade, out of weight order on purpose.
func chartV1() *chartv2.Chart {
	return testChart("1.0.0",
		configMap("app"),
		configMap("dropped"),
		configMap("kept", "helm.sh/resource-policy", "keep"),
		hook("pre-b", "pre-install,pre-upgrade", 5, "before-hook-creation"),
		hook("pre-a", "pre-install,pre-upgrade", -2, "hook-succeeded"),
		hook("post", "post-install,post-upgrade,pre-delete", 0, ""),
	)
}

// The second chart: dropped and kept are gone, added is new.
func chartV2() *chartv2.Chart {
	return testChart("1.1.0",
		configMap("app"),
		configMap("added"),
		hook("pre-b", "pre-install,pre-upgrade", 5, "before-hook-creation"),
		hook("pre-a", "pre-install,pre-upgrade", -2, "hook-succeeded"),
		hook("post", "post-install,post-upgrade,pre-delete", 0, ""),
	)
}

// jobChart is a chart of a Job whose pod template holds the values: a
// change of them is refused in place.
func jobChart() *chartv2.Chart {
	return testChart("1.0.0", `apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
spec:
  template:
    metadata:
      annotations:
        a: {{ .Values.data.a | quote }}
    spec:
      restartPolicy: Never
      containers:
      - name: migrate
        image: busybox
`)
}

// ordered is a chart of two resource groups, db before app.
func orderedChart() *chartv2.Chart {
	return testChart("1.0.0",
		configMap("db", "helm.sh/resource-group", "db"),
		configMap("app", "helm.sh/resource-group", "app", "helm.sh/depends-on/resource-groups", `["db"]`),
	)
}

func values(kv ...any) map[string]any {
	data := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		data[kv[i].(string)] = kv[i+1]
	}
	return map[string]any{"data": data}
}

type want struct {
	step                         reconcile.Step
	verbs                        []string
	create, update, delete, keep []string
	valuesChanged                []string
	hooks                        []string
	wait                         string
	sequence                     []string
	batches                      int
	leftovers                    []string
	// live are the expected live changes of objects, by Kind/name.
	live map[string][]string
}

func TestPreview(t *testing.T) {
	afterHooks := func(o *v2.HelmRelease) {
		o.Spec.Upgrade = &v2.Upgrade{WaitStrategy: v2.AfterHooks}
	}
	tests := []struct {
		name     string
		hr       []func(*v2.HelmRelease)
		before   func() *chartv2.Chart // installed first, when set
		next     func() *chartv2.Chart
		values   map[string]any
		deleting bool
		want     want
	}{{
		name: "first install",
		next: chartV1, values: values("a", "1"),
		want: want{step: reconcile.StepInstall, verbs: []string{"install"},
			create: []string{"ConfigMap/app", "ConfigMap/dropped", "ConfigMap/kept"},
			hooks:  []string{"pre-install:pre-a:-2", "pre-install:pre-b:5", "post-install:post:0"},
			wait:   preview.WaitBeforeHooks},
	}, {
		name:   "no change",
		before: chartV1, next: chartV1, values: values("a", "1"),
		want: want{step: reconcile.StepNone},
	}, {
		name:   "values change, beforeHooks",
		before: chartV1, next: chartV1, values: values("a", "2", "b", "3"),
		want: want{step: reconcile.StepUpgrade, verbs: []string{"upgrade"},
			update:        []string{"ConfigMap/app", "ConfigMap/dropped", "ConfigMap/kept"},
			valuesChanged: []string{"data.a", "data.b"},
			live:          map[string][]string{"ConfigMap/app": {"replace /data"}},
			hooks:         []string{"pre-upgrade:pre-a:-2", "pre-upgrade:pre-b:5", "post-upgrade:post:0"},
			wait:          preview.WaitBeforeHooks,
			sequence: []string{"run 2 pre-upgrade hooks", "apply: create 0, update 3, delete 0, keep 0",
				"wait for readiness (beforeHooks, watcher, jobs: true, timeout 30s)", "run 1 post-upgrade hooks"}},
	}, {
		name: "immutable Job field",
		hr: []func(*v2.HelmRelease){func(o *v2.HelmRelease) {
			// No Job controller on the test API server: nothing waits.
			o.Spec.Install = &v2.Install{Install: helmv2.Install{DisableWait: true}}
			o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{DisableWait: true}}
		}},
		before: jobChart, next: jobChart, values: values("a", "2"),
		want: want{step: reconcile.StepUpgrade, verbs: []string{"upgrade"},
			update:        []string{"Job/migrate"},
			valuesChanged: []string{"data.a"}, wait: preview.WaitNone,
			live: map[string][]string{"Job/migrate": {preview.LiveImmutable}}},
	}, {
		name: "chart upgrade, afterHooks, keep", hr: []func(*v2.HelmRelease){afterHooks},
		before: chartV1, next: chartV2, values: values("a", "1"),
		want: want{step: reconcile.StepUpgrade, verbs: []string{"upgrade"},
			create: []string{"ConfigMap/added"}, delete: []string{"ConfigMap/dropped"}, keep: []string{"ConfigMap/kept"},
			hooks: []string{"pre-upgrade:pre-a:-2", "pre-upgrade:pre-b:5", "post-upgrade:post:0"},
			wait:  preview.WaitAfterHooks,
			sequence: []string{"run 2 pre-upgrade hooks", "apply: create 1, update 0, delete 1, keep 1",
				"run 1 post-upgrade hooks", "wait for readiness (afterHooks, watcher, jobs: true, timeout 30s)"}},
	}, {
		name: "ordered install",
		hr: []func(*v2.HelmRelease){func(o *v2.HelmRelease) {
			o.Spec.WaitStrategy = &v2.WaitStrategy{Name: v2.WaitStrategyOrdered}
		}},
		next: orderedChart, values: values("a", "1"),
		want: want{step: reconcile.StepInstall, verbs: []string{"install"},
			create: []string{"ConfigMap/app", "ConfigMap/db"}, wait: preview.WaitBeforeHooks, batches: 2},
	}, {
		name:   "chart renamed: reinstall",
		before: chartV1, next: func() *chartv2.Chart {
			c := chartV2()
			c.Metadata.Name = "site"
			return c
		}, values: values("a", "1"),
		want: want{step: reconcile.StepReinstall, verbs: []string{"uninstall", "install"},
			delete: []string{"ConfigMap/app", "ConfigMap/dropped"}, keep: []string{"ConfigMap/kept"},
			hooks: []string{"pre-delete:post:0"}, wait: preview.WaitBeforeHooks},
	}, {
		name: "deleted before anything was installed",
		next: chartV1, values: values("a", "1"), deleting: true,
		want: want{step: reconcile.StepNone},
	}, {
		name: "uninstall with hook cleanup",
		hr: []func(*v2.HelmRelease){func(o *v2.HelmRelease) {
			o.Spec.Uninstall = &v2.Uninstall{DeleteHookResources: true, DeleteHookResourceKinds: []string{"ConfigMap"}}
		}},
		before: chartV1, next: chartV1, values: values("a", "1"), deleting: true,
		want: want{step: reconcile.StepUninstall, verbs: []string{"uninstall"},
			delete: []string{"ConfigMap/app", "ConfigMap/dropped"}, keep: []string{"ConfigMap/kept"},
			hooks: []string{"pre-delete:post:0"}, wait: preview.WaitBeforeHooks,
			// pre-a deleted itself (hook-succeeded); pre-b and post are
			// left, in the order the cleanup reads them.
			leftovers: []string{"ConfigMap/NS/pre-b", "ConfigMap/NS/post"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			obj := e.hr(tt.hr...)
			if tt.before != nil {
				e.reconcile(obj, tt.before, values("a", "1"))
			}
			if tt.deleting {
				obj.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			}
			pv := e.preview(obj, tt.next(), tt.values)
			var text strings.Builder
			if err := preview.WriteText(&text, pv, false); err != nil {
				t.Fatal(err)
			}
			t.Logf("\n%s", text.String())
			checkPreview(t, e, pv, tt.want)
		})
	}
}

func checkPreview(t *testing.T, e *env, pv *preview.Preview, w want) {
	t.Helper()
	if pv.Step != w.step {
		t.Fatalf("step %s (%s), want %s", pv.Step, pv.Reason, w.step)
	}
	if pv.Changes() != (w.step != reconcile.StepNone) {
		t.Errorf("Changes() = %t for step %s", pv.Changes(), pv.Step)
	}
	var verbs []string
	for _, a := range pv.Actions {
		verbs = append(verbs, string(a.Verb))
	}
	eq(t, "actions", verbs, w.verbs)
	eq(t, "values changed", pv.ValuesChanged, w.valuesChanged)
	if len(pv.Actions) == 0 {
		return
	}
	a := pv.Actions[0]
	eq(t, "create", names(a.Objects.Create), w.create)
	eq(t, "update", names(a.Objects.Update), w.update)
	eq(t, "delete", names(a.Objects.Delete), w.delete)
	eq(t, "keep", names(a.Objects.Keep), w.keep)
	eq(t, "hooks", hookNames(a.Hooks), w.hooks)
	if a.Wait != w.wait {
		t.Errorf("wait %s, want %s", a.Wait, w.wait)
	}
	if w.sequence != nil {
		eq(t, "sequence", a.Sequence, w.sequence)
	}
	if batches := 0; a.Order != nil || w.batches != 0 {
		if a.Order != nil {
			batches = len(a.Order.Batches)
		}
		if batches != w.batches {
			t.Errorf("%d batches, want %d", batches, w.batches)
		}
	}
	for name, want := range w.live {
		var got []string
		for _, o := range append(append([]preview.Object{}, a.Objects.Update...), a.Objects.Create...) {
			if o.Kind+"/"+o.Name == name {
				got = o.Live
			}
		}
		eq(t, "live changes of "+name, got, want)
	}
	if w.leftovers != nil {
		var want []string
		for _, l := range w.leftovers {
			want = append(want, replaceNS(l, e.ns))
		}
		if a.HookLeftovers == nil {
			t.Fatal("no hook leftovers")
		}
		eq(t, "hook leftovers", a.HookLeftovers.Delete, want)
	}
}

func replaceNS(s, ns string) string {
	if i := len("ConfigMap/NS/"); len(s) > i && s[:i] == "ConfigMap/NS/" {
		return "ConfigMap/" + ns + "/" + s[i:]
	}
	return s
}

func eq(t testing.TB, what string, got, want []string) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: %q, want %q", what, got, want)
	}
}
