package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/test/chartgen"
	"github.com/afterhooks/helm-controller/test/chartserver"
	"github.com/afterhooks/helm-controller/test/e2e/framework"
)

// The generated scenarios' steps done by hand (chartgen.Step.ByHand) and
// the controller kill. Each side does the same thing to its own release,
// then asks for a reconcile and waits until the controller handled it and
// the release stays put: what each controller makes of a release changed
// behind its back is then compared as any other step.

// byHandStep is step, done by hand, as a real-chart step.
func byHandStep(step chartgen.Step, ref chartserver.ChartRef) realStep {
	return realStep{name: string(step), do: func(side *realSide, t *testing.T) {
		side.doByHand(t, step, ref)
		token := env.RequestReconcile(t, side.hr)
		side.settle(t, parityStep{name: string(step), settled: parityHandled(token), timeout: realStepTimeout})
	}}
}

func (s *realSide) doByHand(t *testing.T, step chartgen.Step, ref chartserver.ChartRef) {
	t.Helper()
	switch step {
	case chartgen.StepHelmUpgrade:
		s.helmByHand(t, "upgrade", s.hr.Name, pullChart(t, env.Charts.HelmRepositoryURL(), ref.Name, ref.Version), "--reuse-values", "--wait=false", "--force-conflicts")
	case chartgen.StepHelmUpgradeWait:
		s.helmByHand(t, "upgrade", s.hr.Name, pullChart(t, env.Charts.HelmRepositoryURL(), ref.Name, ref.Version), "--reuse-values", "--wait=watcher",
			"--timeout", generatedTimeout.String(), "--force-conflicts")
	case chartgen.StepHelmRollback:
		s.helmByHand(t, "rollback", s.hr.Name, "--force-conflicts")
	case chartgen.StepHelmUninstall:
		s.helmByHand(t, "uninstall", s.hr.Name)
	case chartgen.StepKubectlDelete:
		s.deleteByHand(t)
	case chartgen.StepKubectlEdit:
		s.editByHand(t)
	case chartgen.StepDeleteReleaseSecret:
		s.deleteLatestReleaseSecret(t)
	default:
		t.Fatalf("%s: %q is no step done by hand", s.mode, step)
	}
}

// helmByHand runs the helm CLI on the side's namespace. A command that
// fails is part of the scenario (a rollback of a release with nothing to
// go back to, an upgrade whose wait times out): it is logged, and the
// step goes on to the reconcile.
func (s *realSide) helmByHand(t *testing.T, args ...string) {
	t.Helper()
	if out, err := runHelm(t, s.ns, args...); err != nil {
		t.Logf("%s: helm %s by hand failed (part of the scenario): %v\n%s", s.mode, strings.Join(args, " "), err, out)
	}
}

// handTarget is the live object of the release a hand step changes (the
// one the drift step of the real charts edits), or nil when the release
// has none.
func (s *realSide) handTarget(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	if len(env.Storage(t, s.ns, s.hr.Name)) == 0 {
		return nil
	}
	return s.driftTarget(t)
}

func (s *realSide) deleteByHand(t *testing.T) {
	t.Helper()
	target := s.handTarget(t)
	if target == nil {
		t.Logf("%s: no object of the release to delete", s.mode)
		return
	}
	if err := env.Client.Delete(context.Background(), target); client.IgnoreNotFound(err) != nil {
		t.Fatalf("%s: kubectl delete %s: %v", s.mode, objectName(target), err)
	}
}

// editByHand changes a field the chart sets on the target: drift.
func (s *realSide) editByHand(t *testing.T) {
	t.Helper()
	target := s.handTarget(t)
	if target == nil {
		t.Logf("%s: no object of the release to edit", s.mode)
		return
	}
	patch := `{"metadata":{"labels":{"edited":"by-hand"}}}`
	switch target.GetKind() {
	case "Deployment", "StatefulSet":
		patch = `{"spec":{"replicas":2}}`
	case "ConfigMap":
		patch = `{"data":{"revision":"edited-by-hand"}}`
	case "Service":
		patch = `{"spec":{"selector":{"app":"edited-by-hand"}}}`
	}
	if err := env.Client.Patch(context.Background(), target, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("%s: kubectl edit %s: %v", s.mode, objectName(target), err)
	}
}

// deleteLatestReleaseSecret deletes the Helm storage Secret of the
// release's newest revision.
func (s *realSide) deleteLatestReleaseSecret(t *testing.T) {
	t.Helper()
	stored := env.Storage(t, s.ns, s.hr.Name)
	if len(stored) == 0 {
		t.Logf("%s: no release Secret to delete", s.mode)
		return
	}
	latest := stored[len(stored)-1].Release.Version
	secret := &corev1.Secret{}
	secret.Namespace, secret.Name = s.ns, fmt.Sprintf("sh.helm.release.v1.%s.v%d", s.hr.Name, latest)
	if err := env.Client.Delete(context.Background(), secret); err != nil {
		t.Fatalf("%s: deleting %s: %v", s.mode, secret.Name, err)
	}
}

// killedUpgradeStep is StepUpgradeKilled at step i of s: the values
// change; once Helm stored the new revision pending (or after
// killPendingWait if it never does), the controller is killed
// s.KillAfter later and started again, and the step waits until the
// release settled on the new generation. Counting from the pending
// revision puts the kill at the same point of the action under both
// controllers, as far as their speeds allow.
func killedUpgradeStep(s chartgen.Scenario, i int) realStep {
	step := chartgen.StepUpgradeKilled
	return realStep{name: string(step), do: func(side *realSide, t *testing.T) {
		before := len(env.Storage(t, side.ns, side.hr.Name))
		env.PatchSpec(t, side.hr, func(hr *v2.HelmRelease) { hr.Spec.Values = framework.JSONFrom(s.Values(i)) })
		side.waitPendingRevision(t, before)
		time.Sleep(s.KillAfter)
		framework.Kill(t, side.ctl)
		framework.Restart(t, side.ctl)
		framework.EnsureRunning(t, side.ctl)
		side.settle(t, parityStep{name: string(step), settled: generatedSettled, timeout: realStepTimeout})
	}}
}

// killPendingWait bounds the wait for the upgrade's pending revision: an
// upgrade that fails before Helm stores anything never shows one.
const killPendingWait = 30 * time.Second

// waitPendingRevision waits until Helm storage holds a revision beyond the
// first before, pending or already finished.
func (s *realSide) waitPendingRevision(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(killPendingWait)
	for time.Now().Before(deadline) {
		if len(env.Storage(t, s.ns, s.hr.Name)) > before {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%s: no new revision %s after the spec change; killing the controller anyway", s.mode, killPendingWait)
}

// generatedDrift turns drift detection on when the scenario asks.
func generatedDrift(s chartgen.Scenario, hr *v2.HelmRelease) {
	if s.Drift {
		hr.Spec.DriftDetection = &helmv2.DriftDetection{Mode: helmv2.DriftDetectionEnabled}
	}
}
