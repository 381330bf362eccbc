package reconcile

import (
	"context"
	"errors"
	"fmt"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	"github.com/fluxcd/pkg/runtime/conditions"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// mustReinstall tells whether the chart's name changed under a release
// whose upgrade.chartNameChangeStrategy is Reinstall (the default): the old
// release is uninstalled and the new chart installed fresh, instead of
// upgrading one chart into another.
func mustReinstall(req *Request, cur *releasev1.Release) bool {
	if cur == nil || cur.Chart == nil || cur.Chart.Metadata == nil {
		return false
	}
	if cur.Chart.Metadata.Name == req.Chart.Metadata().Name {
		return false
	}
	return req.Object.GetUpgrade().GetChartNameChangeStrategy() == helmv2.ChartNameChangeStrategyReinstall
}

// reinstall uninstalls a release whose chart was renamed; the next step of
// the machine installs the new chart.
func (m *Machine) reinstall(ctx context.Context, req *Request, cur *releasev1.Release) error {
	from, to := cur.Chart.Metadata.Name, req.Chart.Metadata().Name
	latest := req.Object.Status.History.Latest()
	if err := m.uninstall(ctx, req); err != nil {
		msg := fmt.Sprintf("Helm uninstall of release %s for a reinstall (chart renamed from %s to %s) failed: %s",
			releaseID(cur), from, to, trimError(err))
		countFailure(ctx, req)
		conditions.MarkFalse(req.Object, helmv2.ReleasedCondition, helmv2.UninstallFailedReason, "%s", msg)
		m.warning(req, latest, helmv2.UninstallFailedReason, msg)
		return errors.New(msg)
	}
	msg := fmt.Sprintf("Helm uninstall succeeded for release %s: chart renamed from %s to %s, reinstalling", releaseID(cur), from, to)
	m.normal(req, latest, helmv2.UninstallSucceededReason, msg)
	return nil
}
