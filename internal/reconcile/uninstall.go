package reconcile

import (
	"context"
	"errors"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/afterhooks/helm-controller/internal/helmverb"
	"github.com/afterhooks/helm-controller/internal/hookcleanup"
)

// uninstallRemediation removes a failed release so that the next install
// starts clean.
func (m *Machine) uninstallRemediation(ctx context.Context, req *Request) error {
	latest := req.Object.Status.History.Latest()
	m.announce(req, helmverb.Uninstall, req.Object.GetUninstall().GetTimeout(req.Object.GetTimeout()), false)
	if err := m.uninstall(ctx, req); err != nil {
		msg := fmt.Sprintf("Helm uninstall remediation for release %s failed: %s", describeRelease(latest), trimError(err))
		countFailure(ctx, req)
		conditions.MarkFalse(req.Object, helmv2.RemediatedCondition, helmv2.UninstallFailedReason, "%s", msg)
		m.warning(req, latest, helmv2.UninstallFailedReason, msg)
		return errors.New(msg)
	}
	msg := fmt.Sprintf("Helm uninstall remediation for release %s succeeded", describeRelease(latest))
	conditions.MarkTrue(req.Object, helmv2.RemediatedCondition, helmv2.UninstallSucceededReason, "%s", msg)
	m.normal(req, latest, helmv2.UninstallSucceededReason, msg)
	return nil
}

// Uninstall removes the release for a HelmRelease being deleted and
// records it; the caller removes the finalizer when it returns nil.
func (m *Machine) Uninstall(ctx context.Context, req *Request) error {
	if req.Object.Status.History.Latest() == nil {
		// As upstream: a HelmRelease that never recorded a release of its
		// own (one adopted from `helm install` whose first upgrade did not
		// render, say) leaves what storage holds alone.
		return nil
	}
	cur, err := m.lastRelease(ctx)
	if err != nil {
		return err
	}
	// A release uninstalled by a run of the controller that stopped
	// before deleting what its hooks left is uninstalled again: only that
	// deletion and the end of its records remain.
	if cur == nil || cur.Info == nil || (cur.Info.Status == "uninstalled" && !hookcleanup.Pending(cur)) {
		return nil
	}
	if err := m.uninstall(ctx, req); err != nil {
		msg := fmt.Sprintf("Helm uninstall failed for release %s: %s", uninstalledRelease(cur), trimError(err))
		countFailure(ctx, req)
		conditions.MarkFalse(req.Object, helmv2.ReleasedCondition, helmv2.UninstallFailedReason, "%s", msg)
		// As upstream: Ready says the deletion is stuck, rather than what
		// the last install or upgrade did.
		summarize(req)
		m.warning(req, req.Object.Status.History.Latest(), helmv2.UninstallFailedReason, msg)
		return errors.New(msg)
	}
	msg := fmt.Sprintf("Helm uninstall succeeded for release %s", uninstalledRelease(cur))
	conditions.MarkFalse(req.Object, helmv2.ReleasedCondition, helmv2.UninstallSucceededReason, "%s", msg)
	m.normal(req, req.Object.Status.History.Latest(), helmv2.UninstallSucceededReason, msg)
	return nil
}

// uninstalledRelease names cur and its chart, as upstream's uninstall
// messages do: "<namespace>/<name>.v<version> with chart <name>@<version>".
func uninstalledRelease(cur *releasev1.Release) string {
	if cur.Chart == nil || cur.Chart.Metadata == nil {
		return releaseID(cur)
	}
	return fmt.Sprintf("%s with chart %s@%s", releaseID(cur), cur.Chart.Metadata.Name, cur.Chart.Metadata.Version)
}

func (m *Machine) uninstall(ctx context.Context, req *Request) error {
	if err := m.Helm.Uninstall(ctx); err != nil {
		return err
	}
	if latest := req.Object.Status.History.Latest(); latest != nil {
		latest.Status = "uninstalled"
		latest.Deleted = metav1.NewTime(m.now())
	}
	return nil
}
