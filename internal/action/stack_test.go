package action

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	helmaction "helm.sh/helm/v4/pkg/action"
	chartv2 "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/kube"
	"helm.sh/helm/v4/pkg/postrenderer"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"

	v2 "github.com/afterhooks/helm-controller/api/v2"
	"github.com/afterhooks/helm-controller/internal/ownrevision"
	"github.com/afterhooks/helm-controller/internal/plan"
	"github.com/afterhooks/helm-controller/internal/recreate"
)

// kubeClientLayers names the types of kc and of every kube client it
// wraps, outermost first. Each wrapper embeds the client it wraps.
func kubeClientLayers(kc kube.Interface) []string {
	var names []string
	for kc != nil {
		names = append(names, fmt.Sprintf("%T", kc))
		v := reflect.ValueOf(kc)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			break
		}
		inner := v.Elem().FieldByName("Interface")
		if !inner.IsValid() || inner.IsNil() {
			break
		}
		kc, _ = inner.Interface().(kube.Interface)
	}
	return names
}

// TestStackOrder: an action with every layer sees the kube client
// ordering → afterHooks → recreate → the configuration's own, and the
// storage of afterHooks around the configuration's own driver. The order
// is what makes each layer see the applies it must see (see stacked).
// Every stack is built from a plan alone, as the runner makes them.
func TestStackOrder(t *testing.T) {
	cfg := newFakeConfig(t, "default", nil)
	base := fmt.Sprintf("%T", cfg.KubeClient)
	baseDriver := fmt.Sprintf("%T", cfg.Releases.Driver)
	stop := errors.New("seen")
	policy := &recreate.Policy{}
	tests := []struct {
		name   string
		plan   plan.Plan
		mark   *ownrevision.Mark
		want   []string
		driver string
	}{
		{
			name: "all layers",
			plan: plan.Plan{Verb: plan.Upgrade, HookOrder: v2.AfterHooks, Recreate: policy,
				Wait: plan.Wait{Timeout: time.Minute}, Ordering: plan.Ordering{From: plan.FromRevision}},
			want:   []string{"*sequencing.Client", "*afterhooks.kubeClient", "*recreate.Client", base},
			driver: "*afterhooks.recorder",
		},
		{
			name:   "recreate only",
			plan:   plan.Plan{Verb: plan.Upgrade, HookOrder: v2.BeforeHooks, Recreate: policy, Wait: plan.Wait{Timeout: time.Minute}},
			want:   []string{"*recreate.Client", base},
			driver: baseDriver,
		},
		{
			name: "uninstall in order, never through afterHooks",
			plan: plan.Plan{Verb: plan.Uninstall, HookOrder: v2.AfterHooks,
				Wait: plan.Wait{Timeout: time.Minute}, Ordering: plan.Ordering{From: plan.FromRevision}},
			want:   []string{"*sequencing.Client", base},
			driver: baseDriver,
		},
		{
			name:   "marked: the mark wraps the configuration's own driver",
			plan:   plan.Plan{Verb: plan.Upgrade, HookOrder: v2.BeforeHooks, Wait: plan.Wait{Timeout: time.Minute}},
			mark:   &ownrevision.Mark{Owner: "uid"},
			want:   []string{base},
			driver: "*ownrevision.stamped",
		},
		{
			name:   "nothing planned",
			plan:   plan.Plan{Verb: plan.Install},
			want:   []string{base},
			driver: baseDriver,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var layers []string
			var driver string
			_, err := stacked(context.Background(), cfg, newHR(), Call{Plan: tt.plan, Mark: tt.mark}, nil, func(c *helmaction.Configuration, _ *chartv2.Chart, _ postrenderer.PostRenderer) (*releasev1.Release, error) {
				layers = kubeClientLayers(c.KubeClient)
				driver = fmt.Sprintf("%T", c.Releases.Driver)
				if tt.mark != nil && !wrapsStamp(c.Releases.Driver) {
					t.Error("the storage of a marked action does not reach the mark")
				}
				return nil, stop
			})
			if !errors.Is(err, stop) {
				t.Fatalf("stacked returned %v, not the action's error", err)
			}
			if !slices.Equal(layers, tt.want) {
				t.Errorf("kube client layers %q, want %q", layers, tt.want)
			}
			if driver != tt.driver {
				t.Errorf("storage driver %s, want %s", driver, tt.driver)
			}
		})
	}
}

// wrapsStamp tells whether d is, or wraps, the mark's storage wrapper.
func wrapsStamp(d driver.Driver) bool {
	for d != nil {
		if fmt.Sprintf("%T", d) == "*ownrevision.stamped" {
			return true
		}
		w, ok := d.(interface{ Unwrap() driver.Driver })
		if !ok {
			return false
		}
		d = w.Unwrap()
	}
	return false
}
