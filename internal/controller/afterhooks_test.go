package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	helmaction "helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/release/common"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage"
	"helm.sh/helm/v4/pkg/storage/driver"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/action"
	"github.com/afterhooks/helm-controller/internal/reconcile"
)

func TestAfterHooksApplies(t *testing.T) {
	type want struct{ install, upgrade, rollback bool }
	tests := []struct {
		name        string
		spec        func(*v2.HelmRelease)
		defaultWait v2.HookWaitStrategy
		want        want
	}{
		{name: "unset, no default"},
		{name: "unset, default beforeHooks", defaultWait: v2.BeforeHooks},
		{name: "unset, default afterHooks", defaultWait: v2.AfterHooks, want: want{true, true, true}},
		{name: "explicit afterHooks per action", spec: func(o *v2.HelmRelease) {
			o.Spec.Install = &v2.Install{WaitStrategy: v2.AfterHooks}
			o.Spec.Rollback = &v2.Rollback{WaitStrategy: v2.AfterHooks}
		}, want: want{install: true, rollback: true}},
		{name: "explicit beforeHooks wins over the default", defaultWait: v2.AfterHooks, spec: func(o *v2.HelmRelease) {
			o.Spec.Upgrade = &v2.Upgrade{WaitStrategy: v2.BeforeHooks}
		}, want: want{install: true, rollback: true}},
		{name: "disableWait wins over the default", defaultWait: v2.AfterHooks, spec: func(o *v2.HelmRelease) {
			o.Spec.Install = &v2.Install{Install: helmv2.Install{DisableWait: true}}
			o.Spec.Upgrade = &v2.Upgrade{Upgrade: helmv2.Upgrade{DisableWait: true}}
		}, want: want{rollback: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &v2.HelmRelease{}
			if tt.spec != nil {
				tt.spec(obj)
			}
			got := want{
				install:  afterHooksInstall(obj, tt.defaultWait),
				upgrade:  afterHooksUpgrade(obj, tt.defaultWait),
				rollback: afterHooksRollback(obj, tt.defaultWait),
			}
			if got != tt.want {
				t.Errorf("afterHooks applies %+v, want %+v", got, tt.want)
			}
		})
	}
}

// When Helm reports success but its final storage write never reached the
// afterHooks wrapper (Helm only logs a failed final write), nothing is held
// and no readiness wait ran: that must not count as a success.
func TestAfterHooksSuccessWithoutHeldRevisionIsAnError(t *testing.T) {
	cfg := helmaction.NewConfiguration()
	cfg.Releases = storage.Init(driver.NewMemory())
	h := &helmRunner{cfg: cfg, obj: &v2.HelmRelease{}}
	rel := &releasev1.Release{Name: "app", Namespace: "default", Version: 1,
		Info: &releasev1.Info{Status: common.StatusDeployed}}
	run := func(*helmaction.Configuration, action.Options) (*releasev1.Release, error) {
		return rel, nil // as if Helm's final write had failed and been logged
	}
	got, err := h.runAfterHooks(context.Background(), "install", action.Wait{Timeout: time.Minute}, run)
	if err == nil {
		t.Fatalf("runAfterHooks returned %v with no error although no readiness wait ran", got)
	}
	if !strings.Contains(err.Error(), "readiness") {
		t.Errorf("error %q does not say the readiness wait did not run", err)
	}
}

// With CancelHealthCheckOnNewRevision, a new revision that cancels Helm's
// own waits under afterHooks (the CRD wait) is a cancellation, mapped as the
// beforeHooks path maps it, not a failure of the action.
func TestAfterHooksHelmCancelledByNewRevision(t *testing.T) {
	cfg := helmaction.NewConfiguration()
	cfg.Releases = storage.Init(driver.NewMemory())
	h := &helmRunner{cfg: cfg, obj: &v2.HelmRelease{},
		newRevision: &newRevisionWatch{trigger: "HelmRelease/apps/web generation changed"}}
	run := func(*helmaction.Configuration, action.Options) (*releasev1.Release, error) {
		return nil, fmt.Errorf("waiting for CRDs to be established: %w", context.Canceled)
	}
	_, err := h.runAfterHooks(context.Background(), "install", action.Wait{Timeout: time.Minute}, run)
	var canceled *reconcile.HealthCheckCanceledError
	if !errors.As(err, &canceled) {
		t.Fatalf("runAfterHooks = %v, want a HealthCheckCanceledError", err)
	}
}
