package reconcile

import (
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

// TargetChanged says why the spec now points at another Helm release than
// the one the status records (status.storageNamespace and the head of
// status.history): a changed storage namespace, release namespace or
// release name, or a chart of another name (chartName, the chart to
// release) under chartNameChangeStrategy Reinstall. It is "" when nothing
// was released yet or nothing moved. The controller checks it before the
// state machine, whatever state the release is in, as upstream does: the
// recorded release is uninstalled, and the next reconcile installs afresh.
func TargetChanged(obj *v2.HelmRelease, chartName string) string {
	cur := obj.Status.History.Latest()
	switch {
	case obj.Status.StorageNamespace == "" || cur == nil:
		return ""
	case obj.GetStorageNamespace() != obj.Status.StorageNamespace:
		return fmt.Sprintf("storage namespace changed from '%s' to '%s'", obj.Status.StorageNamespace, obj.GetStorageNamespace())
	case obj.GetReleaseNamespace() != cur.Namespace:
		return fmt.Sprintf("release namespace changed from '%s' to '%s'", cur.Namespace, obj.GetReleaseNamespace())
	case v2.ReleaseName(obj) != cur.Name:
		return fmt.Sprintf("release name changed from '%s' to '%s'", cur.Name, v2.ReleaseName(obj))
	case chartName != cur.ChartName && obj.GetUpgrade().GetChartNameChangeStrategy() == helmv2.ChartNameChangeStrategyReinstall:
		return fmt.Sprintf("chart renamed from '%s' to '%s' (chartNameChangeStrategy Reinstall)", cur.ChartName, chartName)
	}
	return ""
}

// PreviousTarget is a copy of obj aimed at the release its status records:
// the storage namespace of the status and, when the history has one, the
// name of its head. Helm's default namespace stays the one the spec names
// now, as upstream's uninstall has it: the old release's objects whose
// templates leave metadata.namespace to Helm are then looked for there and,
// after a targetNamespace change, left where they are (fluxcd/flux2#1005).
// Deleting them would remove what upstream keeps.
func PreviousTarget(obj *v2.HelmRelease) *v2.HelmRelease {
	prev := obj.DeepCopy()
	if obj.Status.StorageNamespace != "" {
		prev.Spec.StorageNamespace = obj.Status.StorageNamespace
	}
	if cur := obj.Status.History.Latest(); cur != nil {
		prev.Spec.ReleaseName = cur.Name
	}
	return prev
}
