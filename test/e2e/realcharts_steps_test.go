package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
	"github.com/afterhooks/helm-controller/test/parity"
)

// The environment the real-chart parity test reads.
const (
	// realParityEnv set to "full" runs realFullSteps (make parity);
	// otherwise realShortSteps run (make test).
	realParityEnv = "HELM_CONTROLLER_PARITY"
	// realRecordEnv names a directory where each run's observations are
	// written as <chart>.<mode>.json (test/parity's testdata comes from
	// there).
	realRecordEnv = "HELM_CONTROLLER_PARITY_RECORD"
	// realPlantEnv plants differences in ours (default mode) to show
	// that the comparison catches them, comma-separated: "reason"
	// rewrites the install's Ready reason as read, "revision" adds a real
	// upgrade to the no-op step, "leftover" keeps a live object through
	// the uninstall (a finalizer), "plan-recreate" drops the recreates
	// from ours' plans (plan_outcome_test.go).
	realPlantEnv = "HELM_CONTROLLER_PARITY_PLANT"
)

// realStepTimeout bounds each full step's wait: a failing upgrade with
// one retry waits twice for its pods and twice for its rollbacks.
const realStepTimeout = 6 * time.Minute

// realStep is one step of a real-chart scenario.
type realStep struct {
	name string
	// do makes the step happen on the side and returns once its
	// HelmRelease has handled it and settled.
	do func(s *realSide, t *testing.T)
	// observe reads the side after the step; realSide.observe when nil.
	observe func(s *realSide, t *testing.T) parity.Observation
	// next, when set, is the HelmRelease the step is about to apply,
	// which ours plans before the step (plan_outcome_test.go); steps
	// without it are not planned.
	next func(s *realSide, t *testing.T) *v2.HelmRelease
}

var (
	stepInstall   = realStep{name: "install", do: (*realSide).doInstall, next: (*realSide).unchanged}
	stepNoOp      = realStep{name: "no-op reconcile", do: (*realSide).doNoOp, next: (*realSide).live}
	stepUninstall = realStep{name: "uninstall", do: (*realSide).doUninstall, observe: (*realSide).uninstalledObservation}
)

// realShortSteps run in make test: each chart installed, reconciled
// without a change and uninstalled.
var realShortSteps = []realStep{stepInstall, stepNoOp, stepUninstall}

// realFullSteps run in make parity: every step of issue 31's scenario.
var realFullSteps = []realStep{
	stepInstall,
	stepNoOp,
	specStep("common metadata", (*realSide).setCommonMetadata),
	specStep("values change", (*realSide).changeValues),
	specStep("failing upgrade", (*realSide).breakPods),
	specStep("working spec back", (*realSide).restoreWorkingSpec),
	{name: "drift corrected", do: (*realSide).doDrift},
	{name: "change while suspended", do: (*realSide).doSuspendedChange},
	specStep("resumed", func(_ *realSide, hr *v2.HelmRelease) { hr.Spec.Suspend = false }),
	stepUninstall,
}

// realSteps are the steps this run takes, per realParityEnv.
func realSteps() []realStep {
	if os.Getenv(realParityEnv) == "full" {
		return realFullSteps
	}
	return realShortSteps
}

// unchanged is the side's HelmRelease as the step applies it: the
// install's, not in the cluster yet.
func (s *realSide) unchanged(*testing.T) *v2.HelmRelease { return s.hr }

// live is the side's HelmRelease as the cluster has it: the spec a step
// that changes nothing reconciles.
func (s *realSide) live(t *testing.T) *v2.HelmRelease {
	t.Helper()
	hr := &v2.HelmRelease{}
	if err := env.Get(context.Background(), hr, s.hr.Namespace, s.hr.Name); err != nil {
		t.Fatalf("%s: reading the HelmRelease to plan: %v", s.mode, err)
	}
	return hr
}

func (s *realSide) doInstall(t *testing.T) {
	start := time.Now()
	env.Create(t, s.hr)
	s.settle(t, parityStep{name: "install", settled: parityInstallSettled, timeout: realStepTimeout})
	s.install = time.Since(start)
}

func (s *realSide) doNoOp(t *testing.T) {
	if s.planted("revision") {
		env.PatchSpec(t, s.hr, func(hr *v2.HelmRelease) {
			hr.Spec.Values = framework.JSONFrom(s.chart.Sim.ChangedValues("planted"))
		})
	}
	token := env.RequestReconcile(t, s.hr)
	s.settle(t, parityStep{name: "no-op reconcile", settled: parityHandled(token), timeout: realStepTimeout})
}

func (s *realSide) doUninstall(t *testing.T) {
	s.installed = s.releaseObjects(t)
	if s.planted("leftover") {
		s.plantLeftover(t)
	}
	if err := env.Client.Delete(context.Background(), s.hr); err != nil {
		t.Fatalf("%s: deleting the HelmRelease: %v", s.mode, err)
	}
	env.Eventually(t, 3*time.Minute, fmt.Sprintf("%s: %s uninstalled", s.mode, s.chart.Name), func(ctx context.Context) error {
		framework.MustRun(t, s.ctl)
		return env.Gone(ctx, s.hr)
	})
}

// plantLeftover puts a finalizer of the test's on the release's first
// namespaced object, so that the uninstall leaves it (terminating), and
// lets the uninstall skip its wait for the object to go (a wait would
// time out); the test removes the finalizer when it ends.
func (s *realSide) plantLeftover(t *testing.T) {
	t.Helper()
	env.PatchSpec(t, s.hr, func(hr *v2.HelmRelease) {
		hr.Spec.Uninstall = &v2.Uninstall{}
		hr.Spec.Uninstall.DisableWait = true
	})
	for _, obj := range s.installed {
		if _, ok := liveUID(t, obj); !ok || obj.GetNamespace() == "" {
			continue
		}
		hold := func(finalizers string) {
			patch := []byte(`{"metadata":{"finalizers":` + finalizers + `}}`)
			if err := env.Client.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
				t.Errorf("planting a leftover on %s: %v", objectName(obj), err)
			}
		}
		hold(`["parity.afterhooks.io/planted"]`)
		t.Cleanup(func() { hold(`null`) })
		t.Logf("planted: %s left by the uninstall (a finalizer of the test's)", objectName(obj))
		return
	}
}

// commonMetadataKey is the label and annotation the common metadata step
// puts on every object, and the label the drift step edits by hand.
const commonMetadataKey = "parity.afterhooks.io/common-metadata"

// specStep is a step that changes the spec with change and waits until
// the controller settled the new generation; ours plans the changed spec
// first.
func specStep(name string, change func(*realSide, *v2.HelmRelease)) realStep {
	return realStep{
		name: name,
		do: func(s *realSide, t *testing.T) {
			s.changeSpec(t, name, func(hr *v2.HelmRelease) { change(s, hr) })
		},
		next: func(s *realSide, t *testing.T) *v2.HelmRelease {
			hr := s.live(t)
			change(s, hr)
			return hr
		},
	}
}

func (s *realSide) setCommonMetadata(hr *v2.HelmRelease) {
	hr.Spec.CommonMetadata = &helmv2.CommonMetadata{
		Labels:      map[string]string{commonMetadataKey: "set"},
		Annotations: map[string]string{commonMetadataKey: "set"},
	}
}

func (s *realSide) changeValues(hr *v2.HelmRelease) {
	hr.Spec.Values = framework.JSONFrom(s.chart.Sim.ChangedValues("values"))
}

// failingUpgradeTimeout is the failing upgrade's spec.timeout: its pods
// never become ready, so each attempt waits all of it.
const failingUpgradeTimeout = 20 * time.Second

// breakPods changes the values and makes every Deployment's,
// StatefulSet's and DaemonSet's pods crash-loop (a post renderer: the
// simulator's fail annotation on the pod template), with one retry and a
// rollback as remediation, and waits until the controller gave up
// (Stalled) or, for a chart without such workloads, the upgrade
// succeeded. The values change too, as when a new setting breaks the
// pods: the rollback then restores other values than the spec's, and
// both controllers retry; see docs/differences.md for a post renderer
// changed alone.
func (s *realSide) breakPods(hr *v2.HelmRelease) {
	hr.Spec.Values = framework.JSONFrom(s.chart.Sim.ChangedValues("failing"))
	hr.Spec.PostRenderers = []helmv2.PostRenderer{{Kustomize: &helmv2.Kustomize{Patches: crashLoopPatches()}}}
	hr.Spec.Timeout = &metav1.Duration{Duration: failingUpgradeTimeout}
	if hr.Spec.Upgrade == nil {
		hr.Spec.Upgrade = &v2.Upgrade{}
	}
	hr.Spec.Upgrade.Remediation = &helmv2.UpgradeRemediation{Retries: 1}
}

// crashLoopPatches annotate the pod template of every workload kind whose
// pods the upgrade waits for.
func crashLoopPatches() []kustomize.Patch {
	var patches []kustomize.Patch
	for _, kind := range []string{"Deployment", "StatefulSet", "DaemonSet"} {
		patches = append(patches, kustomize.Patch{
			Target: &kustomize.Selector{Group: "apps", Version: "v1", Kind: kind},
			Patch: "apiVersion: apps/v1\nkind: " + kind + "\nmetadata:\n  name: any\nspec:\n  template:\n" +
				"    metadata:\n      annotations:\n        sim.afterhooks.io/fail: crashloop\n",
		})
	}
	return patches
}

// restoreWorkingSpec undoes the failing upgrade's spec: the values and
// post renderers the remediation's rollback restored, so that the release
// is in sync again without an upgrade.
func (s *realSide) restoreWorkingSpec(hr *v2.HelmRelease) {
	hr.Spec.Values = framework.JSONFrom(s.chart.Sim.ChangedValues("values"))
	hr.Spec.PostRenderers = nil
	hr.Spec.Timeout = nil
	if s.chart.Sim.Timeout > 0 {
		hr.Spec.Timeout = &metav1.Duration{Duration: s.chart.Sim.Timeout}
	}
	hr.Spec.Upgrade.Remediation = nil
}

// doDrift turns drift detection on, edits the common metadata label of
// one live object by hand and requests a reconcile, which corrects it.
func (s *realSide) doDrift(t *testing.T) {
	s.changeSpec(t, "drift detection on", func(hr *v2.HelmRelease) {
		hr.Spec.DriftDetection = &helmv2.DriftDetection{Mode: helmv2.DriftDetectionEnabled}
	})
	target := s.driftTarget(t)
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"edited-by-hand"}}}`, commonMetadataKey)
	if err := env.Client.Patch(context.Background(), target, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("%s: editing %s by hand: %v", s.mode, objectName(target), err)
	}
	token := env.RequestReconcile(t, s.hr)
	s.settle(t, parityStep{name: "drift corrected", settled: parityHandled(token), timeout: realStepTimeout})
}

// driftTarget is the live object of the release the drift step edits:
// the first workload, Service or ConfigMap by name, else the first
// object.
func (s *realSide) driftTarget(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	stored := env.Storage(t, s.ns, s.hr.Name)
	if len(stored) == 0 {
		t.Fatalf("%s: no release to edit", s.mode)
	}
	objs := manifestObjects(t, s.ns, stored[len(stored)-1].Release.Manifest)
	slices.SortFunc(objs, func(a, b *unstructured.Unstructured) int {
		if d := driftPreference(a) - driftPreference(b); d != 0 {
			return d
		}
		return strings.Compare(objectName(a), objectName(b))
	})
	for _, obj := range objs {
		if _, ok := liveUID(t, obj); ok {
			return obj
		}
	}
	t.Fatalf("%s: no live object to edit", s.mode)
	return nil
}

// driftPreference ranks candidates for the hand edit by kind.
func driftPreference(obj *unstructured.Unstructured) int {
	rank := slices.Index([]string{"Deployment", "StatefulSet", "DaemonSet", "Service", "ConfigMap"}, obj.GetKind())
	if rank < 0 {
		return 9
	}
	return rank
}

// doSuspendedChange suspends the HelmRelease, then changes its values:
// neither controller may act on it, so there is nothing to wait for but
// time, then for the observation to stay the same.
func (s *realSide) doSuspendedChange(t *testing.T) {
	env.PatchSpec(t, s.hr, func(hr *v2.HelmRelease) { hr.Spec.Suspend = true })
	time.Sleep(2 * time.Second)
	env.PatchSpec(t, s.hr, func(hr *v2.HelmRelease) {
		hr.Spec.Values = framework.JSONFrom(s.chart.Sim.ChangedValues("while-suspended"))
	})
	time.Sleep(5 * time.Second)
	s.settle(t, parityStep{name: "change while suspended", settled: func(*v2.HelmRelease) error { return nil }})
}

// changeSpec changes the HelmRelease's spec and waits until the
// controller settled the new generation.
func (s *realSide) changeSpec(t *testing.T, step string, change func(hr *v2.HelmRelease)) {
	t.Helper()
	env.PatchSpec(t, s.hr, change)
	s.settle(t, parityStep{name: step, settled: parityGenerationSettled, timeout: realStepTimeout})
}

// parityGenerationSettled: the controller is done with the current
// generation: Ready at it, or Stalled at it (it gave up).
func parityGenerationSettled(hr *v2.HelmRelease) error {
	ready, stalled := conditions.Get(hr, meta.ReadyCondition), conditions.Get(hr, meta.StalledCondition)
	if parityReady(hr) == nil && ready.ObservedGeneration == hr.Generation {
		return nil
	}
	if stalled != nil && stalled.Status == metav1.ConditionTrue && stalled.ObservedGeneration == hr.Generation {
		return nil
	}
	return fmt.Errorf("generation %d not settled: %s", hr.Generation, framework.Conditions(hr))
}

// planted tells whether realPlantEnv plants what in this side.
func (s *realSide) planted(what string) bool {
	return plants(s.mode, what)
}

// plants tells whether realPlantEnv plants what in a run in mode.
func plants(mode realMode, what string) bool {
	return mode == realModeDefault && slices.Contains(strings.Split(os.Getenv(realPlantEnv), ","), what)
}

// plantedObservation is obs, with the install's Ready reason rewritten in
// ours' default mode when realPlantEnv is "reason".
func plantedObservation(step string, mode realMode, obs parity.Observation) parity.Observation {
	if step != stepInstall.name || !plants(mode, "reason") {
		return obs
	}
	conds := make(map[string]string, len(obs.Conditions))
	for k, v := range obs.Conditions {
		conds[k] = v
	}
	conds[meta.ReadyCondition] += "Planted"
	obs.Conditions = conds
	return obs
}

// recordRun writes run to the directory realRecordEnv names, if any.
func recordRun(t *testing.T, chart string, run parity.Run) {
	dir := os.Getenv(realRecordEnv)
	if dir == "" {
		return
	}
	if err := run.Write(filepath.Join(dir, chart+"."+run.Mode+".json")); err != nil {
		t.Error(err)
	}
}
