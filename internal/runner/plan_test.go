package runner

import (
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/plan"
)

func TestAfterHooksApplies(t *testing.T) {
	type want struct{ install, upgrade, rollback bool }
	tests := []struct {
		name             string
		spec             func(*v2.HelmRelease)
		defaultHookOrder v2.HookWaitStrategy
		want             want
	}{
		{name: "unset, no default"},
		{name: "unset, default beforeHooks", defaultHookOrder: v2.BeforeHooks},
		{name: "unset, default afterHooks", defaultHookOrder: v2.AfterHooks, want: want{true, true, true}},
		{name: "explicit afterHooks per action", spec: func(o *v2.HelmRelease) {
			o.Spec.Install = &v2.Install{WaitStrategy: v2.AfterHooks}
			o.Spec.Rollback = &v2.Rollback{WaitStrategy: v2.AfterHooks}
		}, want: want{install: true, rollback: true}},
		{name: "explicit beforeHooks wins over the default", defaultHookOrder: v2.AfterHooks, spec: func(o *v2.HelmRelease) {
			o.Spec.Upgrade = &v2.Upgrade{WaitStrategy: v2.BeforeHooks}
		}, want: want{install: true, rollback: true}},
		{name: "disableWait wins over the default", defaultHookOrder: v2.AfterHooks, spec: func(o *v2.HelmRelease) {
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
			r := newRunner(nil, obj, Settings{DefaultHookOrder: tt.defaultHookOrder})
			afterHooks := func(v plan.Verb) bool {
				return r.planFor(v).HookOrder == v2.AfterHooks
			}
			got := want{
				install:  afterHooks(plan.Install),
				upgrade:  afterHooks(plan.Upgrade),
				rollback: afterHooks(plan.Rollback),
			}
			if got != tt.want {
				t.Errorf("afterHooks applies %+v, want %+v", got, tt.want)
			}
		})
	}
}
