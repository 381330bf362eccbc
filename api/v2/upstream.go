package v2

import (
	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reaching upstream's helpers.
//
// Upstream's HelmRelease has helpers (release name and namespaces,
// defaults, the active remediation...) that ours cannot inherit: our spec
// shadows the fields some of them read. Two ways reach them:
//
//   - The methods below, for reading. They answer exactly as the same
//     helper of Upstream() would, without copying the object: they call
//     upstream's helper on a shallow view that shares every map, slice and
//     pointer with this object. Use them whenever a value is all you need.
//     A value they return may share memory with this object (the Retry of
//     GetActiveRetry, the filters of GetTest...): do not modify it.
//   - Upstream(), a deep copy, for a real upstream object: one that is
//     modified, or that upstream code is handed and may keep or change
//     (helmv2.ShouldHandleResetRequest writes the status it is given).
//
// A helper missing below is added here the same way, as a one-line call on
// upstreamView, and to upstreamGoHelpers in upstream_test.go, which
// compares it with the same helper of Upstream().

// Upstream returns a deep copy of the object as upstream's type, with
// Install, Upgrade, Rollback and Uninstall taken from this object (without
// waitStrategy and deleteHookResources), spec.waitStrategy with its name
// only and spec.dependsOn without apiVersion, kind and ready. Changes to the copy are not reflected in this object. To only read
// a value through one of upstream's helpers, use this type's method of the
// same name instead (GetReleaseName, GetActiveRemediation, ...): it answers
// the same without the copy.
func (in *HelmRelease) Upstream() *helmv2.HelmRelease {
	view := in.upstreamView()
	return view.DeepCopy()
}

// apiVersion is GroupVersion as a string, made once.
var apiVersion = GroupVersion.String()

// upstreamView is the object as upstream's type, sharing every map, slice
// and pointer with in: only for upstream's read-only helpers, and never
// returned. The shadowed upstream spec fields point at the upstream part
// of ours; spec.waitStrategy, which upstream cannot hold with its
// readinessTimeout, is a new one with our name. It is a value: held in a
// variable of the caller, whose helper call does not keep it, it stays on
// the stack, where a pointer put a copy of the whole object on the heap on
// every call (an eighth of what a reconcile finding its release in sync
// allocated).
func (in *HelmRelease) upstreamView() helmv2.HelmRelease {
	view := helmv2.HelmRelease{
		TypeMeta:   metav1.TypeMeta{Kind: helmv2.HelmReleaseKind, APIVersion: apiVersion},
		ObjectMeta: in.ObjectMeta,
		Spec:       in.Spec.HelmReleaseSpec,
		Status:     in.Status.HelmReleaseStatus,
	}
	spec := &in.Spec
	if spec.Install != nil {
		view.Spec.Install = &spec.Install.Install
	}
	if spec.Upgrade != nil {
		view.Spec.Upgrade = &spec.Upgrade.Upgrade
	}
	if spec.Rollback != nil {
		view.Spec.Rollback = &spec.Rollback.Rollback
	}
	if spec.Uninstall != nil {
		view.Spec.Uninstall = &spec.Uninstall.Uninstall
	}
	if spec.WaitStrategy != nil {
		view.Spec.WaitStrategy = &helmv2.WaitStrategy{Name: spec.WaitStrategy.Name}
	}
	if len(spec.DependsOn) > 0 {
		// What upstream's type decodes from ours: every entry, without
		// apiVersion, kind and ready, which it does not know.
		deps := make([]helmv2.DependencyReference, len(spec.DependsOn))
		for i, d := range spec.DependsOn {
			deps[i] = d.Upstream()
		}
		view.Spec.DependsOn = deps
	}
	return view
}

// GetReleaseName returns spec.releaseName, else "[targetNamespace-]name",
// as upstream does: not shortened to Helm's limit.
func (in *HelmRelease) GetReleaseName() string {
	view := in.upstreamView()
	return view.GetReleaseName()
}

// GetReleaseNamespace returns spec.targetNamespace, else the object's
// namespace.
func (in *HelmRelease) GetReleaseNamespace() string {
	view := in.upstreamView()
	return view.GetReleaseNamespace()
}

// GetStorageNamespace returns spec.storageNamespace, else the object's
// namespace.
func (in *HelmRelease) GetStorageNamespace() string {
	view := in.upstreamView()
	return view.GetStorageNamespace()
}

// GetMaxHistory returns spec.maxHistory, else upstream's default.
func (in *HelmRelease) GetMaxHistory() int {
	view := in.upstreamView()
	return view.GetMaxHistory()
}

// GetTimeout returns spec.timeout, else upstream's default.
func (in *HelmRelease) GetTimeout() metav1.Duration {
	view := in.upstreamView()
	return view.GetTimeout()
}

// UsePersistentClient returns spec.persistentClient, else true.
func (in *HelmRelease) UsePersistentClient() bool {
	view := in.upstreamView()
	return view.UsePersistentClient()
}

// GetValues returns spec.values decoded, nil when unset or not an object.
func (in *HelmRelease) GetValues() map[string]any {
	view := in.upstreamView()
	return view.GetValues()
}

// GetDriftDetection returns spec.driftDetection, the zero value when unset.
func (in *HelmRelease) GetDriftDetection() helmv2.DriftDetection {
	view := in.upstreamView()
	return view.GetDriftDetection()
}

// GetTest returns spec.test, the zero value when unset.
func (in *HelmRelease) GetTest() helmv2.Test {
	view := in.upstreamView()
	return view.GetTest()
}

// GetWaitStrategy returns spec.waitStrategy.name (ordered included), ""
// when unset.
func (in *HelmRelease) GetWaitStrategy() helmv2.WaitStrategyName {
	view := in.upstreamView()
	return view.GetWaitStrategy()
}

// GetPostRenderStrategy returns spec.postRenderStrategy.
func (in *HelmRelease) GetPostRenderStrategy() helmv2.PostRenderStrategy {
	view := in.upstreamView()
	return view.GetPostRenderStrategy()
}

// GetActiveRemediation returns the remediation of the last attempted
// action, install or upgrade; nil for any other.
func (in *HelmRelease) GetActiveRemediation() helmv2.Remediation {
	view := in.upstreamView()
	return view.GetActiveRemediation()
}

// GetActiveRetry returns the retry strategy of the last attempted action,
// install or upgrade; nil for any other, or when it remediates instead.
func (in *HelmRelease) GetActiveRetry(defaultToRetryOnFailure bool) helmv2.Retry {
	view := in.upstreamView()
	return view.GetActiveRetry(defaultToRetryOnFailure)
}

// FailureCount is rem.GetFailureCount on this object: how often the action
// rem remediates failed.
func (in *HelmRelease) FailureCount(rem helmv2.Remediation) int64 {
	view := in.upstreamView()
	return rem.GetFailureCount(&view)
}

// RetriesExhausted is rem.RetriesExhausted on this object: whether the
// action rem remediates failed more often than it may be retried.
func (in *HelmRelease) RetriesExhausted(rem helmv2.Remediation) bool {
	view := in.upstreamView()
	return rem.RetriesExhausted(&view)
}
