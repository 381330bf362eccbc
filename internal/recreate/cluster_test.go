package recreate

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"

	"github.com/afterhooks/helm-controller/internal/connect"
	"github.com/afterhooks/helm-controller/test/envtestserver"
)

// The tests in this file run against a real kube-apiserver and etcd
// (envtest), started once on first use.
var sharedAPIServer envtestserver.Shared

func TestMain(m *testing.M) { sharedAPIServer.Main(m) }

// cluster returns a clientset and a Getter of the shared API server, with
// the namespaces ns created.
func cluster(t *testing.T, ns ...string) (kubernetes.Interface, *connect.Getter) {
	t.Helper()
	cfg := sharedAPIServer.Config(t)
	cs := kubernetes.NewForConfigOrDie(cfg)
	envtestserver.CreateNamespaces(t, cs, ns...)
	return cs, connect.NewGetter(cfg, "", true)
}

func ownerRef(kind, apiVersion, name string, uid types.UID) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid}}
}

func toUnstructured(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// ClusterDependents finds, through the API server, every object of every
// kind that names an owner, and what names those; in the owner's
// namespace only, unless the owner is cluster-scoped.
func TestClusterDependents(t *testing.T) {
	ctx := context.Background()
	cs, getter := cluster(t, "deps-a", "deps-b")
	owner, err := cs.CoreV1().ConfigMaps("deps-a").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	refs := ownerRef("ConfigMap", "v1", "owner", owner.UID)
	secret, err := cs.CoreV1().Secrets("deps-a").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token", OwnerReferences: refs}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps("deps-a").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "nested",
		OwnerReferences: ownerRef("Secret", "v1", "token", secret.UID)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Another namespace cannot hold a namespaced owner's dependents.
	if _, err := cs.CoreV1().ConfigMaps("deps-b").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", OwnerReferences: refs}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "deps-owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"deps-a", "deps-b"} {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "of-role",
			OwnerReferences: ownerRef("ClusterRole", "rbac.authorization.k8s.io/v1", role.Name, role.UID)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	named := func(deps []Dependent) []string {
		var out []string
		for _, d := range deps {
			out = append(out, d.Kind.String()+" "+d.String())
		}
		return out
	}
	tests := []struct {
		name  string
		owner *unstructured.Unstructured
		uid   types.UID
		want  []string
	}{
		{name: "namespaced owner: its namespace only", owner: toUnstructured(t, owner), uid: owner.UID, want: []string{"Secret Secret/deps-a/token"}},
		{name: "what its dependents own", owner: toUnstructured(t, owner), uid: secret.UID, want: []string{"ConfigMap ConfigMap/deps-a/nested"}},
		{name: "cluster-scoped owner: every namespace", owner: toUnstructured(t, role), uid: role.UID,
			want: []string{"ServiceAccount ServiceAccount/deps-a/of-role", "ServiceAccount ServiceAccount/deps-b/of-role"}},
	}
	deps := NewDependents(getter)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			owners, err := deps.Owned(ctx, tt.owner)
			if err != nil {
				t.Fatal(err)
			}
			got := named(owners[tt.uid])
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("dependents %v, want %v", got, tt.want)
			}
		})
	}
}

// goneKindGetter's discovery still lists a kind the API server no longer
// serves, as when a CRD is deleted between discovery and the list of its
// objects (a chart's uninstall beside the recreate).
type goneKindGetter struct{ *connect.Getter }

func (g goneKindGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	d, err := g.Getter.ToDiscoveryClient()
	return goneKindDiscovery{d}, err
}

type goneKindDiscovery struct {
	discovery.CachedDiscoveryInterface
}

// goneGroupVersion is the group and version the API server no longer
// serves.
const goneGroupVersion = "gone.example.com/v1"

func (d goneKindDiscovery) ServerGroups() (*metav1.APIGroupList, error) {
	groups, err := d.CachedDiscoveryInterface.ServerGroups()
	if err != nil {
		return nil, err
	}
	version := metav1.GroupVersionForDiscovery{GroupVersion: goneGroupVersion, Version: "v1"}
	groups.Groups = append(groups.Groups, metav1.APIGroup{Name: "gone.example.com", Versions: []metav1.GroupVersionForDiscovery{version}, PreferredVersion: version})
	return groups, nil
}

func (d goneKindDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	if gv != goneGroupVersion {
		return d.CachedDiscoveryInterface.ServerResourcesForGroupVersion(gv)
	}
	return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{
		{Name: "records", Kind: "Record", Namespaced: true, Verbs: metav1.Verbs{"get", "list", "watch"}},
	}}, nil
}

// A kind gone between discovery and its list holds no dependents: the
// search goes on without it instead of refusing the recreate.
func TestClusterDependentsKindGoneMeanwhile(t *testing.T) {
	ctx := context.Background()
	cs, getter := cluster(t, "deps-gone")
	owner, err := cs.CoreV1().ConfigMaps("deps-gone").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets("deps-gone").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token",
		OwnerReferences: ownerRef("ConfigMap", "v1", "owner", owner.UID)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	owners, err := NewDependents(goneKindGetter{getter}).Owned(ctx, toUnstructured(t, owner))
	if err != nil {
		t.Fatalf("Owned = %v, want the dependents of the kinds still served", err)
	}
	if got := owners[owner.UID]; len(got) != 1 || got[0].Name != "token" {
		t.Errorf("dependents %v, want Secret token", got)
	}
}

func TestClusterDependentsWithoutACluster(t *testing.T) {
	_, err := NewDependents(nil).Owned(context.Background(), object(cmKind, "a", nil))
	if err == nil || !strings.Contains(err.Error(), "no cluster connection") {
		t.Errorf("Owned = %v, want no cluster connection", err)
	}
}

// jobManifest is a Job of the release "shop" with image and annotations.
func jobManifest(name, image string, annotations string) string {
	return `apiVersion: batch/v1
kind: Job
metadata:
  name: ` + name + `
  namespace: wrap
  annotations: {` + annotations + `}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: run
          image: ` + image + `
`
}

// The wrapped client through Helm's own: what an update refuses is
// recreated when the policy allows it, left in place when a patch shows
// nothing changed, and otherwise fails naming the object.
func TestClientUpdate(t *testing.T) {
	ctx := context.Background()
	cs, getter := cluster(t, "wrap")
	inner := kube.New(getter)
	const enabledAnno = `"helm.toolkit.fluxcd.io/force": "enabled"`
	clientSideForce := []kube.ClientUpdateOption{kube.ClientUpdateOptionServerSideApply(false, false), kube.ClientUpdateOptionForceReplace(true)}
	tests := []struct {
		name        string
		annotations string
		nextImage   string
		opts        []kube.ClientUpdateOption
		dropped     bool // the original has a ConfigMap the target drops
		wantErr     string
		wantNew     bool // the Job has a new UID
		wantHeard   bool
	}{
		{name: "ssa-changed", annotations: enabledAnno, nextImage: "run:2", wantNew: true, wantHeard: true},
		{name: "ssa-changed-drops", annotations: enabledAnno, nextImage: "run:2", dropped: true, wantNew: true, wantHeard: true},
		{name: "ssa-no-consent", nextImage: "run:2", wantErr: "spec.template: field is immutable; annotate it"},
		{name: "csa-force-unchanged", annotations: enabledAnno, nextImage: "run:1", opts: clientSideForce},
		{name: "csa-force-changed", annotations: enabledAnno, nextImage: "run:2", opts: clientSideForce, wantNew: true, wantHeard: true},
		{name: "csa-force-unchanged-no-consent", nextImage: "run:1", opts: clientSideForce, wantErr: "annotate it helm.toolkit.fluxcd.io/force: enabled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			build := func(manifest string) kube.ResourceList {
				list, err := inner.Build(bytes.NewBufferString(manifest), false)
				if err != nil {
					t.Fatal(err)
				}
				return list
			}
			first := jobManifest(tt.name, "run:1", tt.annotations)
			if tt.dropped {
				first += "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + tt.name + "-dropped\n  namespace: wrap\n"
			}
			if _, err := inner.Create(build(first)); err != nil {
				t.Fatal(err)
			}
			// As Helm reads it from the release: the manifest, not what
			// the create returned.
			original := build(first)
			uid := envtestserver.FinishJob(t, cs, "wrap", tt.name).UID
			var heard []Recreated
			c := Wrap(inner, Options{Context: ctx, Deadline: time.Now().Add(time.Minute), Dependents: NewDependents(getter),
				Observer: func(r Recreated) { heard = append(heard, r) }})
			_, err := c.Update(original, build(jobManifest(tt.name, tt.nextImage, tt.annotations)), tt.opts...)
			job, getErr := cs.BatchV1().Jobs("wrap").Get(ctx, tt.name, metav1.GetOptions{})
			if getErr != nil {
				t.Fatal(getErr)
			}
			if (job.UID != uid) != tt.wantNew || (len(heard) > 0) != tt.wantHeard {
				t.Errorf("new Job %v, heard %v; want %v, %v", job.UID != uid, heard, tt.wantNew, tt.wantHeard)
			}
			if tt.wantErr != "" {
				var ierr *ImmutableError
				if !errors.As(err, &ierr) || !strings.Contains(err.Error(), "Job/wrap/"+tt.name) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Update = %v, want an ImmutableError naming the Job with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Update: %v", err)
			}
			if got := job.Spec.Template.Spec.Containers[0].Image; got != tt.nextImage {
				t.Errorf("image %s, want %s", got, tt.nextImage)
			}
			if tt.dropped {
				if _, err := cs.CoreV1().ConfigMaps("wrap").Get(ctx, tt.name+"-dropped", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("the dropped ConfigMap: %v, want it deleted after the recreate", err)
				}
			}
		})
	}
}

// restObject reaches one object of a Helm manifest through the REST
// client Helm built it with: it reads it, dry-runs its creation (refused
// as existing while it is there) and deletes it only while it has the
// UID read, namespaced or cluster-scoped.
func TestRestObject(t *testing.T) {
	ctx := context.Background()
	cs, getter := cluster(t, "rest")
	inner := kube.New(getter)
	tests := []struct {
		name, manifest string
		read           func() (types.UID, error)
	}{
		{name: "namespaced", manifest: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: rest-cm\n  namespace: rest\n",
			read: func() (types.UID, error) {
				cm, err := cs.CoreV1().ConfigMaps("rest").Get(ctx, "rest-cm", metav1.GetOptions{})
				if err != nil {
					return "", err
				}
				return cm.UID, nil
			}},
		{name: "cluster-scoped", manifest: "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: rest-role\n",
			read: func() (types.UID, error) {
				r, err := cs.RbacV1().ClusterRoles().Get(ctx, "rest-role", metav1.GetOptions{})
				if err != nil {
					return "", err
				}
				return r.UID, nil
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list, err := inner.Build(bytes.NewBufferString(tt.manifest), false)
			if err != nil {
				t.Fatal(err)
			}
			obj := &restObject{info: list[0], prepare: func(o runtime.Object) {
				u := o.(*unstructured.Unstructured)
				u.SetLabels(map[string]string{"prepared": "yes"})
			}}
			if _, err := obj.Live(ctx); !apierrors.IsNotFound(err) {
				t.Fatalf("Live before the create = %v, want NotFound", err)
			}
			if err := obj.DryRunCreate(ctx); err != nil {
				t.Fatalf("DryRunCreate of a new object: %v", err)
			}
			if _, err := tt.read(); !apierrors.IsNotFound(err) {
				t.Fatalf("the dry run created it: %v", err)
			}
			if _, err := inner.Create(list); err != nil {
				t.Fatal(err)
			}
			live, err := obj.Live(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := obj.DryRunCreate(ctx); !apierrors.IsAlreadyExists(err) {
				t.Fatalf("DryRunCreate of an existing object = %v, want AlreadyExists", err)
			}
			if err := obj.Delete(ctx, "another-uid", metav1.DeletePropagationBackground); !apierrors.IsConflict(err) {
				t.Fatalf("Delete with another UID = %v, want a Conflict", err)
			}
			if err := obj.Delete(ctx, live.GetUID(), metav1.DeletePropagationBackground); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if err := waitGone(ctx, obj, live.GetUID()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// What the inner client does not refuse for an immutable field passes
// through unchanged.
func TestClientUpdatePassesThrough(t *testing.T) {
	_, getter := cluster(t, "pass")
	inner := kube.New(getter)
	list, err := inner.Build(bytes.NewBufferString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: pass\n  namespace: pass\ndata:\n  a: \"1\"\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	c := Wrap(inner, Options{})
	res, err := c.Update(kube.ResourceList{}, list)
	if err != nil || len(res.Created) != 1 {
		t.Fatalf("Update of a new object = %+v, %v; want it created", res, err)
	}
	// An option Helm refuses is not the API server's refusal of a field.
	_, err = c.Update(list, list, kube.ClientUpdateOptionServerSideApply(true, false), kube.ClientUpdateOptionForceReplace(true))
	var ierr *ImmutableError
	if err == nil || errors.As(err, &ierr) {
		t.Errorf("Update with options Helm refuses = %v, want Helm's own error", err)
	}
	if _, err := c.GetWaiterWithOptions(kube.StatusWatcherStrategy); err != nil {
		t.Errorf("GetWaiterWithOptions: %v", err)
	}
}
