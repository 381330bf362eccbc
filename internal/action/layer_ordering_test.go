package action

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/go-logr/logr/testr"
	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/healthcheck"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/internal/sequencing"
)

// gateTemplate is a Gate (a custom resource with no controller) in group
// db, ready when the test sets status.phase to Open and failed at Broken.
const gateTemplate = `apiVersion: seq.example.com/v1
kind: Gate
metadata:
  name: {{ .Release.Name }}-gate
  annotations:
    helm.sh/resource-group: db
    helm.sh/readiness-success: '["{.phase} == \"Open\""]'
    helm.sh/readiness-failure: '["{.phase} == \"Broken\""]'
`

// groupedConfigMap is a ConfigMap in group, needing needs (a JSON list, or
// "" for nothing).
func groupedConfigMap(name, group, needs string) string {
	s := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-" + name + "\n  annotations:\n"
	s += "    helm.sh/resource-group: " + group + "\n"
	if needs != "" {
		s += "    helm.sh/depends-on/resource-groups: '" + needs + "'\n"
	}
	return s + "data:\n  v: {{ .Values.v | default \"1\" | quote }}\n"
}

// orderedChart is the gate (db) → app chart, with an unsequenced ConfigMap
// and the Gate CRD; extra templates are added as they are.
func orderedChart(version string, extra ...*common.File) *chartv2.Chart {
	templates := []*common.File{
		{Name: "templates/gate.yaml", Data: []byte(gateTemplate)},
		{Name: "templates/app.yaml", Data: []byte(groupedConfigMap("app", "app", `["db"]`))},
		{Name: "templates/plain.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-plain\n")},
	}
	c := crdChartVersion(version, map[string]string{"gates.yaml": crdYAML("gates", "Gate", "seq.example.com", "1")}, append(templates, extra...)...)
	c.Metadata.Name = "shop"
	return c
}

var gateGVR = schema.GroupVersionResource{Group: "seq.example.com", Version: "v1", Resource: "gates"}

// revision reads a resourceVersion as the etcd revision it is on this
// API server, to order two writes.
func revision(t *testing.T, rv string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", rv, err)
	}
	return n
}

// progressLog collects what the sequencing observer hears.
type progressLog struct {
	mu    sync.Mutex
	lines []string
}

// observe logs each phase once: a waiting batch is heard again each time
// what it waits for changes.
func (l *progressLog) observe(p sequencing.Progress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := fmt.Sprintf("%d/%d %s %s", p.Index, p.Total, p.Batch, p.Phase)
	if n := len(l.lines); n > 0 && l.lines[n-1] == line {
		return
	}
	l.lines = append(l.lines, line)
}

func (l *progressLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

func TestAgainstAPIServerOrdered(t *testing.T) {
	restCfg := apiServer(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(restCfg)
	dyn := dynamic.NewForConfigOrDie(restCfg)
	createNamespaces(t, cs, "ordered")
	factory, err := NewConfigFactoryFromRESTConfig(restCfg)
	if err != nil {
		t.Fatal(err)
	}
	build := func() *helmaction.Configuration {
		cfg, err := factory.Build("ordered", "ordered", withLogger(testr.New(t)))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	hr := func(name string) *v2.HelmRelease {
		return newHR(func(o *v2.HelmRelease) {
			o.Name, o.Namespace = name, "ordered"
			o.Spec.Timeout = dur(time.Minute)
			o.Spec.WaitStrategy = &v2.WaitStrategy{Name: v2.WaitStrategyOrdered}
		})
	}
	configMapExists := func(name string) bool {
		_, err := cs.CoreV1().ConfigMaps("ordered").Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	// setGate waits for the Gate to exist, checks that app is not there
	// yet, and sets its phase.
	setGate := func(release, phase string) {
		t.Helper()
		var gate *unstructured.Unstructured
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if gate, err = dyn.Resource(gateGVR).Namespace("ordered").Get(ctx, release+"-gate", metav1.GetOptions{}); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the Gate of %s never appeared: %v", release, err)
			}
		}
		// Give a wrong implementation time to apply the next batch early.
		time.Sleep(time.Second)
		if configMapExists(release + "-app") {
			t.Errorf("%s-app was applied before its db group was ready", release)
		}
		if err := unstructured.SetNestedField(gate.Object, phase, "status", "phase"); err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(gateGVR).Namespace("ordered").Update(ctx, gate, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("install waits for each group; uninstall goes in reverse", func(t *testing.T) {
		obj := hr("shop")
		log := &progressLog{}
		o := asked{observer: hearing{sequence: log.observe}}
		done := make(chan error, 1)
		go func() {
			_, err := Install(ctx, build(), obj, orderedChart("1"), nil, planned(t, nil, obj, plan.Install, o))
			done <- err
		}()
		setGate("shop", "Open")
		if err := <-done; err != nil {
			t.Fatalf("install: %v", err)
		}
		for _, name := range []string{"shop-app", "shop-plain"} {
			if !configMapExists(name) {
				t.Errorf("%s missing after the install", name)
			}
		}
		// Nothing needs the app group: it is not waited for.
		want := []string{"1/3 db applying", "1/3 db waiting", "1/3 db ready", "2/3 app applying", "2/3 app applied", "3/3 unsequenced applying", "3/3 unsequenced applied"}
		if got := log.get(); !slices.Equal(got, want) {
			t.Errorf("progress\n got: %q\nwant: %q", got, want)
		}
		last, err := LastRelease(build(), v2.ReleaseName(obj))
		if err != nil {
			t.Fatal(err)
		}
		if _, sequenced, _ := sequencing.Recorded(last.Chart.Metadata); !sequenced {
			t.Error("the release does not record that it was applied in order")
		}

		// An upgrade that drops the app group's object keeps the order
		// and deletes it after the apply.
		log = &progressLog{}
		o.observer = hearing{sequence: log.observe}
		withoutApp := orderedChart("2")
		withoutApp.Templates = slices.DeleteFunc(withoutApp.Templates, func(f *common.File) bool { return f.Name == "templates/app.yaml" })
		withoutApp.Templates = append(withoutApp.Templates, &common.File{Name: "templates/next.yaml", Data: []byte(groupedConfigMap("next", "next", `["db"]`))})
		if _, err := Upgrade(ctx, build(), obj, withoutApp, nil, planned(t, build(), obj, plan.Upgrade, o)); err != nil {
			t.Fatalf("upgrade: %v", err)
		}
		if configMapExists("shop-app") || !configMapExists("shop-next") {
			t.Errorf("after the upgrade: app exists %v (want false), next exists %v (want true)", configMapExists("shop-app"), configMapExists("shop-next"))
		}
		if got := log.get(); !slices.Contains(got, "2/3 app deleting") || slices.Index(got, "2/3 app deleting") < slices.Index(got, "3/3 unsequenced applying") {
			t.Errorf("progress %q: want the removed app group deleted after the apply", got)
		}

		// A rollback to v1 follows v1's recorded order, even when the
		// HelmRelease no longer asks for it.
		log = &progressLog{}
		o.observer = hearing{sequence: log.observe}
		notOrdered := obj.DeepCopy()
		notOrdered.Spec.WaitStrategy = nil
		o.toVersion = 1
		if err := Rollback(ctx, build(), notOrdered, 1, planned(t, build(), notOrdered, plan.Rollback, o)); err != nil {
			t.Fatalf("rollback: %v", err)
		}
		want = []string{"1/3 db applying", "1/3 db waiting", "1/3 db ready", "2/3 app applying", "2/3 app applied",
			"3/3 unsequenced applying", "3/3 unsequenced applied", "2/3 next deleting", "2/3 next deleted"}
		if got := log.get(); !slices.Equal(got, want) {
			t.Errorf("rollback progress\n got: %q\nwant: %q", got, want)
		}
		if !configMapExists("shop-app") || configMapExists("shop-next") {
			t.Errorf("after the rollback: app exists %v (want true), next exists %v (want false)", configMapExists("shop-app"), configMapExists("shop-next"))
		}

		// Uninstall: the reverse of the recorded order.
		log = &progressLog{}
		o.observer = hearing{sequence: log.observe}
		if _, err := Uninstall(ctx, build(), obj, planned(t, build(), obj, plan.Uninstall, o)); err != nil {
			t.Fatalf("uninstall: %v", err)
		}
		want = []string{"3/3 unsequenced deleting", "3/3 unsequenced deleted", "2/3 app deleting", "2/3 app deleted", "1/3 db deleting", "1/3 db deleted"}
		if got := log.get(); !slices.Equal(got, want) {
			t.Errorf("uninstall progress\n got: %q\nwant: %q", got, want)
		}
	})

	t.Run("a failure condition fails the install and later groups are not applied", func(t *testing.T) {
		obj := hr("broken")
		done := make(chan error, 1)
		go func() {
			_, err := Install(ctx, build(), obj, orderedChart("1"), nil, planned(t, nil, obj, plan.Install, asked{}))
			done <- err
		}()
		setGate("broken", "Broken")
		err := <-done
		for _, want := range []string{"resource group db (1/3)", "failed early due to stalled resources: [Gate/ordered/broken-gate status: 'Failed']", `{.phase} == \"Broken\"`} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("install error = %v, want it to contain %q", err, want)
			}
		}
		if configMapExists("broken-app") || configMapExists("broken-plain") {
			t.Error("groups after the failed one were applied")
		}
	})

	t.Run("the readiness timeout bounds a batch within the action's timeout", func(t *testing.T) {
		obj := hr("slowgate")
		obj.Spec.WaitStrategy.ReadinessTimeout = &metav1.Duration{Duration: 2 * time.Second}
		began := time.Now()
		_, err := Install(ctx, build(), obj, orderedChart("1"), nil, planned(t, nil, obj, plan.Install, asked{}))
		for _, want := range []string{"resource group db (1/3)", "readiness timeout of 2s"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("install error = %v, want it to contain %q", err, want)
			}
		}
		if took := time.Since(began); took > 30*time.Second {
			t.Errorf("the install took %s, want the readiness timeout to end it", took)
		}
		if configMapExists("slowgate-app") {
			t.Error("the group after the timed out one was applied")
		}
	})

	t.Run("a cycle fails before anything is stored or applied", func(t *testing.T) {
		obj := hr("cyclic")
		chrt := orderedChart("1",
			&common.File{Name: "templates/one.yaml", Data: []byte(groupedConfigMap("one", "one", `["two"]`))},
			&common.File{Name: "templates/two.yaml", Data: []byte(groupedConfigMap("two", "two", `["one"]`))})
		_, err := Install(ctx, build(), obj, chrt, nil, planned(t, nil, obj, plan.Install, asked{}))
		var cycle *sequencing.CycleError
		if !errors.As(err, &cycle) || !strings.Contains(err.Error(), "one → two → one") {
			t.Fatalf("install error = %v, want the cycle named", err)
		}
		if _, err := LastRelease(build(), v2.ReleaseName(obj)); err == nil {
			t.Error("a release was stored")
		}
		if configMapExists("cyclic-plain") || configMapExists("cyclic-one") {
			t.Error("objects were applied")
		}
	})

	t.Run("afterHooks: batches, then post hooks, then the final wait", func(t *testing.T) {
		obj := hr("after")
		obj.Spec.Install = &v2.Install{WaitStrategy: v2.AfterHooks}
		chrt := orderedChart("1", &common.File{Name: "templates/post.yaml", Data: []byte(hookTemplate("after-post-hook", "post-install"))})
		done := make(chan error, 1)
		go func() {
			_, err := Install(ctx, build(), obj, chrt, nil, planned(t, nil, obj, plan.Install, asked{hookOrder: v2.AfterHooks}))
			done <- err
		}()
		setGate("after", "Open")
		if err := <-done; err != nil {
			t.Fatalf("install: %v", err)
		}
		app, err := cs.CoreV1().ConfigMaps("ordered").Get(ctx, "after-app", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		hook, err := cs.CoreV1().ConfigMaps("ordered").Get(ctx, "after-post-hook", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the post-install hook did not run: %v", err)
		}
		if revision(t, hook.ResourceVersion) < revision(t, app.ResourceVersion) {
			t.Errorf("the post-install hook (rv %s) was created before the last group (rv %s)", hook.ResourceVersion, app.ResourceVersion)
		}
	})

	t.Run("a subchart the parent depends on is applied and ready first", func(t *testing.T) {
		obj := hr("parent")
		db := &chartv2.Chart{
			Metadata:  &chartv2.Metadata{APIVersion: chartv2.APIVersionV2, Name: "db", Version: "1.0.0"},
			Templates: []*common.File{{Name: "templates/gate.yaml", Data: []byte(gateTemplate)}},
		}
		parent := crdChartVersion("1", map[string]string{"gates.yaml": crdYAML("gates", "Gate", "seq.example.com", "1")},
			&common.File{Name: "templates/app.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-app\n")})
		parent.Metadata.Name = "shop"
		parent.Metadata.Annotations = map[string]string{sequencing.AnnotationDependsOnSubcharts: `["db"]`}
		parent.Metadata.Dependencies = []*chartv2.Dependency{{Name: "db", Version: "1.0.0"}}
		parent.AddDependency(db)
		log := &progressLog{}
		done := make(chan error, 1)
		go func() {
			_, err := Install(ctx, build(), obj, parent, nil, planned(t, nil, obj, plan.Install, asked{observer: hearing{sequence: log.observe}}))
			done <- err
		}()
		setGate("parent", "Open")
		if err := <-done; err != nil {
			t.Fatalf("install: %v", err)
		}
		want := []string{"1/2 subchart db applying", "1/2 subchart db waiting", "1/2 subchart db ready", "2/2 unsequenced applying", "2/2 unsequenced applied"}
		if got := log.get(); !slices.Equal(got, want) {
			t.Errorf("progress\n got: %q\nwant: %q", got, want)
		}
	})

	t.Run("healthCheckExprs judge custom resources inside a batch", func(t *testing.T) {
		obj := hr("hc")
		readers, err := healthcheck.Compile([]kustomize.CustomHealthCheck{{
			APIVersion: "seq.example.com/v1", Kind: "Gate",
			HealthCheckExpressions: kustomize.HealthCheckExpressions{Current: "status.phase == 'Open'"},
		}})
		if err != nil {
			t.Fatal(err)
		}
		mapper, err := factory.RESTClientGetter().ToRESTMapper()
		if err != nil {
			t.Fatal(err)
		}
		// The Gate without readiness annotations: kstatus alone would call
		// it ready at once, as it has no conditions.
		chrt := orderedChart("1")
		chrt.Templates[0] = &common.File{Name: "templates/gate.yaml", Data: []byte(strings.Join(slices.DeleteFunc(
			strings.Split(gateTemplate, "\n"), func(l string) bool { return strings.Contains(l, "readiness") }), "\n"))}
		done := make(chan error, 1)
		go func() {
			_, err := Install(ctx, build(), obj, chrt, nil, planned(t, nil, obj, plan.Install, asked{statusReaders: readers(mapper)}))
			done <- err
		}()
		setGate("hc", "Open")
		if err := <-done; err != nil {
			t.Fatalf("install: %v", err)
		}
	})

	t.Run("without ordered the annotations change nothing", func(t *testing.T) {
		obj := hr("plain")
		obj.Spec.WaitStrategy = &v2.WaitStrategy{Name: helmv2.WaitStrategyPoller}
		obj.Spec.Install = &v2.Install{Install: helmv2.Install{DisableWait: true}}
		if _, err := Install(ctx, build(), obj, orderedChart("1"), nil, planned(t, nil, obj, plan.Install, asked{})); err != nil {
			t.Fatalf("install: %v", err)
		}
		if !configMapExists("plain-app") {
			t.Error("app was held back without ordered")
		}
	})
}
