package controller

import (
	"context"
	"slices"
	"sort"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	v2 "github.com/afterhooks/helm-controller/api/v2"
)

func releaseWithValuesFrom(namespace, name string, refs ...meta.ValuesReference) *v2.HelmRelease {
	hr := &v2.HelmRelease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	hr.Spec.ValuesFrom = refs
	return hr
}

func cmRef(name string) meta.ValuesReference {
	return meta.ValuesReference{Kind: "ConfigMap", Name: name}
}

func secretRef(name string) meta.ValuesReference {
	return meta.ValuesReference{Kind: "Secret", Name: name}
}

// remoteRelease reads the Secret db-creds in valuesFrom and kc from spec.kubeConfig.
func remoteRelease(kc *meta.KubeConfigReference) *v2.HelmRelease {
	hr := releaseWithValuesFrom("apps", "remote", secretRef("db-creds"))
	hr.Spec.KubeConfig = kc
	return hr
}

func TestConfigValuesFromIndexer(t *testing.T) {
	hr := releaseWithValuesFrom("apps", "web",
		cmRef("common"),
		secretRef("db-creds"),
		cmRef("overrides"),
		meta.ValuesReference{Kind: "ConfigMap", Name: "common", ValuesKey: "other.yaml"},
		meta.ValuesReference{Kind: "Secret", Name: "tls", Optional: true},
	)
	cases := []struct {
		name string
		kind string
		obj  client.Object
		want []string
	}{
		{name: "configmaps, deduplicated", kind: "ConfigMap", obj: hr, want: []string{"apps/common", "apps/overrides"}},
		{name: "secrets", kind: "Secret", obj: hr, want: []string{"apps/db-creds", "apps/tls"}},
		{name: "no valuesFrom", kind: "ConfigMap", obj: releaseWithValuesFrom("apps", "bare"), want: nil},
		{name: "only the other kind", kind: "Secret", obj: releaseWithValuesFrom("apps", "cm-only", cmRef("x")), want: nil},
		{name: "not a HelmRelease", kind: "ConfigMap", obj: &corev1.ConfigMap{}, want: nil},
		{name: "kubeconfig Secret", kind: "Secret", obj: remoteRelease(&meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: "kc"}}),
			want: []string{"apps/db-creds", "apps/kc"}},
		{name: "kubeconfig Secret is not a ConfigMap", kind: "ConfigMap", obj: remoteRelease(&meta.KubeConfigReference{SecretRef: &meta.SecretKeyReference{Name: "kc"}}),
			want: nil},
		{name: "kubeconfig ConfigMap", kind: "ConfigMap", obj: remoteRelease(&meta.KubeConfigReference{ConfigMapRef: &meta.LocalObjectReference{Name: "eks"}}),
			want: []string{"apps/eks"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := valuesFromIndexer(tc.kind)(tc.obj)
			sort.Strings(got)
			if !slices.Equal(got, tc.want) || (tc.want == nil && got != nil) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestConfigWatchOptionsFromFlags(t *testing.T) {
	selected := labels.Set{meta.LabelKeyWatch: meta.LabelValueWatchEnabled}

	o, err := NewConfigWatchOptions(meta.LabelKeyWatch+"="+meta.LabelValueWatchEnabled, false)
	if err != nil {
		t.Fatal(err)
	}
	if !o.Enabled() || !o.Selector.Matches(selected) || o.Selector.Matches(labels.Set{}) {
		t.Fatalf("default selector %v: want watches on, matching only %v", o.Selector, selected)
	}

	o, err = NewConfigWatchOptions(meta.LabelKeyWatch+"="+meta.LabelValueWatchEnabled, true)
	if err != nil || o.Enabled() || o.Selector != nil {
		t.Fatalf("gate DisableConfigWatchers: got %v, %v; want watches off", o, err)
	}

	o, err = NewConfigWatchOptions("", false)
	if err != nil || !o.Enabled() || !o.Selector.Matches(labels.Set{}) {
		t.Fatalf("empty selector: got %v, %v; want every object watched", o.Selector, err)
	}

	if _, err := NewConfigWatchOptions("a in (", false); err == nil {
		t.Fatal("invalid selector: want an error")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("MustConfigWatchOptions with an invalid selector: want a panic")
			}
		}()
		MustConfigWatchOptions("a in (", false)
	}()
}

func configMeta(kind, namespace, name, rv string, lbls map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: rv, Labels: lbls},
	}
}

func TestConfigChangedPredicate(t *testing.T) {
	p := configChanged{selector: labels.SelectorFromSet(labels.Set{meta.LabelKeyWatch: meta.LabelValueWatchEnabled})}
	on := map[string]string{meta.LabelKeyWatch: meta.LabelValueWatchEnabled, "app": "web"}
	off := map[string]string{"app": "web"}
	obj := func(rv string, lbls map[string]string) client.Object {
		return configMeta("Secret", "apps", "values", rv, lbls)
	}

	if !p.Create(event.CreateEvent{Object: obj("1", on)}) {
		t.Error("create of a labelled object: want pass")
	}
	if p.Create(event.CreateEvent{Object: obj("1", off)}) {
		t.Error("create of an unlabelled object: want drop")
	}
	if !p.Delete(event.DeleteEvent{Object: obj("1", on)}) {
		t.Error("delete of a labelled object: want pass")
	}
	if p.Delete(event.DeleteEvent{Object: obj("1", off)}) {
		t.Error("delete of an unlabelled object: want drop")
	}
	if !p.Generic(event.GenericEvent{Object: obj("1", on)}) || p.Generic(event.GenericEvent{Object: obj("1", nil)}) {
		t.Error("generic: want pass for labelled objects only")
	}

	updates := []struct {
		name     string
		old, new client.Object
		want     bool
	}{
		{name: "resourceVersion changed", old: obj("1", on), new: obj("2", on), want: true},
		{name: "resync, same resourceVersion", old: obj("5", on), new: obj("5", on), want: false},
		{name: "unlabelled object changed", old: obj("1", off), new: obj("2", off), want: false},
		{name: "label added", old: obj("1", off), new: obj("2", on), want: true},
		{name: "label removed", old: obj("1", on), new: obj("2", off), want: true},
		{name: "label value changed away", old: obj("1", on), new: obj("2", map[string]string{meta.LabelKeyWatch: "Disabled"}), want: true},
		{name: "missing old object", old: nil, new: obj("2", on), want: false},
	}
	for _, tc := range updates {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
				t.Fatalf("Update = %v, want %v", got, tc.want)
			}
		})
	}

	everything := configChanged{selector: labels.Everything()}
	if !everything.Update(event.UpdateEvent{ObjectOld: obj("1", nil), ObjectNew: obj("2", nil)}) {
		t.Error("empty selector: want every changed object to pass")
	}
	if (configChanged{}).Create(event.CreateEvent{Object: obj("1", on)}) {
		t.Error("nil selector: want every event dropped")
	}
}

func configTestScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := v2.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConfigRequestsForConfig(t *testing.T) {
	objs := []client.Object{
		releaseWithValuesFrom("apps", "web", cmRef("common"), secretRef("db")),
		releaseWithValuesFrom("apps", "api", cmRef("common")),
		releaseWithValuesFrom("apps", "worker", secretRef("common")),
		releaseWithValuesFrom("other", "web", cmRef("common")),
		releaseWithValuesFrom("apps", "bare"),
	}
	c := fake.NewClientBuilder().
		WithScheme(configTestScheme(t)).
		WithObjects(objs...).
		WithIndex(&v2.HelmRelease{}, valuesFromConfigMapsIndexKey, valuesFromIndexer("ConfigMap")).
		WithIndex(&v2.HelmRelease{}, valuesFromSecretsIndexKey, valuesFromIndexer("Secret")).
		Build()
	r := &HelmReleaseReconciler{Client: c}

	cases := []struct {
		name     string
		indexKey string
		obj      client.Object
		want     []string
	}{
		{name: "shared configmap", indexKey: valuesFromConfigMapsIndexKey, obj: configMeta("ConfigMap", "apps", "common", "1", nil), want: []string{"apps/api", "apps/web"}},
		{name: "same name in another namespace", indexKey: valuesFromConfigMapsIndexKey, obj: configMeta("ConfigMap", "other", "common", "1", nil), want: []string{"other/web"}},
		{name: "secret with a configmap's name", indexKey: valuesFromSecretsIndexKey, obj: configMeta("Secret", "apps", "common", "1", nil), want: []string{"apps/worker"}},
		{name: "secret", indexKey: valuesFromSecretsIndexKey, obj: configMeta("Secret", "apps", "db", "1", nil), want: []string{"apps/web"}},
		{name: "unreferenced", indexKey: valuesFromConfigMapsIndexKey, obj: configMeta("ConfigMap", "apps", "nobody", "1", nil), want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, req := range r.requestsForConfig(tc.indexKey)(context.Background(), tc.obj) {
				got = append(got, req.String())
			}
			sort.Strings(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}

	// Without the index the list fails; the map function then enqueues nothing.
	bare := &HelmReleaseReconciler{Client: fake.NewClientBuilder().WithScheme(configTestScheme(t)).WithObjects(objs...).Build()}
	if reqs := bare.requestsForConfig(valuesFromConfigMapsIndexKey)(context.Background(), configMeta("ConfigMap", "apps", "common", "1", nil)); len(reqs) != 0 {
		t.Fatalf("without an index: got %v, want no requests", reqs)
	}
}

// recordingIndexer remembers the field indexes registered with it.
type recordingIndexer struct {
	fns map[string]client.IndexerFunc
}

func (i *recordingIndexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	if _, ok := obj.(*v2.HelmRelease); !ok {
		return nil
	}
	i.fns[field] = fn
	return nil
}

// indexerOnlyManager is a manager that only hands out a field indexer;
// building a controller is not needed to check the watch setup.
type indexerOnlyManager struct {
	ctrl.Manager
	indexer *recordingIndexer
}

func (m *indexerOnlyManager) GetFieldIndexer() client.FieldIndexer { return m.indexer }

func TestConfigSetupWatches(t *testing.T) {
	newMgr := func() *indexerOnlyManager {
		return &indexerOnlyManager{indexer: &recordingIndexer{fns: map[string]client.IndexerFunc{}}}
	}
	r := &HelmReleaseReconciler{}

	mgr := newMgr()
	b := builder.ControllerManagedBy(mgr)
	got, err := r.setupConfigWatches(context.Background(), mgr, b, ConfigWatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got != b || len(mgr.indexer.fns) != 0 {
		t.Fatalf("watches disabled: want the builder unchanged and no index, got %d indexes", len(mgr.indexer.fns))
	}

	mgr = newMgr()
	b = builder.ControllerManagedBy(mgr)
	got, err = r.setupConfigWatches(context.Background(), mgr, b, ConfigWatchOptions{Selector: labels.Everything()})
	if err != nil {
		t.Fatal(err)
	}
	if got == nil {
		t.Fatal("watches enabled: got a nil builder")
	}
	hr := releaseWithValuesFrom("apps", "web", cmRef("values"), secretRef("creds"))
	for key, want := range map[string]string{valuesFromConfigMapsIndexKey: "apps/values", valuesFromSecretsIndexKey: "apps/creds"} {
		fn, ok := mgr.indexer.fns[key]
		if !ok {
			t.Fatalf("index %q not registered; have %v", key, mgr.indexer.fns)
		}
		if keys := fn(hr); !slices.Equal(keys, []string{want}) {
			t.Errorf("index %q: got %v, want [%s]", key, keys, want)
		}
	}
}
